"""A task reads the runtime settings, each override and the catalog once, however many hops."""

from collections.abc import Sequence

from agents.context import CatalogSnapshot, PackageInfo, SegmentInfo
from agents.sources import (
    OverrideTemplate,
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

    def runtime(self) -> RuntimeSettings:
        self.calls.append("runtime")
        return RuntimeSettings(agent_name="Lia", company_name="Lab", business_hours={})


class CountingKBSource:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def catalog(self) -> CatalogSnapshot:
        self.calls.append("catalog")
        return CatalogSnapshot(segments={"AMBIENTAL": SegmentInfo("AMBIENTAL", "Ambiental")})

    def load_packages(self, package_ids: Sequence[str]) -> dict[str, PackageInfo]:
        self.calls.append("load:" + ",".join(package_ids))
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


def test_kb_source_reads_the_catalog_once_and_packages_every_time() -> None:
    inner = CountingKBSource()
    source = TaskScopedKBSource(inner)

    assert source.catalog() is source.catalog()
    assert list(source.load_packages(["COMPANY_INFO"])) == ["COMPANY_INFO"]
    assert list(source.load_packages(["COMPANY_INFO", "GOYOU"])) == ["COMPANY_INFO", "GOYOU"]

    assert inner.calls == ["catalog", "load:COMPANY_INFO", "load:COMPANY_INFO,GOYOU"]
