"""A task reads the runtime settings, each override and the catalog once, however many hops."""

from collections.abc import Mapping, Sequence

from agents.context import CatalogSnapshot, PackageInfo, SegmentInfo
from agents.sources import (
    OverrideTemplate,
    RolloutCandidate,
    RuntimeSettings,
    TaskScopedKBSource,
    TaskScopedPromptSource,
)
from agents.states import AgentName


class CountingPromptSource:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def active_override(self, agent: AgentName) -> OverrideTemplate | None:
        self.calls.append(f"override:{agent.value}")
        if agent is AgentName.TRIAGEM:
            return OverrideTemplate(content="Olá", version="override:7")
        return None

    def active_overrides(self) -> dict[AgentName, OverrideTemplate | None]:
        self.calls.append("actives")
        return {
            AgentName.TRIAGEM: OverrideTemplate(content="Olá", version="override:7"),
            AgentName.QUALIFICACAO: None,
            AgentName.COLETA: None,
        }

    def rollout_candidates(self) -> dict[AgentName, RolloutCandidate]:
        self.calls.append("candidates")
        return {}

    def override_at(self, agent: AgentName, version: str) -> OverrideTemplate | None:
        self.calls.append(f"at:{agent.value}:{version}")
        return OverrideTemplate(content=f"texto de {version}", version=version)

    def chosen_override(self, agent: AgentName) -> OverrideTemplate | None:
        self.calls.append(f"chosen:{agent.value}")
        return None

    def live_release(self) -> int | None:
        self.calls.append("release")
        return None

    def runtime(self) -> RuntimeSettings:
        self.calls.append("runtime")
        return RuntimeSettings(agent_name="Lia", company_name="Lab", business_hours={})


class CountingKBSource:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def catalog(self) -> CatalogSnapshot:
        self.calls.append("catalog")
        return CatalogSnapshot(segments={"AMBIENTAL": SegmentInfo("AMBIENTAL", "Ambiental")})

    def load_packages(
        self, package_ids: Sequence[str], versions: Mapping[str, int] | None = None
    ) -> dict[str, PackageInfo]:
        self.calls.append(
            "load:" + ",".join(package_ids) + (f"@{dict(versions)}" if versions else "")
        )
        return {pid: PackageInfo(pid, pid.title(), "d", content="c") for pid in package_ids}


def test_prompt_source_reads_runtime_once_and_each_agents_override_once() -> None:
    inner = CountingPromptSource()
    source = TaskScopedPromptSource(inner)

    first = source.runtime()
    assert source.runtime() is first
    assert source.active_override(AgentName.TRIAGEM) == OverrideTemplate("Olá", "override:7")
    assert source.active_override(AgentName.TRIAGEM) == OverrideTemplate("Olá", "override:7")
    assert source.active_override(AgentName.COLETA) is None
    assert source.active_override(AgentName.COLETA) is None

    assert inner.calls == ["runtime", "override:triagem", "override:coleta"]


def test_prompt_source_reads_the_active_overrides_once_and_serves_their_versions() -> None:
    inner = CountingPromptSource()
    source = TaskScopedPromptSource(inner)

    actives = source.active_overrides()
    assert source.active_overrides() is actives
    # The version a first turn pins is the active override it was read with: no second read.
    assert source.override_at(AgentName.TRIAGEM, "override:7") == OverrideTemplate(
        "Olá", "override:7"
    )
    # An older version is read once (history rows never change).
    for _ in range(2):
        assert source.override_at(AgentName.TRIAGEM, "override:3") == OverrideTemplate(
            "texto de override:3", "override:3"
        )
    for _ in range(2):
        assert source.chosen_override(AgentName.COLETA) is None

    assert inner.calls == ["actives", "at:triagem:override:3", "chosen:coleta"]


def test_kb_source_reads_the_catalog_once_and_packages_every_time() -> None:
    inner = CountingKBSource()
    source = TaskScopedKBSource(inner)

    assert source.catalog() is source.catalog()
    assert list(source.load_packages(["COMPANY_INFO"])) == ["COMPANY_INFO"]
    assert list(source.load_packages(["COMPANY_INFO", "GOYOU"])) == ["COMPANY_INFO", "GOYOU"]

    assert inner.calls == ["catalog", "load:COMPANY_INFO", "load:COMPANY_INFO,GOYOU"]


def test_prompt_source_reads_the_release_candidates_once() -> None:
    inner = CountingPromptSource()
    source = TaskScopedPromptSource(inner)

    assert source.rollout_candidates() is source.rollout_candidates()
    assert inner.calls == ["candidates"]


def test_prompt_source_reads_the_published_release_once_even_when_none_is() -> None:
    inner = CountingPromptSource()
    source = TaskScopedPromptSource(inner)

    assert [source.live_release(), source.live_release()] == [None, None]
    assert inner.calls == ["release"]


def test_kb_source_passes_the_pinned_versions_through() -> None:
    inner = CountingKBSource()
    source = TaskScopedKBSource(inner)

    source.load_packages(["COMPANY_INFO"], {"COMPANY_INFO": 41})

    assert inner.calls == ["load:COMPANY_INFO@{'COMPANY_INFO': 41}"]
