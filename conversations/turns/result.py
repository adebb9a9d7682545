"""What a turn is and what it decided, in memory: `Turn` (which messages, under which lease),
`TurnResult` (the session as the turn leaves it, its events, its reply or its handoff) and
`turn_failure` (the result of every failure: a handoff with the fixed text, never the model's).

Thinking (`conversations.turns.think`) builds a `TurnResult`; the commit
(`conversations.turns.commit`) writes it.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from uuid import UUID

from agents.context import SessionContext
from agents.contract import ParsedLLMResponse
from agents.states import AgentName, HandoffReason, SessionState
from conversations.dispatcher import Handoff, SystemEvent
from whatsapp.interactive import Option

_DETAIL_CHARS = 255


@dataclass(frozen=True, slots=True)
class SessionPin:
    """What a session's first turn pins, kept until it ends: each prompt agent's version, the
    published release (None: none was) and each active package's version."""

    prompt_versions: Mapping[str, str]
    release_id: int | None = None
    package_versions: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Turn:
    """One turn of a session: its pending inbound messages, answered under the lease `token`."""

    session_id: int
    turn_id: UUID
    token: UUID
    state: SessionState
    inbound_ids: tuple[int, ...]
    last_inbound_id: int
    # What the customer wrote this turn (searched for a strategic company's name or CNPJ); a
    # media message as the agents read it (`agents.media_markers`).
    texts: tuple[str, ...] = ()
    # The turn's media say it goes to a human before any model call (`media_handoff`).
    media_handoff: HandoffReason | None = None
    # What this turn pinned (the session's first turn; None: pinned before). The commit writes
    # it only if the session has no prompt versions yet.
    pin: SessionPin | None = None


@dataclass(frozen=True, slots=True)
class Reply:
    """The model's customer text, the options sent with it, and the answer it came from."""

    text: str
    agent: AgentName
    parsed: ParsedLLMResponse
    raw_response: str
    # Reply buttons or list rows under the text (the dispatcher's `Step.options`).
    options: tuple[Option, ...] = ()


@dataclass(slots=True)
class TurnResult:
    """A turn thought through in memory, ready to commit."""

    context: SessionContext
    # The agent whose answer decided the outcome (None: decided before any model call).
    agent: AgentName | None = None
    events: list[SystemEvent] = field(default_factory=list)
    reply: Reply | None = None  # the model's text to send (1, 4, 6, 8, 5)
    handoff: Handoff | None = None
    create_lead: bool = False
    close: bool = False
    # The offending raw answer of a failure, kept on the handoff event.
    failure_raw: str = ""

    @property
    def supersedable(self) -> bool:
        """Only a draft the model wrote for the customer gives way to a newer message."""
        return self.reply is not None


def turn_failure(
    context: SessionContext,
    reason: HandoffReason,
    detail: str,
    *,
    agent: AgentName | None = None,
    events: Sequence[SystemEvent] = (),
    raw: str = "",
) -> TurnResult:
    """A failure's result: a handoff for `reason`, with what the turn had found so far."""
    return TurnResult(
        context=context,
        agent=agent,
        events=list(events),
        handoff=Handoff(reason, detail=detail[:_DETAIL_CHARS]),
        failure_raw=raw,
    )
