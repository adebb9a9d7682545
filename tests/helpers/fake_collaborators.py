"""In-process fakes of the invoker's collaborators (they implement the Protocols of
agents/sources.py and agents/llm.py) and a small sample catalog, for tests without a database."""

from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from datetime import datetime
from typing import Any

from agents.business_hours import BUSINESS_TZ, business_hours_status
from agents.context import (
    CatalogSnapshot,
    InstanceInfo,
    IntentInfo,
    PackageInfo,
    SegmentInfo,
    ServiceInfo,
    SessionContext,
)
from agents.invoker import AgentInvoker, InvokerConfig
from agents.llm import CallPurpose, ChatMessage, LLMCallResult, LLMError
from agents.parameters import ParameterSpec
from agents.prompts.inputs import PromptInputs
from agents.sources import (
    CallRecord,
    HistoryEntry,
    OverrideTemplate,
    RolloutCandidate,
    RuntimeSettings,
    StrategicCompanyInfo,
)
from agents.states import AGENT_FOR_STATE, PROMPT_AGENTS, AgentName, SessionState
from agents.templating import ProblemKind

# Tuesday 2026-03-10 10:00 in São Paulo: open with the weekly hours below.
NOW = datetime(2026, 3, 10, 10, 0, tzinfo=BUSINESS_TZ)
WEEKLY = {
    "mon": [["08:00", "18:00"]],
    "tue": [["08:00", "18:00"]],
    "wed": [["08:00", "18:00"]],
    "thu": [["08:00", "18:00"]],
    "fri": [["08:00", "17:00"]],
    "sat": [],
    "sun": [],
}
MODELS = {
    AgentName.TRIAGEM: "model-triage",
    AgentName.QUALIFICACAO: "model-qualification",
    AgentName.COLETA: "model-collection",
}

RUNTIME = RuntimeSettings(
    agent_name="Lia",
    company_name="Laboratório Exemplo",
    business_hours=WEEKLY,
    strategic_companies=(
        StrategicCompanyInfo("Indústria Estratégica S.A.", "11222333000181", ("5511912345678",)),
    ),
)

WATER = ServiceInfo(
    code="ANALISE_AGUA_POTABILIDADE",
    label="Análise de potabilidade da água",
    segment="AMBIENTAL",
    description="Análise físico-química e microbiológica de água para consumo.",
    parameters=(
        ParameterSpec("quantidade_amostras", "Quantidade de amostras", "integer", True),
        ParameterSpec(
            "origem_agua", "Origem da água", "choice", True, ("poço", "rede pública", "outra")
        ),
        ParameterSpec("data_coleta", "Data desejada para a coleta", "date", False),
    ),
)
TOXICOLOGY = ServiceInfo(
    code="EXAME_TOXICOLOGICO",
    label="Exame toxicológico",
    segment="HUMANO",
    parameters=(ParameterSpec("finalidade", "Finalidade do exame", "text", True),),
)
PACKAGES = {
    "UNIDADES_ENDERECOS": PackageInfo(
        "UNIDADES_ENDERECOS",
        "Endereços das unidades",
        "Endereços e horários das unidades de coleta",
        content="Unidade Centro: Rua das Flores, 100, Campinas/SP.",
        version=11,
    ),
    "COLETA_AGUA": PackageInfo(
        "COLETA_AGUA",
        "Coleta de água",
        "Como coletar amostras de água",
        content="Use o frasco estéril fornecido pelo laboratório; não enxágue o frasco.",
        version=12,
    ),
    "PREPARO_EXAMES": PackageInfo(
        "PREPARO_EXAMES",
        "Preparo para exames",
        "Orientações de preparo para exames humanos",
        health_sensitive=True,
        content="Jejum de 8 horas para exames de sangue.",
        version=13,
    ),
}
CATALOG = CatalogSnapshot(
    segments={
        "AMBIENTAL": SegmentInfo("AMBIENTAL", "Ambiental"),
        "HUMANO": SegmentInfo("HUMANO", "Saúde humana", health_sensitive=True),
    },
    intents={
        "ORCAMENTO": IntentInfo("ORCAMENTO", "Orçamento"),
        "AGENDAMENTO": IntentInfo("AGENDAMENTO", "Agendamento de coleta"),
    },
    services={WATER.code: WATER, TOXICOLOGY.code: TOXICOLOGY},
    # The catalog lists packages without their content.
    packages={pid: replace(p, content="", version=None) for pid, p in PACKAGES.items()},
)
INSTANCE = InstanceInfo(name="Laboratório Exemplo — Campinas", display_phone="+55 19 3333-4444")
STATE_OF = {
    AgentName.TRIAGEM: SessionState.TRIAGE,
    AgentName.QUALIFICACAO: SessionState.QUALIFYING,
    AgentName.COLETA: SessionState.DATA_COLLECT,
}


def make_session(agent: AgentName = AgentName.TRIAGEM, **overrides: Any) -> SessionContext:
    fields: dict[str, Any] = {
        "session_id": 7,
        "state": STATE_OF[agent],
        "instance": INSTANCE,
        "customer_phone": "5519987654321",
        "customer_name": "Marina",
    }
    if agent is not AgentName.TRIAGEM:
        fields.update(segment="AMBIENTAL", intent="ORCAMENTO")
    if agent is AgentName.COLETA:
        fields.update(
            service=WATER.code,
            technical_data={"quantidade_amostras": 2, "origem_agua": "poço"},
            registration_data={"nome": "Marina Souza"},
        )
    fields.update(overrides)
    assert AGENT_FOR_STATE[fields["state"]] == agent
    return SessionContext(**fields)


def other_session(agent: AgentName, **overrides: Any) -> SessionContext:
    """A session of `agent` unlike `make_session`'s in every per-call fact: another id,
    instance, customer, segment, intention, data and a loaded health-sensitive package."""
    fields: dict[str, Any] = {
        "session_id": 99,
        "instance": replace(INSTANCE, name="Outra unidade", brand_context="Outra marca."),
        "customer_name": "Paulo",
        "customer_phone": "5511955554444",
        "segment": "HUMANO",
        "intent": "AGENDAMENTO",
        "technical_data": {"finalidade": "admissional"},
        "registration_data": {"nome": "Paulo Lima"},
        "loaded_packages": ("PREPARO_EXAMES",),
    }
    return make_session(agent, **(fields | overrides))


def make_inputs(
    agent: AgentName = AgentName.TRIAGEM,
    *,
    session: SessionContext | None = None,
    runtime: RuntimeSettings = RUNTIME,
    catalog: CatalogSnapshot = CATALOG,
    loaded: Mapping[str, PackageInfo] | None = None,
    now: datetime = NOW,
) -> PromptInputs:
    session = session or make_session(agent)
    if loaded is None:
        loaded = {pid: PACKAGES[pid] for pid in session.loaded_packages}
    return PromptInputs(
        agent=agent,
        session=session,
        runtime=runtime,
        catalog=catalog,
        loaded_packages=loaded,
        hours=business_hours_status(runtime.business_hours, now),
        now=now,
    )


class FakePromptSource:
    """`overrides`: the active ones; `versions`: older texts by version (what `override_at`
    finds); `chosen`: the simulator's choice."""

    def __init__(
        self,
        runtime: RuntimeSettings = RUNTIME,
        overrides: Mapping[AgentName, OverrideTemplate] | None = None,
        versions: Mapping[str, OverrideTemplate] | None = None,
        chosen: Mapping[AgentName, OverrideTemplate] | None = None,
        release: int | None = None,
    ) -> None:
        self._runtime = runtime
        self.overrides = dict(overrides or {})
        self.versions = dict(versions or {})
        self.chosen = dict(chosen or {})
        self.release = release

    def active_override(self, agent: AgentName) -> OverrideTemplate | None:
        return self.overrides.get(agent)

    def active_overrides(self) -> dict[AgentName, OverrideTemplate | None]:
        return {agent: self.overrides.get(agent) for agent in PROMPT_AGENTS}

    def rollout_candidates(self) -> dict[AgentName, RolloutCandidate]:
        return {}

    def override_at(self, agent: AgentName, version: str) -> OverrideTemplate | None:
        active = self.overrides.get(agent)
        if active is not None and active.version == version:
            return active
        return self.versions.get(version)

    def chosen_override(self, agent: AgentName) -> OverrideTemplate | None:
        return self.chosen.get(agent)

    def live_release(self) -> int | None:
        return self.release

    def runtime(self) -> RuntimeSettings:
        return self._runtime


class FakeKBSource:
    """`packages`: the active ones; `versions`: older ones by history id (what a pinned version
    finds, whether or not the package is active)."""

    def __init__(
        self,
        catalog: CatalogSnapshot = CATALOG,
        packages: Mapping[str, PackageInfo] = PACKAGES,
        versions: Mapping[int, PackageInfo] | None = None,
    ) -> None:
        self._catalog = catalog
        self._packages = packages
        self._versions = dict(versions or {})
        self.load_calls: list[list[str]] = []
        self.load_versions: list[dict[str, int]] = []

    def catalog(self) -> CatalogSnapshot:
        return self._catalog

    def load_packages(
        self, package_ids: Sequence[str], versions: Mapping[str, int] | None = None
    ) -> dict[str, PackageInfo]:
        self.load_calls.append(list(package_ids))
        self.load_versions.append(dict(versions or {}))
        found: dict[str, PackageInfo] = {}
        for pid in package_ids:
            pinned = self._versions.get((versions or {}).get(pid, -1))
            if pinned is not None and pinned.package_id == pid:
                found[pid] = pinned
            elif pid in self._packages:
                found[pid] = self._packages[pid]
        return found


class FakeHistorySource:
    """Returns the stored entries; `leaky=True` ignores the session id like a buggy query."""

    def __init__(self, entries: Sequence[HistoryEntry] = (), *, leaky: bool = False) -> None:
        self.entries = list(entries)
        self.leaky = leaky
        self.calls: list[tuple[int, int]] = []

    def history(self, session_id: int, limit: int) -> list[HistoryEntry]:
        self.calls.append((session_id, limit))
        rows = [e for e in self.entries if self.leaky or e.session_id == session_id]
        return rows[-limit:]


@dataclass
class RecordingRecorder:
    calls: list[dict[str, Any]] = field(default_factory=list)

    def record(self, call: CallRecord) -> None:
        # As a dict of the record's fields (not `asdict`, which would turn the result into one).
        self.calls.append({f.name: getattr(call, f.name) for f in fields(call)})


class FakeLLM:
    """Answers from a queue of texts or errors; records what it was asked."""

    def __init__(self, *answers: str | LLMError) -> None:
        self.answers: deque[str | LLMError] = deque(answers)
        self.calls: list[dict[str, Any]] = []

    def chat(
        self,
        *,
        model: str,
        instructions: str,
        messages: Sequence[ChatMessage],
        purpose: CallPurpose,
        cache_key: str = "",
    ) -> LLMCallResult:
        self.calls.append(
            {
                "model": model,
                "instructions": instructions,
                "messages": list(messages),
                "purpose": purpose,
                "cache_key": cache_key,
            }
        )
        answer = self.answers.popleft() if self.answers else '{"s":1}Olá!'
        if isinstance(answer, LLMError):
            raise answer
        return LLMCallResult(answer, model, 100, 10, 5)


def make_invoker(
    *,
    llm: Any = None,
    prompts: FakePromptSource | None = None,
    kb: FakeKBSource | None = None,
    history: FakeHistorySource | None = None,
    recorder: RecordingRecorder | None = None,
    max_history: int = 50,
    clock: Callable[[], datetime] = lambda: NOW,
) -> AgentInvoker:
    return AgentInvoker(
        llm=llm if llm is not None else FakeLLM(),
        prompts=prompts or FakePromptSource(),
        kb=kb or FakeKBSource(),
        history=history or FakeHistorySource(),
        recorder=recorder if recorder is not None else RecordingRecorder(),
        config=InvokerConfig(models=MODELS, max_history_messages=max_history, clock=clock),
    )


# The attacks on prompt templates (docs/operations.md, Prompt template limits), each with the one problem the
# allow-list reports for it: run, each would allocate hundreds of megabytes or hang the worker.
NESTED_FOR = (
    "{% for a in agent_name %}{% for b in agent_name %}{% for c in agent_name %}"
    "{% for d in agent_name %}{% for e in agent_name %}{{ company_name }}"
    "{% endfor %}{% endfor %}{% endfor %}{% endfor %}{% endfor %}"
)
TEMPLATE_ATTACKS: dict[str, tuple[str, tuple[ProblemKind, str, int]]] = {
    "lorem": ("Olá!\n{% lorem 2000000 w %}", ("tag_not_allowed", "lorem", 2)),
    "ljust": ('{{ agent_name|ljust:"300000000" }}', ("filter_not_allowed", "ljust", 1)),
    "nested-for": (NESTED_FOR, ("tag_not_allowed", "for", 1)),
    "conditional": (
        '{% if customer_name == "" %}{{ agent_name|ljust:"150000000" }}{% endif %}',
        ("filter_not_allowed", "ljust", 1),
    ),
}
