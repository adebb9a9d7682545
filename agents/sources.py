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
from agents.states import AgentName

# Values of conversations.models.Direction (agents never imports conversations).
HistoryDirection = Literal["INBOUND", "OUTBOUND", "SYSTEM"]

BUILTIN_PROMPT_VERSION = "builtin"


@dataclass(frozen=True, slots=True)
class OverrideTemplate:
    """The active PromptOverride of an agent: its template text and the version it is."""

    content: str
    # "override:<history_id>": the django-simple-history row of the override as it is now.
    version: str


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


class PromptSource(Protocol):
    def active_override(self, agent: AgentName) -> OverrideTemplate | None:
        """The agent's active override, or None to use the built-in prompt."""
        ...

    def runtime(self) -> RuntimeSettings: ...


class KBSource(Protocol):
    def catalog(self) -> CatalogSnapshot:
        """Every active segment, intent, service and package (packages without content)."""
        ...

    def load_packages(self, package_ids: Sequence[str]) -> dict[str, PackageInfo]:
        """The active packages among `package_ids`, with content and version; unknown ids are
        simply absent from the result."""
        ...


class HistorySource(Protocol):
    def history(self, session_id: int, limit: int) -> list[HistoryEntry]:
        """The session's newest `limit` conversational entries, oldest first."""
        ...


class CallRecorder(Protocol):
    def record(
        self,
        *,
        session_id: int,
        agent: AgentName,
        purpose: CallPurpose,
        model: str,
        result: LLMCallResult | None,
        error: LLMError | None,
        prompt_version: str,
        context_snapshot: Mapping[str, Any] | None,
        raw_response: str,
        turn_id: UUID | None,
        message_id: int | None,
    ) -> None:
        """Store one model call (success: `result`; failure: `error`)."""
        ...


class TaskScopedPromptSource:
    """A PromptSource that reads the runtime settings and each agent's override once.

    One per task run (a Celery `process_session`): the pipeline and the invoker then share one
    read instead of each reading again at every agent hop. A staff edit reaches the next task.
    """

    def __init__(self, inner: PromptSource) -> None:
        self._inner = inner
        self._runtime: RuntimeSettings | None = None
        self._overrides: dict[AgentName, OverrideTemplate | None] = {}

    def active_override(self, agent: AgentName) -> OverrideTemplate | None:
        if agent not in self._overrides:
            self._overrides[agent] = self._inner.active_override(agent)
        return self._overrides[agent]

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

    def load_packages(self, package_ids: Sequence[str]) -> dict[str, PackageInfo]:
        return self._inner.load_packages(package_ids)
