"""The collaborators an agent call reads from and records to, as Protocols, and their data.

The invoker (`agents/invoker.py`) is given one of each; the Django implementations live beside
their models (`prompts_admin/selectors.py`, `knowledge_base/selectors.py`,
`conversations/agent_sources.py`), and tests pass small in-process fakes. Pure module.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol
from uuid import UUID

from agents.context import CatalogSnapshot, PackageInfo
from agents.llm import CallPurpose, LLMCallResult, LLMError
from agents.media_markers import MediaView, media_text
from agents.states import PROMPT_AGENTS, AgentName

# Values of conversations.models.Direction (agents never imports conversations).
HistoryDirection = Literal["INBOUND", "OUTBOUND", "SYSTEM"]

BUILTIN_PROMPT_VERSION = "builtin"


@dataclass(frozen=True, slots=True)
class OverrideTemplate:
    """A PromptOverride of an agent as one version of it: its template text and that version."""

    content: str
    # "override:<history_id>": the django-simple-history row of the override this text is.
    version: str


@dataclass(frozen=True, slots=True)
class RolloutCandidate:
    """An agent's candidate version (agents.rollout) and the share of new conversations, 1 to
    99, that pin it instead of the active override."""

    override: OverrideTemplate
    percent: int


def prompt_versions_of(
    overrides: Mapping[AgentName, OverrideTemplate | None],
) -> dict[str, str]:
    """What a session pins: each prompt agent's version, keyed by agent value ("builtin" for an
    agent with no override)."""
    versions: dict[str, str] = {}
    for agent in PROMPT_AGENTS:
        override = overrides.get(agent)
        versions[agent.value] = override.version if override is not None else BUILTIN_PROMPT_VERSION
    return versions


def package_versions_of(packages: Mapping[str, PackageInfo]) -> dict[str, int]:
    """What a session pins of the knowledge: each package's version, keyed by package id (a
    package read with no version is not pinned: it is given as it is then)."""
    return {pid: info.version for pid, info in packages.items() if info.version is not None}


@dataclass(frozen=True, slots=True)
class StrategicCompanyInfo:
    name: str
    cnpj: str = ""
    # Digits only (E.164 without +), as the sessions store phones.
    phones: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class RuntimeSettings:
    """RuntimeConfig as the agents need it (identity, hours, strategic companies, fixed texts)."""

    agent_name: str
    company_name: str
    # {"mon": [["08:00", "18:00"]], ..., "sun": []} in Brasília time.
    business_hours: Mapping[str, list[list[str]]]
    strategic_companies: tuple[StrategicCompanyInfo, ...] = ()
    handoff_message_open: str = ""
    handoff_message_closed: str = ""
    unsupported_media_message: str = ""
    invalid_format_message: str = ""
    # The satisfaction question after a confirmed lead (conversations.satisfaction).
    satisfaction_after_lead: bool = False
    satisfaction_question: str = ""
    satisfaction_style: str = "buttons"


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    """One row of a session's message log, as the history rules need it."""

    session_id: int
    direction: HistoryDirection
    content: str
    error: str = ""
    message_id: int | None = None
    # OUTBOUND written by a member of the team (a staff reply or template), not by the model.
    staff: bool = False
    # A quoted reply: the text of the session's message it answers ("" when it quotes none, or
    # one the session does not hold); `agents.history` marks the entry with it.
    quoted: str = ""
    # A media message's readable part: the model reads `agents.media_markers.media_text` of it.
    media: MediaView | None = None

    @property
    def text(self) -> str:
        """What the model reads of this row: the media's marker or transcript, else the text."""
        return media_text(self.media) if self.media is not None else self.content


class PromptSource(Protocol):
    def active_override(self, agent: AgentName) -> OverrideTemplate | None:
        """The agent's active override, or None to use the built-in prompt."""
        ...

    def active_overrides(self) -> Mapping[AgentName, OverrideTemplate | None]:
        """Every prompt agent's active override (None: built-in), in one read: what a session
        pins at its first turn."""
        ...

    def rollout_candidates(self) -> Mapping[AgentName, RolloutCandidate]:
        """The agents being released gradually (agents.rollout), with their candidate: read
        with `active_overrides` at a session's first turn."""
        ...

    def override_at(self, agent: AgentName, version: str) -> OverrideTemplate | None:
        """The agent's override as it was at `version` ("override:<history_id>"), even if it was
        edited, deactivated or deleted since; None when that version cannot be read."""
        ...

    def chosen_override(self, agent: AgentName) -> OverrideTemplate | None:
        """An override the caller chose for this run, which wins over the session's pinned
        version (the simulator's draft); None for none."""
        ...

    def live_release(self) -> int | None:
        """The id of the published release (`prompts_admin.Release`), None when none is: what a
        session pins with its prompt versions at its first turn."""
        ...

    def runtime(self) -> RuntimeSettings: ...


class KBSource(Protocol):
    def catalog(self) -> CatalogSnapshot:
        """Every active segment, intent, service and package (packages without content, with
        their version: what a session pins at its first turn)."""
        ...

    def load_packages(
        self, package_ids: Sequence[str], versions: Mapping[str, int] | None = None
    ) -> dict[str, PackageInfo]:
        """The packages among `package_ids`, with content and version: each one in `versions`
        at that version (its history row, even if edited or deactivated since); the others, and
        one whose version cannot be read, as they are now if active. Unknown ids are simply
        absent from the result."""
        ...


class HistorySource(Protocol):
    def history(self, session_id: int, limit: int) -> list[HistoryEntry]:
        """The session's newest `limit` conversational entries, oldest first."""
        ...


@dataclass(frozen=True, slots=True)
class CallRecord:
    """One model call to store: a success (`result`) or a failure (`error`), never both.

    `prompt_version` and `context_snapshot` are what the call was built from (the replay and the
    outcome metrics read them back); `turn_id` and `message_id` tie it to the turn and the
    customer message it answered, when it answered one."""

    session_id: int
    agent: AgentName
    purpose: CallPurpose
    model: str
    prompt_version: str
    result: LLMCallResult | None = None
    error: LLMError | None = None
    context_snapshot: Mapping[str, Any] | None = None
    raw_response: str = ""
    turn_id: UUID | None = None
    message_id: int | None = None

    def __post_init__(self) -> None:
        if (self.result is None) == (self.error is None):
            raise ValueError("a call record holds a result or an error, and only one")


class CallRecorder(Protocol):
    def record(self, call: CallRecord) -> None:
        """Store one model call."""
        ...


class TaskScopedPromptSource:
    """A PromptSource that reads the runtime settings and each agent's override once.

    One per task run (a Celery `process_session`): the pipeline and the invoker then share one
    read instead of each reading again at every agent hop. A staff edit reaches the next task.
    A version read once is kept (history rows do not change); the version a first turn pins is
    served from the active overrides it was pinned from, with no second read.
    """

    def __init__(self, inner: PromptSource) -> None:
        self._inner = inner
        self._runtime: RuntimeSettings | None = None
        self._overrides: dict[AgentName, OverrideTemplate | None] = {}
        self._actives: Mapping[AgentName, OverrideTemplate | None] | None = None
        self._candidates: Mapping[AgentName, RolloutCandidate] | None = None
        self._versions: dict[tuple[AgentName, str], OverrideTemplate | None] = {}
        self._chosen: dict[AgentName, OverrideTemplate | None] = {}
        self._release: tuple[int | None] | None = None

    def active_override(self, agent: AgentName) -> OverrideTemplate | None:
        if agent not in self._overrides:
            self._overrides[agent] = self._inner.active_override(agent)
        return self._overrides[agent]

    def active_overrides(self) -> Mapping[AgentName, OverrideTemplate | None]:
        if self._actives is None:
            self._actives = self._inner.active_overrides()
        return self._actives

    def rollout_candidates(self) -> Mapping[AgentName, RolloutCandidate]:
        if self._candidates is None:
            self._candidates = self._inner.rollout_candidates()
        return self._candidates

    def override_at(self, agent: AgentName, version: str) -> OverrideTemplate | None:
        active = self._actives.get(agent) if self._actives is not None else None
        if active is not None and active.version == version:
            return active
        key = (agent, version)
        if key not in self._versions:
            self._versions[key] = self._inner.override_at(agent, version)
        return self._versions[key]

    def chosen_override(self, agent: AgentName) -> OverrideTemplate | None:
        if agent not in self._chosen:
            self._chosen[agent] = self._inner.chosen_override(agent)
        return self._chosen[agent]

    def live_release(self) -> int | None:
        if self._release is None:
            self._release = (self._inner.live_release(),)
        return self._release[0]

    def runtime(self) -> RuntimeSettings:
        if self._runtime is None:
            self._runtime = self._inner.runtime()
        return self._runtime


class TaskScopedKBSource:
    """A KBSource that reads the catalog once per task run (see `TaskScopedPromptSource`);
    package contents are read when asked, since the loaded set grows within a turn."""

    def __init__(self, inner: KBSource) -> None:
        self._inner = inner
        self._catalog: CatalogSnapshot | None = None

    def catalog(self) -> CatalogSnapshot:
        if self._catalog is None:
            self._catalog = self._inner.catalog()
        return self._catalog

    def load_packages(
        self, package_ids: Sequence[str], versions: Mapping[str, int] | None = None
    ) -> dict[str, PackageInfo]:
        return self._inner.load_packages(package_ids, versions)
