"""Handoff to the human team: the action, the fixed text, the strategic-company rule, the summary.

- `session_handoff`: the one writer of a session's move to HUMAN (see its docstring). The turn's
  commit (`conversations.turns.commit`), the repeated-failure sweep (`conversations.sweeps`,
  through `failure_handoff_write` there), the Business-app echo (`conversations.inbound.events`)
  and the staff actions call it with a `HandoffRequest` (why: reason, detail; whether the fixed
  text is due) and, when it speaks to the customer or asks for a summary, its `HandoffEffects`;
  the action writes the fields, the SYSTEM event and the text, and registers the sends and the
  summary after commit.
- `handoff_text`: which fixed text `session_handoff` sends: outside business hours the "closed"
  text (nobody answers now, and it promises no time); in business hours the invalid-format
  fallback for ``llm_invalid_json`` and the "open" text for every other reason. Code 5 is the
  exception: the model's own closing message is sent (the turn passes it to `session_handoff`).
- `strategic_company_for`: the deterministic rule that hands a strategic company's contact to a
  human before any model call: the session's phone, its CNPJ, or the company's name in what the
  customer wrote or in the collected `empresa`, belongs to an active one. The list never reaches
  a prompt.
- `handoff_summary_generate`: the use case behind the ``generate_handoff_summary`` task. It
  writes one `HandoffSummary` per run; when the model call fails or answers garbage it stores the
  minimal summary built from the session's facts with the error — it never touches the session,
  so a summary failure can never undo the handoff.
"""

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import Any
from uuid import UUID

from django.contrib.auth.models import User
from django.db.models import F, Q

from agents.business_hours import business_hours_status
from agents.llm import LLMClient, LLMError
from agents.sources import (
    BUILTIN_PROMPT_VERSION,
    CallRecord,
    CallRecorder,
    RuntimeSettings,
    StrategicCompanyInfo,
)
from agents.states import AgentName, HandoffMotive, HandoffReason, SessionState
from agents.strategic_companies import strategic_company_match
from agents.summary import (
    OperationalSummary,
    SummaryFacts,
    TranscriptLine,
    generate_operational_summary,
)
from conversations.announcements import HandoffCommitted, handoff_committed
from conversations.commit_hooks import on_commit_call
from conversations.dispatcher import Handoff, handoff_event
from conversations.event_codes import EventCode
from conversations.media_views import message_text
from conversations.message_order import newest_in_conversation_order
from conversations.models import (
    REACTION_TYPE,
    DeliveryStatus,
    Direction,
    HandoffSummary,
    Message,
    Session,
)
from conversations.prometheus import handoff_counted
from whatsapp.formatting import format_ai_message_for_whatsapp, split_for_whatsapp

logger = logging.getLogger(__name__)

# The newest messages of the session given to the summary call.
SUMMARY_TRANSCRIPT_MESSAGES = 60
_AUTHOR = {Direction.INBOUND: "cliente", Direction.OUTBOUND: "assistente"}
_ERROR_CHARS = 255
_DETAIL_CHARS = 255  # Session.handoff_detail
# Handoffs whose customer must read the fixed text: the model wrote nothing for the customer
# (98: its message is ignored by the code table; a failure; the strategic-company rule).
# Code 5 sends the model's own closing message instead, a staff takeover sends nothing.
FIXED_TEXT_REQUIRED: frozenset[HandoffReason] = frozenset(HandoffReason) - {
    HandoffReason.QUALIFIED_LEAD,
    HandoffReason.STAFF_TAKEOVER,
}


# --- The action ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HandoffWritten:
    """What `session_handoff` wrote: the SYSTEM event and the OUTBOUND part ids, in order."""

    session_id: int
    event_id: int
    part_ids: tuple[int, ...]


def summary_due(reason: HandoffReason) -> bool:
    """Every handoff gets an operational summary but a staff takeover: whoever took the
    conversation over is reading it already."""
    return reason is not HandoffReason.STAFF_TAKEOVER


@dataclass(frozen=True)
class HandoffRequest:
    """What a caller hands off: the session, why, when, and what its own write adds.

    `fields`: the caller's other session columns (a turn's collected data), written in the same
    UPDATE (the handoff's own override them). `rows_before` / `rows_after`: the caller's rows,
    inserted with the handoff's in one INSERT, before the event and after the fixed text (a
    turn's events; code 5's closing message). `by_user`: who took it over (a staff takeover;
    none from the WhatsApp Business app). `agent` and `raw_response`: the answering agent and the
    offending answer of a failure, kept in the event."""

    session_id: int
    reason: HandoffReason
    now: datetime
    fixed_text: bool
    detail: str = ""
    motive: HandoffMotive | None = None
    by_user: User | None = None
    agent: str = ""
    raw_response: str = ""
    turn_id: UUID | None = None
    fields: Mapping[str, Any] = field(default_factory=dict)
    rows_before: Sequence[Message] = ()
    rows_after: Sequence[Message] = ()

    def __post_init__(self) -> None:
        if self.reason in FIXED_TEXT_REQUIRED and not self.fixed_text:
            raise ValueError(
                f"a {self.reason.value} handoff sends the fixed text, never the model's"
            )

    @property
    def sends_or_summarises(self) -> bool:
        """Whether the handoff registers a send (the fixed text, the caller's OUTBOUND rows) or
        the summary after commit: it then needs `HandoffEffects`."""
        return (
            self.fixed_text
            or summary_due(self.reason)
            or any(row.direction == Direction.OUTBOUND for row in self.rows_after)
        )


@dataclass(frozen=True)
class HandoffEffects:
    """What a handoff that speaks to the customer or asks for a summary needs: the runtime
    settings (the fixed text depends on business hours), the send of one OUTBOUND row and the
    enqueueing of the session's summary, both registered after commit."""

    runtime: RuntimeSettings
    send: Callable[[int], None]
    enqueue_summary: Callable[[int], None]


def session_handoff(
    request: HandoffRequest, *, effects: HandoffEffects | None = None
) -> HandoffWritten | None:
    """Move the session to HUMAN: the one writer of a handoff.

    Writes, in the caller's transaction:

    - the session: ``state=human``, ``handoff_reason``, ``handoff_detail`` (cut to 255) and
      ``handed_off_at=now`` — in one UPDATE with the request's `fields`, which the handoff's own
      override;
    - the SYSTEM ``handoff`` event (`conversations.dispatcher.handoff_event`: reason, detail,
      motive, the answering `agent` and the offending `raw_response` of a failure; its text is
      rendered when shown, `conversations.labels`); a staff takeover's names `by_user` as its
      `staff_user` (none: the Business app) and carries no details;
    - when `fixed_text`, the fixed text (`handoff_text`) as OUTBOUND parts, pending;
    - in one INSERT with the caller's rows: `rows_before` (the turn's events), the event, the
      fixed text's parts, `rows_after` (code 5's closing message);

    and registers, after commit, the send of every OUTBOUND row it inserted, in order, then the
    summary (`summary_due`). The rule for the customer's text: **the customer never reads words
    the model did not write for the customer.** Code 98's message is never sent (the code table
    marks it ignored), the fixed text is; every failure and the strategic-company rule send the
    fixed text too (`FIXED_TEXT_REQUIRED`: a request with ``fixed_text=False`` for them
    raises). Code 5 is the one handoff that sends the model's words, its closing message, which
    the turn passes in `rows_after`; a staff takeover sends nothing.

    A session already in HUMAN is not handed off again: nothing is written, nothing registered,
    and None is returned (every caller checks the state first under its lock today, so this is
    the guard for a double call — a second click of a staff button, an echo racing a turn).
    Marking the pending inbound messages processed stays with the caller (a turn stamps its
    ``turn_id``; the echo marks every pending message).
    """
    if request.sends_or_summarises and effects is None:
        raise ValueError(
            f"a {request.reason.value} handoff sends or enqueues the summary: it needs its effects"
        )
    session_id, reason, now = request.session_id, request.reason, request.now
    handed_off = {
        "state": SessionState.HUMAN.value,
        "handoff_reason": reason.value,
        "handoff_detail": request.detail[:_DETAIL_CHARS],
        "handed_off_at": now,
        # The SET's right-hand sides read the row as it was: the state being left.
        "state_before_handoff": F("state"),
    }
    updated = (
        Session.objects.filter(pk=session_id)
        .exclude(state=SessionState.HUMAN)
        .update(**{**request.fields, **handed_off})
    )
    if not updated:
        logger.info("handoff_skipped", extra={"session_id": session_id, "reason": reason.value})
        return None
    event = _event_row(request)
    text_rows: list[Message] = []
    if request.fixed_text:
        assert effects is not None
        text_rows = _fixed_text_rows(
            session_id=session_id,
            text=handoff_text(effects.runtime, reason=reason, now=now),
            action=reason.value,
            turn_id=request.turn_id,
            now=now,
        )
    created = Message.objects.bulk_create(
        [*request.rows_before, event, *text_rows, *request.rows_after]
    )
    handoff_counted(reason.value)
    part_ids = tuple(m.pk for m in created if m.direction == Direction.OUTBOUND)
    # One hook each (conversations.commit_hooks); the parts first: the summary is a model call.
    for part_id in part_ids:
        assert effects is not None, "the OUTBOUND rows written are sent after commit"
        on_commit_call(effects.send, part_id)
    if summary_due(reason):
        assert effects is not None
        on_commit_call(effects.enqueue_summary, session_id)
    # After the summary's hook: an alert waits for the summary.
    handoff_committed.announce(HandoffCommitted(session_id=session_id, reason=reason))
    return HandoffWritten(session_id=session_id, event_id=event.pk, part_ids=part_ids)


def _event_row(request: HandoffRequest) -> Message:
    row = {
        "session_id": request.session_id,
        "direction": Direction.SYSTEM,
        "staff_user": request.by_user,
        "turn_id": request.turn_id,
        "created_at": request.now,
    }
    if request.reason is HandoffReason.STAFF_TAKEOVER:
        # Who took it over is the row's `staff_user` (none: the WhatsApp Business app).
        return Message(**row, message_type=EventCode.HANDOFF, action=request.reason.value)
    handoff = Handoff(request.reason, detail=request.detail, motive=request.motive)
    event = handoff_event(handoff, agent=request.agent, raw_response=request.raw_response)
    return Message(
        **row,
        message_type=event.event,
        agent=event.agent,
        code=event.code,
        action=event.action,
        json_part=dict(event.details) or None,
        raw_response=event.raw_response,
    )


def _fixed_text_rows(
    *, session_id: int, text: str, action: str, turn_id: UUID | None, now: datetime
) -> list[Message]:
    parts = split_for_whatsapp(format_ai_message_for_whatsapp(text))
    return [
        Message(
            session_id=session_id,
            direction=Direction.OUTBOUND,
            message_type="text",
            content=part,
            part_index=index,
            turn_id=turn_id,
            delivery_status=DeliveryStatus.PENDING,
            created_at=now,
            action=action,
        )
        for index, part in enumerate(parts)
    ]


def handoff_text(runtime: RuntimeSettings, *, reason: HandoffReason, now: datetime) -> str:
    """The fixed text sent to the customer for a handoff (see the module docstring)."""
    if not business_hours_status(runtime.business_hours, now).is_open:
        return runtime.handoff_message_closed
    if reason is HandoffReason.LLM_INVALID_JSON:
        return runtime.invalid_format_message
    return runtime.handoff_message_open


def strategic_company_for(
    runtime: RuntimeSettings, *, phone: str, document: str, texts: Sequence[str] = ()
) -> StrategicCompanyInfo | None:
    """The active strategic company this customer belongs to, if any.

    By phone, by CNPJ (the collected document, or one written in `texts`) or by the company's
    name in `texts` — the turn's inbound texts and the collected `empresa`; the rule is
    `agents.strategic_companies.strategic_company_match`. `runtime.strategic_companies` lists
    only active companies, phones as E.164 digits.
    """
    return strategic_company_match(
        runtime.strategic_companies, phone=phone, document=document, texts=texts
    )


def summary_facts(session: Session) -> SummaryFacts:
    """What the summary is written from: the session's fields and its recent conversation."""
    messages, _older = newest_in_conversation_order(
        Message.objects.conversational()
        .filter(session_id=session.pk)
        .filter(Q(media__isnull=False) | ~Q(content=""))
        # As in the agents' history: a reaction's emoji is on its message, not a line said.
        .exclude(message_type=REACTION_TYPE)
        .select_related("media")
        .only("id", "direction", "staff_user_id", "content", "wa_timestamp", "media"),
        SUMMARY_TRANSCRIPT_MESSAGES,
    )
    transcript = tuple(
        TranscriptLine(
            "equipe" if m.staff_user_id else _AUTHOR[Direction(m.direction)], message_text(m)
        )
        for m in messages
    )
    # A strategic company's name (the detail of its handoff) is not sent to the summary model:
    # no prompt carries that list's data. Staff read it on the session.
    detail = (
        "" if session.handoff_reason == HandoffReason.STRATEGIC_COMPANY else session.handoff_detail
    )
    return SummaryFacts(
        handoff_reason=session.handoff_reason,
        handoff_detail=detail,
        customer_name=session.customer_name,
        customer_phone=session.customer_phone,
        segment=session.segment,
        intent=session.intent,
        service=session.service,
        technical_data=session.technical_data,
        registration_data=session.registration_data,
        transcript=transcript,
    )


# `HandoffSummary.error` of a summary whose conversation was anonymised while the model wrote it.
ERASED_MEANWHILE = "anonymised while it was written"


def handoff_summary_generate(
    *, session_id: int, llm: LLMClient, recorder: CallRecorder, model: str
) -> HandoffSummary:
    """Write the operational summary of a handed-off session (never raises on a model failure)."""
    session = Session.objects.get(pk=session_id)
    facts = summary_facts(session)
    call = partial(
        CallRecord,
        session_id=session_id,
        agent=AgentName.SUMMARY,
        purpose="summary",
        prompt_version=BUILTIN_PROMPT_VERSION,
    )
    raw = ""
    try:
        generation = generate_operational_summary(llm=llm, model=model, facts=facts)
    except LLMError as exc:
        recorder.record(call(model=model, error=exc))
        summary: OperationalSummary = facts.fallback()
        error = f"{exc.outcome}: {exc}"
        used_model = model
    else:
        summary = generation.summary
        error = summary.error
        raw = generation.call.raw_response
        used_model = generation.call.model
        if Session.objects.filter(pk=session_id, anonymised_at__isnull=False).exists():
            # Erased while the model wrote it: nothing of the customer is stored.
            summary, raw, error = OperationalSummary(), "", ERASED_MEANWHILE
        recorder.record(call(model=generation.call.model, result=generation.call, raw_response=raw))
    stored = HandoffSummary.objects.create(
        session_id=session_id,
        closing_reason=summary.closing_reason[:255],
        identified_service=summary.identified_service[:255],
        segment=summary.segment[:255],
        key_points=list(summary.key_points),
        collected_data=dict(summary.collected_data),
        next_action=summary.next_action,
        summary_text=summary.summary_text,
        raw_json=raw,
        error=error[:_ERROR_CHARS],
        model=used_model[:64],
    )
    log = {"session_id": session_id, "summary_id": stored.pk}
    if error:
        logger.warning("handoff_summary_failed", extra={**log, "error": error})
    else:
        logger.info("handoff_summary_generated", extra=log)
    return stored
