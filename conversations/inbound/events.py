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
- image, audio, video, document, sticker, location and contacts are logged (``processed_at``
  set); in a bot state the session gets RuntimeConfig's unsupported-media text as an OUTBOUND
  message, once per session per delivery, sent through `enqueue_send` after commit (no LLM);
- a message the parser could not read but whose id and sender it could (``UNREADABLE``, e.g. an
  ``interactive`` WhatsApp itself failed to render) is logged as type ``unsupported`` with the
  reason in ``error`` and, in a bot state, answered like media (no LLM); the delivery's other
  items are applied, and every unreadable item's reason is kept in the delivery's ``error``;
- a message or echo whose timestamp the parser replaced by the reception time (year 9999, before
  the Cloud API) gets a SYSTEM ``timestamp_replaced`` event naming the value Meta sent;
- reaction, unsupported and unknown types are logged only;
- ``system`` messages change the open session's phone or user id and are logged as a SYSTEM event;
- echoes (``smb_message_echoes``, coexistence) are logged as staff OUTBOUND messages and move the
  session to HUMAN (``staff_takeover``, `conversations.handoff.session_handoff`: a SYSTEM event,
  no text, no summary): a human's reply silences the bot, so pending INBOUND messages are marked
  processed too.

Statuses update the OUTBOUND message with that wamid, forward only (`statuses_before`); a
``failed`` stores Meta's code and title. A status for a wamid we do not know (yet) is stored
unlinked and logged; the sender links it when it stores that wamid.
"""

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from agents.redaction import redact
from agents.states import BOT_STATES, HandoffReason, SessionState
from conversations.handoff import session_handoff
from conversations.inbound.hot_path import insert_once
from conversations.inbound.session_rules import forward_only, is_idle, turn_queue, waits_for_turn
from conversations.inbound.sessions import (
    open_session_find,
    open_session_touch,
    session_identity_fill,
    session_identity_update,
    session_open,
)
from conversations.models import (
    DeliveryStatus,
    DeliveryStatusEvent,
    Direction,
    Instance,
    Message,
    Session,
    WebhookOutcome,
)
from conversations.whatsapp.payload import (
    Customer,
    Echo,
    InboundKind,
    InboundMessage,
    StatusUpdate,
    UnreadableItem,
    WebhookPayload,
    without_surrogates,
)
from conversations.whatsapp.statuses import (
    FAILED,
    KNOWN_STATUSES,
    message_id_from_callback,
    statuses_before,
)
from prompts_admin.models import RuntimeConfig

# The package's name, as before the split into modules: log lines keep the logger name.
logger = logging.getLogger("conversations.inbound")

EnqueueFn = Callable[[int], None]

# SYSTEM events written by the channel (message_type), read by the transcript.
EVENT_SESSION_CLOSED = "session_closed"
EVENT_HANDOFF = "handoff"
EVENT_IDENTITY_CHANGED = "identity_changed"
EVENT_TIMESTAMP_REPLACED = "timestamp_replaced"
TIMESTAMP_REPLACED_TEXT = (
    "Horário informado pelo WhatsApp ({value}) fora do intervalo aceito: "
    "usado o horário de recebimento."
)
ACTION_UNSUPPORTED_MEDIA = "unsupported_media"
IDLE_CLOSED_TEXT = "Conversa encerrada por inatividade: o cliente voltou depois de {hours} h."
_NEVER = datetime.min.replace(tzinfo=UTC)
_TITLE_CHARS = 255
_ERROR_CHARS = 2_000
_MESSAGE_ERROR_CHARS = 64  # Message.error
# Unreadable items listed in the delivery's error (the rest counted): enough to diagnose.
_UNREADABLE_LISTED = 20


# --- applying a payload ----------------------------------------------------------------------


@dataclass(slots=True)
class _Result:
    outcome: str
    error: str = ""
    messages_count: int = 0
    statuses_count: int = 0

    @classmethod
    def failed(cls, exc: BaseException) -> "_Result":
        return cls(WebhookOutcome.FAILED, error=_describe_error(exc))

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
        return _clean_text("\n".join(lines))[:_ERROR_CHARS]

    def delivery_fields(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome,
            "error": self.error,
            "messages_count": self.messages_count,
            "statuses_count": self.statuses_count,
            "processed_at": timezone.now(),
        }


@dataclass(slots=True)
class _Applier:
    enqueue_turn: EnqueueFn
    enqueue_send: EnqueueFn
    now: datetime = field(default_factory=timezone.now)
    # phone_number_id -> id of its active Instance (None: unknown), resolved when first needed:
    # on the common path the session lookup joins the instance and no query is spent on it.
    instance_ids: dict[str, int | None] = field(default_factory=dict)
    sessions: dict[tuple[str, str, str], Session] = field(default_factory=dict)
    routed: bool = False
    turns: list[int] = field(default_factory=list)
    sends: list[int] = field(default_factory=list)
    answered_media: set[int] = field(default_factory=set)
    # The newest WhatsApp time of each customer's messages in this delivery: a session's times
    # are moved there when it is first met, so it is locked once, in customer order.
    latest: dict[tuple[str, str, str], datetime] = field(default_factory=dict)
    # The session times the database has now (last_message_at, last_inbound_at) per session.
    stored_times: dict[int, datetime] = field(default_factory=dict)
    stored_inbound_times: dict[int, datetime] = field(default_factory=dict)
    messages_count: int = 0
    statuses_count: int = 0

    def apply(self, payload: WebhookPayload) -> _Result:
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
            key = _customer_key(message)
            self.latest[key] = max(message.timestamp, self.latest.get(key, message.timestamp))
        for message in sorted(payload.messages, key=_by_customer):
            self._receive_message(message)
        for echo in sorted(payload.echoes, key=_by_customer):
            self._receive_echo(echo)
        self._apply_statuses(
            [s for s in payload.statuses if self._instance_id(s.phone_number_id) is not None]
        )
        self._enqueue_after_commit()
        if payload.unreadable and payload.event_count == len(payload.unreadable):
            # Nothing in it could be read: kept failed, for `reprocess_webhooks` after a fix.
            outcome = WebhookOutcome.FAILED
        elif self.routed:
            outcome = WebhookOutcome.PROCESSED
        else:
            outcome = WebhookOutcome.IGNORED
        return _Result(
            outcome,
            error=_Result.unreadable_error(payload),
            messages_count=self.messages_count,
            statuses_count=self.statuses_count,
        )

    def _instance_id(self, phone_number_id: str) -> int | None:
        """The active instance of a number; an unknown or inactive one is logged once."""
        if phone_number_id not in self.instance_ids:
            found = (
                Instance.objects.filter(phone_number_id=phone_number_id, is_active=True)
                .values_list("id", flat=True)
                .first()
            )
            self.instance_ids[phone_number_id] = found
            if found is None:
                logger.warning(
                    "whatsapp_unknown_phone_number_id", extra={"phone_number_id": phone_number_id}
                )
        instance_id = self.instance_ids[phone_number_id]
        self.routed = self.routed or instance_id is not None
        return instance_id

    # --- messages ---

    def _receive_message(self, message: InboundMessage) -> None:
        if message.kind is InboundKind.IDENTITY_CHANGE:
            self._change_identity(message)
            return
        session = self._session(
            message.phone_number_id, message.customer, message.timestamp, inbound=True
        )
        if session is None:
            return  # not one of our numbers
        in_bot_state = session.state in BOT_STATES
        pending_text = waits_for_turn(message.kind, session.state)
        stored = insert_once(
            Message,
            session=session,
            direction=Direction.INBOUND,
            message_type=message.message_type,
            content=message.text,
            error=_clean_text(message.reason)[:_MESSAGE_ERROR_CHARS],
            wa_message_id=message.wamid,
            wa_timestamp=message.timestamp,
            processed_at=None if pending_text else self.now,
            created_at=self.now,
        )
        if stored is None:
            logger.info("whatsapp_message_duplicate", extra={"wamid": message.wamid})
            return
        self.messages_count += 1
        self._touch(session, message.timestamp, inbound=True)
        if message.timestamp_replaced:
            self._timestamp_replaced(session, message.wamid, message.timestamp_replaced)
        if pending_text and session.pk not in self.turns:
            self.turns.append(session.pk)
        if (
            message.kind in (InboundKind.UNSUPPORTED_MEDIA, InboundKind.UNREADABLE)
            and in_bot_state
            and session.pk not in self.answered_media
        ):
            self._answer_unsupported_media(session)
        logger.debug(
            "whatsapp_message_received",
            extra={
                "message_id": stored.pk,
                "session_id": session.pk,
                "type": message.message_type,
                "kind": message.kind.value,
            },
        )

    def _timestamp_replaced(self, session: Session, wamid: str, value: str) -> None:
        """The SYSTEM event that says a WhatsApp timestamp was out of range (see the parser)."""
        Message.objects.create(
            session=session,
            direction=Direction.SYSTEM,
            message_type=EVENT_TIMESTAMP_REPLACED,
            content=TIMESTAMP_REPLACED_TEXT.format(value=_clean_text(value)),
            created_at=self.now,
        )
        logger.warning(
            "whatsapp_timestamp_replaced",
            extra={"session_id": session.pk, "wamid": wamid, "timestamp": value},
        )

    def _answer_unsupported_media(self, session: Session) -> None:
        self.answered_media.add(session.pk)
        reply = Message.objects.create(
            session=session,
            direction=Direction.OUTBOUND,
            message_type="text",
            content=RuntimeConfig.load().unsupported_media_message,
            action=ACTION_UNSUPPORTED_MEDIA,
            delivery_status=DeliveryStatus.PENDING,
            created_at=self.now,
        )
        self.sends.append(reply.pk)
        self._touch(session, self.now, inbound=False)

    def _change_identity(self, message: InboundMessage) -> None:
        change = message.identity_change
        session = open_session_find(message.phone_number_id, message.customer)
        if session is not None:
            self._known(message.phone_number_id, session)
        elif self._instance_id(message.phone_number_id) is None:
            return
        if change is None or session is None:
            logger.warning(
                "whatsapp_identity_change_without_session",
                extra={"wamid": message.wamid, "phone_number_id": message.phone_number_id},
            )
            return
        stored = insert_once(
            Message,
            session=session,
            direction=Direction.SYSTEM,
            message_type=EVENT_IDENTITY_CHANGED,
            action=change.change[:32],
            content=message.text,
            wa_message_id=message.wamid,
            wa_timestamp=message.timestamp,
            processed_at=self.now,
            created_at=self.now,
        )
        if stored is None:
            return
        self.messages_count += 1
        changes = {}
        if change.new_phone:
            changes["customer_phone"] = change.new_phone
        if change.new_user_id:
            changes["customer_user_id"] = change.new_user_id
        session_identity_update(session, changes)
        self._forget_cached(session)
        logger.info(
            "whatsapp_identity_changed",
            extra={"session_id": session.pk, "change": change.change},
        )

    def _receive_echo(self, echo: Echo) -> None:
        if echo.message_type in ("revoke", "edit"):
            # Staff deleted or edited a message in the app: nothing new to log or to answer.
            self._instance_id(echo.phone_number_id)
            logger.info("whatsapp_echo_ignored", extra={"wamid": echo.wamid})
            return
        session = self._session(echo.phone_number_id, echo.customer, echo.timestamp, inbound=False)
        if session is None:
            return
        stored = insert_once(
            Message,
            session=session,
            direction=Direction.OUTBOUND,
            message_type=echo.message_type,
            content=echo.text,
            wa_message_id=echo.wamid,
            wa_timestamp=echo.timestamp,
            delivery_status=DeliveryStatus.SENT,
            delivery_status_at=echo.timestamp,
            created_at=self.now,
        )
        if stored is None:
            return
        self.messages_count += 1
        self._touch(session, echo.timestamp, inbound=False)
        if echo.timestamp_replaced:
            self._timestamp_replaced(session, echo.wamid, echo.timestamp_replaced)
        if session.state != SessionState.HUMAN:
            self._staff_takeover(session)
        logger.info(
            "whatsapp_echo_received", extra={"message_id": stored.pk, "session_id": session.pk}
        )

    def _staff_takeover(self, session: Session) -> None:
        # Not on the one-statement path (a delivery with an echo never is): the action's UPDATE
        # and INSERT cost what the two statements written here did.
        session_handoff(
            session_id=session.pk,
            reason=HandoffReason.STAFF_TAKEOVER,
            now=self.now,
            fixed_text=False,  # staff answer the customer themselves
        )
        session.state = SessionState.HUMAN
        Message.objects.pending_inbound().filter(session=session).update(processed_at=self.now)
        if session.pk in self.turns:
            self.turns.remove(session.pk)
        logger.info("whatsapp_staff_takeover", extra={"session_id": session.pk})

    # --- statuses ---

    def _apply_statuses(self, statuses: list[StatusUpdate]) -> None:
        if not statuses:
            return
        outbound = dict(
            Message.objects.filter(
                wa_message_id__in={s.wamid for s in statuses}, direction=Direction.OUTBOUND
            ).values_list("wa_message_id", "id")
        )
        outbound |= _link_sent_by_callback(
            [s for s in statuses if s.wamid not in outbound and s.callback_data]
        )
        for status in sorted(statuses, key=lambda s: s.timestamp):
            if status.status not in KNOWN_STATUSES:
                logger.info(
                    "whatsapp_status_unknown",
                    extra={"wamid": status.wamid, "status": status.status},
                )
                continue
            if status.timestamp_replaced:
                logger.warning(
                    "whatsapp_timestamp_replaced",
                    extra={"wamid": status.wamid, "timestamp": status.timestamp_replaced},
                )
            self._apply_status(status, outbound.get(status.wamid))

    def _apply_status(self, status: StatusUpdate, message_id: int | None) -> None:
        error = status.errors[0] if status.errors else None
        code = error.code if error else None
        title = error.title[:_TITLE_CHARS] if error else ""
        event = insert_once(
            DeliveryStatusEvent,
            wa_message_id=status.wamid,
            status=status.status,
            message_id=message_id,
            wa_timestamp=status.timestamp,
            error_code=code,
            error_title=title,
            error_details=error.details if error else "",
            created_at=self.now,
        )
        if event is None:
            return  # this (wamid, status) was applied already
        self.statuses_count += 1
        log = {"wamid": status.wamid, "status": status.status, "message_id": message_id}
        if message_id is None:
            logger.info("whatsapp_status_unknown_message", extra=log)
            return
        changes: dict[str, Any] = {
            "delivery_status": status.status,
            "delivery_status_at": status.timestamp,
        }
        if status.status == FAILED:
            changes |= {"delivery_error_code": code, "delivery_error_title": title}
            logger.warning("whatsapp_delivery_failed", extra={**log, "code": code, "title": title})
        Message.objects.filter(
            pk=message_id, delivery_status__in=statuses_before(status.status)
        ).update(**changes)

    # --- sessions ---

    def _session(
        self, phone_number_id: str, customer: Customer, at: datetime, *, inbound: bool
    ) -> Session | None:
        """The customer's open session on that number (see `conversations.inbound.sessions`), its
        times moved forward; None when the number is not an active instance."""
        key = (phone_number_id, customer.user_id, customer.phone)
        session = self.sessions.get(key)
        if session is not None:
            return session
        moved_to = self.latest.get(key, at) if inbound else at
        session = open_session_touch(
            phone_number_id, customer, idle_at=at, moved_to=moved_to, inbound=inbound
        )
        if session is not None:
            # The common case, in one statement: found, not idle, times moved forward.
            self._known(phone_number_id, session)
            self._stored(session, moved_to, inbound=inbound)
            session_identity_fill(session, customer)
            self.sessions[key] = session
            return session
        session = open_session_find(phone_number_id, customer)
        if session is not None:
            self._known(phone_number_id, session)
            session_identity_fill(session, customer)
            if is_idle(session, at):
                self._close_idle(session)
                session = None
        if session is None:
            instance_id = self._instance_id(phone_number_id)
            if instance_id is None:
                return None
            session, opened = session_open(
                instance_id, phone_number_id, customer, self.now, moved_to, inbound=inbound
            )
            if opened:
                self._stored(session, moved_to, inbound=inbound)
        self._touch(session, moved_to, inbound=inbound)
        self.sessions[key] = session
        return session

    def _known(self, phone_number_id: str, session: Session) -> None:
        self.instance_ids[phone_number_id] = session.instance_id
        self.routed = True

    def _forget_cached(self, session: Session) -> None:
        for key in [key for key, cached in self.sessions.items() if cached.pk == session.pk]:
            del self.sessions[key]

    def _close_idle(self, session: Session) -> None:
        closed = (
            Session.objects.filter(pk=session.pk)
            .exclude(state=SessionState.CLOSED)
            .update(state=SessionState.CLOSED, closed_at=self.now)
        )
        if closed:
            Message.objects.create(
                session=session,
                direction=Direction.SYSTEM,
                message_type=EVENT_SESSION_CLOSED,
                action="idle",
                content=IDLE_CLOSED_TEXT.format(hours=settings.SESSION_IDLE_HOURS),
                created_at=self.now,
            )
            logger.info("whatsapp_session_closed_idle", extra={"session_id": session.pk})
        session.state = SessionState.CLOSED
        self._forget_cached(session)

    def _touch(self, session: Session, at: datetime, *, inbound: bool) -> None:
        """Move the session's times forward to `at` (never backwards) unless they are there."""
        changes = {}
        if at > self.stored_times.get(session.pk, _NEVER):
            changes["last_message_at"] = forward_only("last_message_at", at)
        if inbound and at > self.stored_inbound_times.get(session.pk, _NEVER):
            changes["last_inbound_at"] = forward_only("last_inbound_at", at)
        if changes:
            Session.objects.filter(pk=session.pk).update(**changes)
            self._stored(session, at, inbound=inbound)

    def _stored(self, session: Session, at: datetime, *, inbound: bool) -> None:
        self.stored_times[session.pk] = max(at, self.stored_times.get(session.pk, at))
        if inbound:
            self.stored_inbound_times[session.pk] = max(
                at, self.stored_inbound_times.get(session.pk, at)
            )
        # Later events of this delivery judge idleness against the newest time.
        session.last_message_at = self.stored_times[session.pk]

    def _enqueue_after_commit(self) -> None:
        # Registered inside the transaction: discarded if it rolls back. `robust`: a broker outage
        # is logged and never undoes or fails the stored delivery.
        for session_id in self.turns:
            if not turn_queue(session_id=session_id, now=self.now):
                continue  # its turn is queued already and will take this message too
            transaction.on_commit(lambda sid=session_id: self.enqueue_turn(sid), robust=True)
        for message_id in self.sends:
            transaction.on_commit(lambda mid=message_id: self.enqueue_send(mid), robust=True)


def _customer_key(event: InboundMessage | Echo) -> tuple[str, str, str]:
    return (event.phone_number_id, event.customer.user_id, event.customer.phone)


def _by_customer(event: InboundMessage | Echo) -> tuple[str, str, str, datetime]:
    return (*_customer_key(event), event.timestamp)


def _link_sent_by_callback(statuses: list[StatusUpdate]) -> dict[str, int]:
    """wamid -> message id for statuses of messages whose send was accepted but whose wamid we
    never stored (the worker died in between): the status names the message through the
    ``biz_opaque_callback_data`` our send put on it. The wamid is stored on the message, so a
    retry of its send finds it sent instead of sending it twice."""
    by_message = {
        message_id: status.wamid
        for status in statuses
        if (message_id := message_id_from_callback(status.callback_data)) is not None
    }
    linked: dict[str, int] = {}
    for message_id, wamid in by_message.items():
        updated = Message.objects.filter(
            pk=message_id, direction=Direction.OUTBOUND, wa_message_id=None
        ).update(wa_message_id=wamid)
        if updated:
            linked[wamid] = message_id
            logger.warning(
                "whatsapp_send_linked_by_status", extra={"message_id": message_id, "wamid": wamid}
            )
    return linked


def _log_unreadable(item: UnreadableItem) -> None:
    logger.warning("whatsapp_item_unreadable", extra={"where": item.where, "reason": item.reason})


def _clean_text(text: str) -> str:
    """Text any database stores: no NUL (PostgreSQL refuses it), no lone surrogate."""
    return without_surrogates(text.replace("\x00", ""))  # type: ignore[no-any-return]


def _describe_error(exc: BaseException) -> str:
    # Stored on the delivery and logged: a database error may quote the customer's phone.
    return redact(_clean_text(f"{exc.__class__.__name__}: {exc}"))[:_ERROR_CHARS]
