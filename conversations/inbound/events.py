"""Apply a parsed webhook payload: messages, echoes, ``system`` messages and statuses.

Duplicates are settled by the database, not by reads: ``Message.wa_message_id`` and
``DeliveryStatusEvent (wa_message_id, status)`` are unique, rows are inserted with
``ON CONFLICT DO NOTHING``, and a conflict means "already received". Twenty concurrent deliveries
of one wamid make one row and enqueue one turn.

Messages, by kind (`InboundKind`):

- text, interactive replies and template buttons become pending INBOUND text (``processed_at``
  null, ``wa_timestamp`` from the payload) and, in a bot state, the session's turn is enqueued
  once per delivery with ``transaction.on_commit`` through `enqueue_turn`; in HUMAN they are
  logged as read by staff (``processed_at`` set), since no turn will consume them;
- image, audio, video, document, sticker, location and contacts are kept with their metadata
  (`MessageMedia`), the file downloaded after the commit (`conversations.media_tasks`); in a bot
  state they are pending like text, and the agents read them as a marker or a transcript
  (`agents.media_markers`). A media the bot reads first (`conversations.media_reading`: a voice
  note transcribed, an image described) enqueues no turn: the end of its reading does. An audio
  when nothing transcribes it is logged (``processed_at`` set) and, in a bot state, the session
  gets RuntimeConfig's media text as an OUTBOUND message, once per session per delivery, sent
  through `enqueue_send` after commit (no LLM);
- a message the parser could not read but whose id and sender it could (``UNREADABLE``, e.g. an
  ``interactive`` WhatsApp itself failed to render) is logged as type ``unsupported`` with the
  reason in ``error`` and, in a bot state, answered like media (no LLM); the delivery's other
  items are applied, and every unreadable item's reason is kept in the delivery's ``error``;
- a message or echo whose timestamp the parser replaced by the reception time (year 9999, before
  the Cloud API) gets a SYSTEM ``timestamp_replaced`` event naming the value Meta sent;
- a reaction is logged (its own row, processed: it starts no turn and gets no answer) and its
  emoji stored on the message it reacts to (`Message.reaction`, ``reaction_at`` its WhatsApp
  time; an empty emoji, a reaction taken off, clears it), when that message is in one of the
  customer's sessions on the number; a later reaction replaces an earlier one by WhatsApp time,
  so one that arrives late does not undo a newer; a reaction to a message we do not hold is
  only logged. A reaction is not the customer writing: it moves ``last_message_at``, not
  ``last_inbound_at`` (the support queue's "waiting" and the 24-hour window read that one).
  Staff's reactions in the Business app (echoes) are stored the same way and do not take the
  conversation from the bot (an emoji answers nothing);
- unsupported and unknown types are logged only;
- ``system`` messages change the open session's phone or user id and are logged as a SYSTEM event;
- echoes (``smb_message_echoes``, coexistence) are logged as staff OUTBOUND messages and move the
  session to HUMAN (``staff_takeover``, `conversations.handoff.session_handoff`: a SYSTEM event,
  no text, no summary): a human's reply silences the bot, so pending INBOUND messages are marked
  processed too.

Statuses are applied by `conversations.inbound.delivery_statuses`.

One handler per message kind, in a table (`MESSAGE_HANDLERS`), like the dispatcher's codes; the
handlers share a small context (`ApplyContext`): the delivery's time, the sessions it met
(`conversations.inbound.session_rules.DeliverySessions`), the work to do after the commit
(`Outbox`) and what was stored. The session rules they follow are
`conversations.inbound.session_rules`'.

Each message with a wamid is one INSERT that says whether it was new (`message_store_once`):
no read before it, no savepoint around it.
"""

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import Any

from django.db import connections, transaction
from django.db.models import Q
from django.utils import timezone

from agents.phones import customer_phone_key
from agents.redaction import redact
from agents.states import BOT_STATES, HandoffReason, SessionState
from compat.django_private import mark_saved
from conversations.event_codes import ACTION_UNSUPPORTED_MEDIA, EventCode
from conversations.handoff import HandoffRequest, session_handoff
from conversations.inbound.delivery_statuses import statuses_apply
from conversations.inbound.session_rules import (
    DeliverySessions,
    customer_key,
    open_session_find,
    session_for,
    session_identity_update,
    turn_queue,
    waits_for_turn,
)
from conversations.media_reading import reading_for
from conversations.models import (
    MEDIA_WITHOUT_FILE,
    REACTION_TYPE,
    DeliveryStatus,
    Direction,
    MediaStatus,
    Message,
    MessageMedia,
    ReadingStatus,
    Session,
    WebhookOutcome,
)
from conversations.satisfaction import (
    score_of_reply,
    survey_answer_find,
    survey_answer_record,
)
from prompts_admin.models import RuntimeConfig
from whatsapp.payload import (
    MAX_WAMID_CHARS,
    Customer,
    Echo,
    InboundKind,
    InboundMessage,
    MediaInfo,
    UnreadableItem,
    WebhookPayload,
    without_surrogates,
)

# The package's name, not the module's: every inbound module logs under one logger name.
logger = logging.getLogger("conversations.inbound")

EnqueueFn = Callable[[int], None]

_ERROR_CHARS = 2_000
_MESSAGE_ERROR_CHARS = 64  # Message.error
_REACTION_CHARS = Message._meta.get_field("reaction").max_length or 32
# Unreadable items listed in the delivery's error (the rest counted): enough to diagnose.
_UNREADABLE_LISTED = 20


# --- the result and the context --------------------------------------------------------------


@dataclass(slots=True)
class ApplyResult:
    """What applying a payload gave: the delivery row's outcome, error and counts."""

    outcome: str
    error: str = ""
    messages_count: int = 0
    statuses_count: int = 0

    @classmethod
    def failed(cls, exc: BaseException) -> "ApplyResult":
        return cls(WebhookOutcome.FAILED, error=describe_error(exc))

    @staticmethod
    def unreadable_error(payload: WebhookPayload) -> str:
        """Each unreadable item and why, one per line: the delivery's ``error`` when it was
        applied nonetheless."""
        lines = [f"{item.where}: {item.reason}" for item in payload.unreadable] + [
            f"message {m.wamid}: {m.reason}"
            for m in payload.messages
            if m.kind is InboundKind.UNREADABLE
        ]
        if len(lines) > _UNREADABLE_LISTED:
            lines[_UNREADABLE_LISTED:] = [f"... {len(lines) - _UNREADABLE_LISTED} more"]
        return clean_text("\n".join(lines))[:_ERROR_CHARS]

    def delivery_fields(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome,
            "error": self.error,
            "messages_count": self.messages_count,
            "statuses_count": self.statuses_count,
            "processed_at": timezone.now(),
        }


@dataclass(slots=True)
class Outbox:
    """What the delivery hands to the workers once it is committed: turns and sends."""

    enqueue_turn: EnqueueFn
    enqueue_send: EnqueueFn
    now: datetime
    # Sessions whose turn to queue, in order, as this transaction read and locked them.
    turns: dict[int, Session] = field(default_factory=dict)
    sends: list[int] = field(default_factory=list)  # OUTBOUND messages to send
    answered_media: set[int] = field(default_factory=set)  # sessions given the media text
    media_downloads: list[int] = field(default_factory=list)  # MessageMedia to download

    def turn(self, session: Session) -> None:
        self.turns.setdefault(session.pk, session)

    def no_turn(self, session_id: int) -> None:
        self.turns.pop(session_id, None)

    def enqueue_after_commit(self) -> None:
        # Registered inside the transaction: discarded if it rolls back. `robust`: a broker outage
        # is logged and never undoes or fails the stored delivery.
        for session_id, session in self.turns.items():
            if not turn_queue(session, now=self.now):
                continue  # its turn is queued already and will take this message too
            transaction.on_commit(partial(self.enqueue_turn, session_id), robust=True)
        for message_id in self.sends:
            transaction.on_commit(partial(self.enqueue_send, message_id), robust=True)
        for media_pk in self.media_downloads:
            transaction.on_commit(partial(_media_download_enqueue, media_pk), robust=True)


@dataclass(slots=True)
class ApplyContext:
    """What the handlers of one delivery share."""

    now: datetime
    sessions: DeliverySessions
    outbox: Outbox
    messages_count: int = 0
    statuses_count: int = 0


# --- the message stored once per wamid ------------------------------------------------------

# A message with a wamid Meta delivered before (a retried delivery, a replayed body) is stored
# once: the INSERT does nothing on the wamid's unique constraint and returns no row. Every
# column of Message, in the model's order (a test compares them), each value prepared as a save
# prepares it. Both databases run it.
#
# Hand-written because the ORM's spelling (``QuerySet._insert`` with ``on_conflict``, as
# ``bulk_create(ignore_conflicts=True)`` inserts) compiles the INSERT on every message: the
# webhook's request measured 1.60-1.66 ms of CPU with it and 1.33-1.39 ms with this statement
# (least of five in-process runs of 1,000 known customers' texts, 2026-12-02, PostgreSQL with
# prepared statements), and bench/webhook.py 0.48-0.51x the durable floor with it, 0.52x without.
MESSAGE_STORE_SQL = """INSERT INTO conversations_message (
    session_id, direction, message_type, agent, content, raw_response, json_part, code, action,
    error, turn_id, part_index, wa_message_id, wa_timestamp, processed_at, delivery_status,
    delivery_status_at, delivery_error_code, delivery_error_title, send_attempts,
    last_send_attempt_at, staff_user_id, created_at, interactive, reply_to_wamid, reaction,
    reaction_at
) VALUES (
    %(session_id)s, %(direction)s, %(message_type)s, %(agent)s, %(content)s, %(raw_response)s,
    %(json_part)s, %(code)s, %(action)s, %(error)s, %(turn_id)s, %(part_index)s,
    %(wa_message_id)s, %(wa_timestamp)s, %(processed_at)s, %(delivery_status)s,
    %(delivery_status_at)s, %(delivery_error_code)s, %(delivery_error_title)s,
    %(send_attempts)s, %(last_send_attempt_at)s, %(staff_user_id)s, %(created_at)s,
    %(interactive)s, %(reply_to_wamid)s, %(reaction)s, %(reaction_at)s
)
ON CONFLICT (wa_message_id) DO NOTHING
RETURNING id"""
_MESSAGE_COLUMNS = [f for f in Message._meta.concrete_fields if not f.primary_key]


def message_store_once(message: Message) -> bool:
    """Insert `message` (`MESSAGE_STORE_SQL`; no model signals, as a bulk insert): True, and it
    has its id and is saved, when it was new; False when its wamid was stored before."""
    connection = connections[Message.objects.db]
    params = {
        field.attname: field.get_db_prep_save(getattr(message, field.attname), connection)
        for field in _MESSAGE_COLUMNS
    }
    with connection.cursor() as cursor:
        cursor.execute(MESSAGE_STORE_SQL, params)
        row = cursor.fetchone()
    if row is None:
        return False
    message.pk = row[0]
    mark_saved(message)
    return True


# --- applying a payload ----------------------------------------------------------------------


def payload_apply(
    payload: WebhookPayload,
    *,
    enqueue_turn: EnqueueFn,
    enqueue_send: EnqueueFn,
    now: datetime | None = None,
    simulated: bool = False,
) -> ApplyResult:
    """Apply a parsed payload's events (see the module docstring), inside the caller's
    transaction; turns and sends are enqueued after its commit. A `simulated` payload (the
    simulator's, never a webhook's) finds and opens simulated sessions only."""
    now = timezone.now() if now is None else now
    context = ApplyContext(
        now=now,
        sessions=DeliverySessions(simulated=simulated),
        outbox=Outbox(enqueue_turn, enqueue_send, now),
    )
    for ignored in payload.ignored_changes:
        logger.info("whatsapp_change_ignored", extra={"field": ignored})
    for item in payload.unreadable:
        _log_unreadable(item)
    for change_errors in payload.errors:
        for error in change_errors.errors:
            logger.warning(
                "whatsapp_change_error",
                extra={
                    "phone_number_id": change_errors.phone_number_id,
                    "code": error.code,
                    "title": error.title,
                    "details": error.details,
                },
            )
    # Customer by customer (each in WhatsApp time order): concurrent deliveries then lock
    # the sessions they share in the same order and cannot deadlock on them.
    for message in payload.messages:
        context.sessions.note_latest(_customer_key(message), message.timestamp)
    for message in sorted(payload.messages, key=_by_customer):
        MESSAGE_HANDLERS[message.kind](context, message)
    for echo in sorted(payload.echoes, key=_by_customer):
        echo_receive(context, echo)
    context.statuses_count += statuses_apply(
        [
            s
            for s in payload.statuses
            if context.sessions.instance_id(s.phone_number_id) is not None
        ],
        now=now,
    )
    context.outbox.enqueue_after_commit()
    if payload.unreadable and payload.event_count == len(payload.unreadable):
        # Nothing in it could be read: kept failed, for `reprocess_webhooks` after a fix.
        outcome = WebhookOutcome.FAILED
    elif context.sessions.routed:
        outcome = WebhookOutcome.PROCESSED
    else:
        outcome = WebhookOutcome.IGNORED
    return ApplyResult(
        outcome,
        error=ApplyResult.unreadable_error(payload),
        messages_count=context.messages_count,
        statuses_count=context.statuses_count,
    )


# --- messages, one handler per kind ----------------------------------------------------------


def _text_receive(context: ApplyContext, message: InboundMessage) -> None:
    """Text, interactive reply, template button: pending for a turn in a bot state."""
    score = score_of_reply(message.reply_id)
    if score is not None and _survey_answer_receive(context, message, score):
        return
    received = _inbound_store(context, message)
    if received is None:
        return
    session, stored = received
    if stored.processed_at is None:
        context.outbox.turn(session)
    _log_received(message, session, stored)


def _survey_answer_receive(context: ApplyContext, message: InboundMessage, score: int) -> bool:
    """A tap on the satisfaction question (`conversations.satisfaction`): stored, processed, in
    the conversation it was asked in, and its score on the survey; no session is opened or
    moved, no turn runs, nothing is sent back. False when this customer was never asked: the
    reply is then an ordinary one."""
    survey = survey_answer_find(
        phone_number_id=message.phone_number_id,
        customer=message.customer,
        simulated=context.sessions.simulated,
    )
    if survey is None:
        return False
    session = survey.session
    context.sessions.known(message.phone_number_id, session)
    stored = Message(
        session=session,
        direction=Direction.INBOUND,
        message_type=message.message_type,
        content=message.text,
        wa_message_id=message.wamid,
        wa_timestamp=message.timestamp,
        processed_at=context.now,
        created_at=context.now,
        reply_to_wamid=_quoted(message),
        interactive=_tapped(message),
    )
    if not message_store_once(stored):
        logger.info("whatsapp_message_duplicate", extra={"wamid": message.wamid})
        return True
    context.messages_count += 1
    if message.timestamp_replaced:
        _timestamp_replaced(context, session, message.wamid, message.timestamp_replaced)
    counted = survey_answer_record(survey, score=score, at=message.timestamp)
    logger.info(
        "satisfaction_answer_received" if counted else "satisfaction_answer_late",
        extra={"session_id": session.pk, "message_id": stored.pk, "score": score},
    )
    return True


def _quoted(message: InboundMessage) -> str:
    # An id too long to be a wamid quotes nothing we could have stored.
    return message.context_wamid if len(message.context_wamid) <= MAX_WAMID_CHARS else ""


def _tapped(message: InboundMessage) -> dict[str, str] | None:
    """`Message.interactive` of an INBOUND reply: the tapped button or row."""
    if not message.reply_type:
        return None
    return {"type": message.reply_type, "id": message.reply_id, "title": message.text}


def _media_receive(context: ApplyContext, message: InboundMessage) -> None:
    """Media: kept with its metadata, the file downloaded after the commit; in a bot state part
    of a turn like text (its turn waits while the bot reads it: a transcription, a description).
    A media the bot cannot read (an audio without transcription) and an unreadable message are
    answered once per session with RuntimeConfig's text in a bot state (no LLM)."""
    received = _inbound_store(context, message)
    if received is None:
        return
    session, stored = received
    reading: str = ReadingStatus.NOT_READ
    if message.media is not None:
        media = _media_store(stored, message.media, now=context.now)
        reading = media.reading_status
        if media.status == MediaStatus.PENDING:
            context.outbox.media_downloads.append(media.pk)
    if stored.processed_at is None:
        if reading != ReadingStatus.PENDING:
            context.outbox.turn(session)
        # else the end of the reading enqueues the turn (conversations.media_tasks)
    elif session.state in BOT_STATES and session.pk not in context.outbox.answered_media:
        _unsupported_media_answer(context, session)
    _log_received(message, session, stored)


def _media_download_enqueue(media_pk: int) -> None:
    # Read when called, so a test replaces it in one place (conversations.media_tasks).
    from conversations import media_tasks

    media_tasks.enqueue_media_download(media_pk)


def _media_store(stored: Message, media: MediaInfo, *, now: datetime) -> MessageMedia:
    """The media's metadata next to its message, in the delivery's transaction: a file waits for
    its download (pending), or fails at once when Meta sent no usable media id."""
    status, error, reading = MediaStatus.PENDING, "", reading_for(media.kind)
    if media.kind in MEDIA_WITHOUT_FILE:
        status = MediaStatus.NOT_APPLICABLE
    elif not media.media_id:
        status, error = MediaStatus.FAILED, "no media id in the webhook"
        if reading == ReadingStatus.PENDING:
            reading = ReadingStatus.FAILED  # nothing to read: an audio's turn hands off
    return MessageMedia.objects.create(
        message=stored,
        kind=media.kind,
        media_id=media.media_id,
        mime_type=media.mime_type,
        sha256=media.sha256,
        caption=media.caption,
        filename=media.filename,
        voice=media.voice,
        status=status,
        error=error,
        reading_status=reading,
        data=media.data,
        created_at=now,
    )


def _log_only_receive(context: ApplyContext, message: InboundMessage) -> None:
    """Unsupported and unknown types: logged only."""
    received = _inbound_store(context, message)
    if received is not None:
        _log_received(message, *received)


def _reaction_receive(context: ApplyContext, message: InboundMessage) -> None:
    """A customer's reaction: logged, and stored on the message it reacts to."""
    received = _inbound_store(context, message)
    if received is None:
        return
    session, stored = received
    reaction_apply(
        context,
        session,
        message.customer,
        wamid=message.reacted_wamid,
        emoji=message.text,
        at=message.timestamp,
    )
    _log_received(message, session, stored)


def reaction_apply(
    context: ApplyContext,
    session: Session,
    customer: Customer,
    *,
    wamid: str,
    emoji: str,
    at: datetime,
) -> bool:
    """Put `emoji` ("" takes it off) on the message `wamid` of one of the customer's sessions on
    the session's number, unless it holds a reaction newer than `at`; True when it did."""
    if not wamid:
        logger.info("whatsapp_reaction_without_message", extra={"session_id": session.pk})
        return False
    customers = Q(session_id=session.pk)
    if customer.user_id:
        customers |= Q(session__customer_user_id=customer.user_id)
    if customer.phone:
        customers |= Q(session__customer_phone_key=customer_phone_key(customer.phone))
    target = Message.objects.filter(
        customers,
        wa_message_id=wamid,
        session__instance_id=session.instance_id,
        session__is_simulated=context.sessions.simulated,
    )
    # Ties go to the one applied last: two reactions in one second arrive in WhatsApp's order.
    newer = Q(reaction_at__isnull=True) | Q(reaction_at__lte=at)
    if target.filter(newer).update(reaction=emoji[:_REACTION_CHARS], reaction_at=at):
        return True
    if target.exists():
        logger.info("whatsapp_reaction_older", extra={"session_id": session.pk, "wamid": wamid})
    else:
        logger.info(
            "whatsapp_reaction_target_unknown", extra={"session_id": session.pk, "wamid": wamid}
        )
    return False


def _identity_change(context: ApplyContext, message: InboundMessage) -> None:
    """A ``system`` message: the open session's phone or user id changes, with a SYSTEM event."""
    change = message.identity_change
    session = open_session_find(
        message.phone_number_id, message.customer, simulated=context.sessions.simulated
    )
    if session is not None:
        context.sessions.known(message.phone_number_id, session)
    elif context.sessions.instance_id(message.phone_number_id) is None:
        return
    if change is None or session is None:
        logger.warning(
            "whatsapp_identity_change_without_session",
            extra={"wamid": message.wamid, "phone_number_id": message.phone_number_id},
        )
        return
    stored = Message(
        session=session,
        direction=Direction.SYSTEM,
        message_type=EventCode.IDENTITY_CHANGED,
        action=change.change[:32],
        content=message.text,
        wa_message_id=message.wamid,
        wa_timestamp=message.timestamp,
        processed_at=context.now,
        created_at=context.now,
    )
    if not message_store_once(stored):
        return
    context.messages_count += 1
    changes = {}
    if change.new_phone:
        changes["customer_phone"] = change.new_phone
    if change.new_user_id:
        changes["customer_user_id"] = change.new_user_id
    session_identity_update(session, changes)
    context.sessions.forget(session)
    logger.info(
        "whatsapp_identity_changed",
        extra={"session_id": session.pk, "change": change.change},
    )


MessageHandler = Callable[[ApplyContext, InboundMessage], None]

# What each kind of message does (`InboundKind` says what a kind is).
MESSAGE_HANDLERS: dict[InboundKind, MessageHandler] = {
    InboundKind.TEXT: _text_receive,
    InboundKind.MEDIA: _media_receive,
    InboundKind.UNREADABLE: _media_receive,
    InboundKind.LOG_ONLY: _log_only_receive,
    InboundKind.REACTION: _reaction_receive,
    InboundKind.IDENTITY_CHANGE: _identity_change,
}


def _inbound_store(
    context: ApplyContext, message: InboundMessage
) -> tuple[Session, Message] | None:
    """A customer's message in their session (pending for a turn per
    `session_rules.waits_for_turn`), the session's times moved; None when the number is not ours
    or the wamid was received before."""
    # A reaction is not the customer writing: it moves the session's last activity, not its last
    # inbound message (which the support queue and the 24-hour window read).
    inbound = message.kind is not InboundKind.REACTION
    session = session_for(
        context.sessions,
        message.phone_number_id,
        message.customer,
        message.timestamp,
        inbound=inbound,
        now=context.now,
    )
    if session is None:
        return None  # not one of our numbers
    pending = waits_for_turn(
        message.kind, session.state, media_kind=message.media.kind if message.media else ""
    )
    stored = Message(
        session=session,
        direction=Direction.INBOUND,
        message_type=message.message_type,
        content=message.text,
        error=clean_text(message.reason)[:_MESSAGE_ERROR_CHARS],
        wa_message_id=message.wamid,
        wa_timestamp=message.timestamp,
        processed_at=None if pending else context.now,
        created_at=context.now,
        reply_to_wamid=_quoted(message),
        interactive=_tapped(message),
    )
    if not message_store_once(stored):
        logger.info("whatsapp_message_duplicate", extra={"wamid": message.wamid})
        return None
    context.messages_count += 1
    context.sessions.touch(session, message.timestamp, inbound=inbound, now=context.now)
    if message.timestamp_replaced:
        _timestamp_replaced(context, session, message.wamid, message.timestamp_replaced)
    return session, stored


def _log_received(message: InboundMessage, session: Session, stored: Message) -> None:
    logger.debug(
        "whatsapp_message_received",
        extra={
            "message_id": stored.pk,
            "session_id": session.pk,
            "type": message.message_type,
            "kind": message.kind.value,
        },
    )


def _timestamp_replaced(context: ApplyContext, session: Session, wamid: str, value: str) -> None:
    """The SYSTEM event that says a WhatsApp timestamp was out of range (see the parser)."""
    Message.objects.create(
        session=session,
        direction=Direction.SYSTEM,
        message_type=EventCode.TIMESTAMP_REPLACED,
        json_part={"value": clean_text(value)},
        created_at=context.now,
    )
    logger.warning(
        "whatsapp_timestamp_replaced",
        extra={"session_id": session.pk, "wamid": wamid, "timestamp": value},
    )


def _unsupported_media_answer(context: ApplyContext, session: Session) -> None:
    context.outbox.answered_media.add(session.pk)
    reply = Message.objects.create(
        session=session,
        direction=Direction.OUTBOUND,
        message_type="text",
        content=RuntimeConfig.load().unsupported_media_message,
        action=ACTION_UNSUPPORTED_MEDIA,
        delivery_status=DeliveryStatus.PENDING,
        created_at=context.now,
    )
    context.outbox.sends.append(reply.pk)
    context.sessions.touch(session, context.now, inbound=False, now=context.now)


# --- echoes ----------------------------------------------------------------------------------


def echo_receive(context: ApplyContext, echo: Echo) -> None:
    """A message staff sent from the Business app: logged as a staff OUTBOUND message, and the
    session goes to HUMAN."""
    if echo.message_type in ("revoke", "edit"):
        # Staff deleted or edited a message in the app: nothing new to log or to answer.
        context.sessions.instance_id(echo.phone_number_id)
        logger.info("whatsapp_echo_ignored", extra={"wamid": echo.wamid})
        return
    session = session_for(
        context.sessions,
        echo.phone_number_id,
        echo.customer,
        echo.timestamp,
        inbound=False,
        now=context.now,
    )
    if session is None:
        return
    stored = Message(
        session=session,
        direction=Direction.OUTBOUND,
        message_type=echo.message_type,
        content=echo.text,
        wa_message_id=echo.wamid,
        wa_timestamp=echo.timestamp,
        delivery_status=DeliveryStatus.SENT,
        delivery_status_at=echo.timestamp,
        created_at=context.now,
    )
    if not message_store_once(stored):
        return
    context.messages_count += 1
    context.sessions.touch(session, echo.timestamp, inbound=False, now=context.now)
    if echo.timestamp_replaced:
        _timestamp_replaced(context, session, echo.wamid, echo.timestamp_replaced)
    if echo.message_type == REACTION_TYPE:
        reaction_apply(
            context,
            session,
            echo.customer,
            wamid=echo.reacted_wamid,
            emoji=echo.text,
            at=echo.timestamp,
        )
        logger.info(
            "whatsapp_echo_reaction", extra={"message_id": stored.pk, "session_id": session.pk}
        )
        return
    if session.state != SessionState.HUMAN:
        _staff_takeover(context, session)
    logger.info("whatsapp_echo_received", extra={"message_id": stored.pk, "session_id": session.pk})


def _staff_takeover(context: ApplyContext, session: Session) -> None:
    session_handoff(
        HandoffRequest(
            session_id=session.pk,
            reason=HandoffReason.STAFF_TAKEOVER,
            now=context.now,
            fixed_text=False,  # staff answer the customer themselves
        )
    )
    session.state = SessionState.HUMAN
    Message.objects.pending_inbound().filter(session=session).update(processed_at=context.now)
    context.outbox.no_turn(session.pk)
    logger.info("whatsapp_staff_takeover", extra={"session_id": session.pk})


# --- helpers ---------------------------------------------------------------------------------


def _customer_key(event: InboundMessage | Echo) -> tuple[str, str, str]:
    return customer_key(event.phone_number_id, event.customer)


def _by_customer(event: InboundMessage | Echo) -> tuple[str, str, str, datetime]:
    return (*_customer_key(event), event.timestamp)


def _log_unreadable(item: UnreadableItem) -> None:
    logger.warning("whatsapp_item_unreadable", extra={"where": item.where, "reason": item.reason})


def clean_text(text: str) -> str:
    """Text any database stores: no NUL (PostgreSQL refuses it), no lone surrogate."""
    return without_surrogates(text.replace("\x00", ""))  # type: ignore[no-any-return]


def describe_error(exc: BaseException) -> str:
    """An exception as stored on the delivery and logged: redacted (a database error may quote
    the customer's phone), in text any database stores."""
    return redact(clean_text(f"{exc.__class__.__name__}: {exc}"))[:_ERROR_CHARS]
