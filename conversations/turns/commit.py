"""Commit a turn, in one short transaction that re-reads the session under a row lock.

If the lease is no longer ours, nothing is written. If a newer inbound message arrived meanwhile
(or staff took the session), the model's draft is stored with ``error="superseded"``, not sent,
and the turn runs again with every pending message. Otherwise the session fields, the SYSTEM
events, the lead (code 5), the OUTBOUND parts and ``processed_at`` of the turn's messages are
written together (with what a session's first turn pinned: its prompt versions, release and
package versions), and the parts are
sent — and the summary enqueued on a handoff — after commit.
A handoff is written by `conversations.handoff.session_handoff`, in the same statements.

A handoff or a failure is committed even when a newer message arrived (the newer message then
finds the session in HUMAN); only a draft the model wrote for the customer is superseded.
`failure_handoff_write` writes a handoff decided outside a model turn (the repeated-failure
sweep, `conversations.sweeps`) exactly as a failed turn's commit does.
"""

import json
import logging
from collections.abc import Callable, Sequence
from datetime import datetime
from enum import StrEnum
from uuid import UUID, uuid4

from django.db import connection, transaction

from agents.sources import RuntimeSettings
from agents.states import HandoffReason, SessionState
from conversations.commit_hooks import on_commit_call
from conversations.handoff import HandoffEffects, HandoffRequest, session_handoff
from conversations.leads import lead_create
from conversations.models import SUPERSEDED, Direction, Message, Session, SurveyTrigger
from conversations.satisfaction import SurveySettings, survey_ask
from conversations.turns.deps import PipelineDeps
from conversations.turns.result import Reply, SessionPin, Turn, TurnResult, turn_failure
from conversations.turns.rows import (
    action_name_of,
    event_rows,
    lead_data,
    reply_rows,
    session_fields,
)
from conversations.turns.selectors import session_context, session_has_pending
from whatsapp.formatting import format_ai_message_for_whatsapp

logger = logging.getLogger(__name__)


class CommitOutcome(StrEnum):
    COMMITTED = "committed"
    SUPERSEDED = "superseded"
    LEASE_LOST = "lease_lost"


def turn_commit(
    *, turn: Turn, result: TurnResult, deps: PipelineDeps, runtime: RuntimeSettings
) -> CommitOutcome:
    """Write what the turn decided, unless the lease was lost or the draft is superseded."""
    now = deps.clock()
    log = {"session_id": turn.session_id, "turn_id": str(turn.turn_id)}
    with transaction.atomic():
        state, lease_token, pinned = _locked_session(turn.session_id)
        if lease_token != turn.token:
            logger.warning("session_lease_lost", extra=log)
            return CommitOutcome.LEASE_LOST
        newer = session_has_pending(session_id=turn.session_id, excluding=turn.inbound_ids)
        state_changed = state != turn.state.value
        if result.supersedable and (newer or state_changed):
            assert result.reply is not None
            _store_draft(turn, result.reply, now)
            logger.info(
                "turn_superseded",
                extra={**log, "newer_inbound": newer, "state_changed": state_changed},
            )
            return CommitOutcome.SUPERSEDED
        if state_changed:
            # Staff took the session (or it was closed) while a failure was being handled: the
            # session is theirs now; the messages were answered by them.
            _mark_processed(turn, now)
            logger.info("turn_discarded", extra={**log, "state": state})
            return CommitOutcome.COMMITTED
        _write_turn(
            turn,
            result,
            now,
            runtime,
            send=deps.send,
            enqueue_summary=deps.enqueue_summary,
            # Staff may have pinned the session meanwhile (the current prompts): theirs stays.
            pin=None if pinned else turn.pin,
        )
    return CommitOutcome.COMMITTED


def turn_skip(*, turn: Turn, now: datetime) -> None:
    """The turn of a session the bot does not answer: its messages marked processed, no more.

    HUMAN: staff read them in admin; CLOSED: a message that raced the close. Nothing is called
    or sent, but they must not stay pending forever.
    """
    Message.objects.pending_inbound().filter(pk__in=turn.inbound_ids).update(processed_at=now)


# The commit's locked read and its last write run every turn: literal SQL, not the ORM's
# `select_for_update().only(...)` and `pending_inbound().update(...)`, because with every worker
# statement the ORM's a turn cost 25.4-34.9 ms of worker CPU on the bench machine, over the
# 25 ms floor (bench/worker_cpu.py). FOR NO KEY UPDATE does not block the webhook inserting
# messages of this session (their foreign key takes FOR KEY SHARE on the row); only PostgreSQL
# has it, and SQLite has no row locks at all.
LOCKED_SESSION_SQL = (
    "SELECT state, lease_token, prompt_versions FROM conversations_session WHERE id = %s"
)
MARK_PROCESSED_SQL = """UPDATE conversations_message SET processed_at = %s, turn_id = %s
    WHERE direction = 'INBOUND' AND processed_at IS NULL AND id IN ({ids})"""


def _locked_session(session_id: int) -> tuple[str, UUID | None, bool]:
    """The session's state, lease token and whether its prompt versions are pinned, its row
    locked until the transaction ends."""
    features = connection.features
    lock = (
        " FOR NO KEY UPDATE"
        if features.has_select_for_no_key_update
        else " FOR UPDATE"
        if features.has_select_for_update
        else ""
    )
    with connection.cursor() as cursor:
        cursor.execute(LOCKED_SESSION_SQL + lock, [session_id])
        row = cursor.fetchone()
    if row is None:
        raise Session.DoesNotExist(f"Session {session_id} does not exist")
    state, token, pins = row
    # jsonb arrives as text from Django's PostgreSQL backend, and SQLite stores text.
    pinned = bool(json.loads(pins) if isinstance(pins, str) else pins)
    return state, _LEASE_TOKEN.to_python(token), pinned


_LEASE_TOKEN = Session._meta.get_field("lease_token")


def _mark_processed(turn: Turn, now: datetime) -> None:
    if not turn.inbound_ids:
        return
    params = [
        _PROCESSED_AT.get_db_prep_value(now, connection),
        _TURN_ID.get_db_prep_value(turn.turn_id, connection),
        *turn.inbound_ids,
    ]
    with connection.cursor() as cursor:
        cursor.execute(
            MARK_PROCESSED_SQL.format(ids=", ".join(["%s"] * len(turn.inbound_ids))), params
        )


_PROCESSED_AT = Message._meta.get_field("processed_at")
_TURN_ID = Message._meta.get_field("turn_id")


def _store_draft(turn: Turn, reply: Reply, now: datetime) -> None:
    Message.objects.create(
        session_id=turn.session_id,
        direction=Direction.OUTBOUND,
        message_type="text",
        agent=reply.agent.value,
        content=format_ai_message_for_whatsapp(reply.text),
        raw_response=reply.raw_response,
        json_part=reply.parsed.json_part,
        code=reply.parsed.s,
        action=action_name_of(reply.parsed.s),
        error=SUPERSEDED,
        turn_id=turn.turn_id,
        created_at=now,
    )


def failure_handoff_write(
    *,
    session: Session,
    token: UUID,
    inbound_ids: Sequence[int],
    reason: HandoffReason,
    detail: str,
    now: datetime,
    runtime: RuntimeSettings,
    send: Callable[[int], None],
    enqueue_summary: Callable[[int], None],
) -> list[int]:
    """Write a handoff decided outside a model turn exactly as a failed turn writes it.

    For callers that hold the session's lease and its row lock (the repeated-failure sweep):
    `session_handoff` with the session's fields as a turn writes them, the inbound messages
    marked processed; the text is sent and the summary enqueued after commit. Returns the
    OUTBOUND part ids, in sending order.
    """
    turn = Turn(
        session_id=session.pk,
        turn_id=uuid4(),
        token=token,
        state=SessionState(session.state),
        inbound_ids=tuple(inbound_ids),
        last_inbound_id=max(inbound_ids),
    )
    result = turn_failure(session_context(session), reason, detail)
    return _write_turn(turn, result, now, runtime, send=send, enqueue_summary=enqueue_summary)


def _write_turn(
    turn: Turn,
    result: TurnResult,
    now: datetime,
    runtime: RuntimeSettings,
    *,
    send: Callable[[int], None],
    enqueue_summary: Callable[[int], None],
    pin: SessionPin | None = None,
) -> list[int]:
    """Write everything the turn decided, send its parts after commit; their ids, in order.

    One UPDATE of the session and one INSERT of its rows either way: a handoff's go through
    `session_handoff` with the turn's own (which also registers the sends and the summary).
    `pin`: what the session's first turn pinned, written in that same UPDATE.
    """
    fields = session_fields(result, now)
    if pin is not None:
        fields["prompt_versions"] = dict(pin.prompt_versions)
        fields["release_id"] = pin.release_id
        fields["package_versions"] = dict(pin.package_versions)
    events = event_rows(turn, result.events, now)
    replies = reply_rows(turn, result.reply, now) if result.reply is not None else []
    if result.handoff is not None:
        written = session_handoff(
            HandoffRequest(
                session_id=turn.session_id,
                reason=result.handoff.reason,
                detail=result.handoff.detail,
                motive=result.handoff.motive,
                now=now,
                # The fixed text unless the model wrote this handoff's message (code 5).
                fixed_text=result.reply is None,
                agent=result.agent.value if result.agent else "",
                raw_response=result.failure_raw,
                turn_id=turn.turn_id,
                fields=fields,
                rows_before=events,
                rows_after=replies,
            ),
            effects=HandoffEffects(runtime=runtime, send=send, enqueue_summary=enqueue_summary),
        )
        # The turn runs in a bot state and its commit checked that under the row lock.
        assert written is not None, "a turn hands off a session in a bot state"
        part_ids = list(written.part_ids)
    else:
        assert result.reply is not None, "a turn without a reply is a handoff"
        Session.objects.filter(pk=turn.session_id).update(**fields)
        created = Message.objects.bulk_create([*events, *replies])
        part_ids = [m.pk for m in created if m.direction == Direction.OUTBOUND]
        # One hook each, every one attempted whatever the others do (conversations.commit_hooks).
        for part_id in part_ids:
            on_commit_call(send, part_id)
    if result.create_lead:
        lead_create(
            session_id=turn.session_id,
            data=lead_data(result.context),
        )
        if runtime.satisfaction_after_lead:
            # Its send is registered after the parts', so it follows the model's message.
            survey_ask(
                session_id=turn.session_id,
                trigger=SurveyTrigger.LEAD_CONFIRMED,
                survey=SurveySettings(
                    question=runtime.satisfaction_question, style=runtime.satisfaction_style
                ),
                now=now,
                send=send,
            )
    _mark_processed(turn, now)
    return part_ids
