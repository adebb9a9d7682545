"""Receive a WhatsApp webhook delivery: keep its raw body and apply its events, in ONE transaction.

`webhook_delivery_receive` decodes the JSON (a body that is not JSON is refused before anything
is written) and parses it into typed events — pure code, before any write, so a payload that
cannot be parsed is stored alone: its raw body, marked ``failed``. A parsed payload is applied
and the `WebhookDelivery` row (raw body, relevant headers, outcome, counts) inserted in one
transaction. A failure while applying rolls that whole transaction back (its turns are discarded
with it) and stores the raw body alone, marked ``failed``, in a transaction of its own — so the
events are stored with their raw body or not at all, the body always, and the database sees one
commit per delivery, the floor of a durable webhook (DESIGN.md §11). `webhook_delivery_reprocess`
and the ``reprocess_webhooks`` command apply a failed delivery again.

Why no savepoint around the events, as DESIGN.md §11 first put it: a savepoint costs two round
trips (SAVEPOINT, RELEASE) on every delivery to spare a second transaction on the rare failure;
parsing failures, the expected ones, now happen before the transaction starts.

Duplicates are settled by the database, not by reads: ``Message.wa_message_id`` and
``DeliveryStatusEvent (wa_message_id, status)`` are unique, rows are inserted with
``ON CONFLICT DO NOTHING``, and a conflict means "already received". Twenty concurrent deliveries
of one wamid make one row and enqueue one turn.

The common case — a known customer writes again — costs three statements: one
``UPDATE ... RETURNING`` that finds the open session and moves its times, the message insert and
the delivery insert (each compiled once and prepared once per PostgreSQL connection, see
`_insert_row` and `_hot_cursor`); then one commit and the enqueue.

Sessions (the rule this module owns):

- events are routed by ``metadata.phone_number_id`` to an active `Instance`; an unknown or
  inactive one is logged and ignored;
- the customer's open session (state other than CLOSED) is looked up by business-scoped user id
  first, then by phone; the database allows at most one open session per user id and one per
  phone on an instance, so two deliveries that open the same customer's session at once end with
  the one that committed first (the other's insert conflicts and it reads the winner);
- an open session whose last message (``last_message_at``, else ``created_at``) is more than
  ``SESSION_IDLE_HOURS`` older than the event's WhatsApp timestamp is closed, with a SYSTEM event,
  and a new session is opened — whatever its state, HUMAN included: after that silence the
  customer starts a new conversation. A CLOSED session is never reopened;
- a missing phone, user id or profile name is filled in from later events when no other open
  session holds it.

Messages, by kind (`InboundKind`):

- text, interactive replies and template buttons become pending INBOUND text (``processed_at``
  null, ``wa_timestamp`` from the payload) and, in a bot state, the session's turn is enqueued
  once per delivery with ``transaction.on_commit`` through `enqueue_turn`; in HUMAN they are
  logged as read by staff (``processed_at`` set), since no turn will consume them;
- image, audio, video, document, sticker, location and contacts are logged (``processed_at``
  set); in a bot state the session gets RuntimeConfig's unsupported-media text as an OUTBOUND
  message, once per session per delivery, sent through `enqueue_send` after commit (no LLM);
- reaction, unsupported and unknown types are logged only;
- ``system`` messages change the open session's phone or user id and are logged as a SYSTEM event;
- echoes (``smb_message_echoes``, coexistence) are logged as staff OUTBOUND messages and move the
  session to HUMAN (``staff_takeover``) with a SYSTEM event: a human's reply silences the bot, so
  pending INBOUND messages are marked processed too.

Statuses update the OUTBOUND message with that wamid, forward only (`statuses_before`); a
``failed`` stores Meta's code and title. A status for a wamid we do not know (yet) is stored
unlinked and logged; the sender links it when it stores that wamid.
"""

import functools
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from django.conf import settings
from django.db import IntegrityError, OperationalError, connections, models, transaction
from django.db.models import F, Q
from django.db.models.constants import OnConflict
from django.db.models.functions import Coalesce, Greatest
from django.db.models.sql import InsertQuery
from django.utils import timezone

from agents.states import BOT_STATES, HandoffReason, SessionState
from conversations.models import (
    DeliveryStatus,
    DeliveryStatusEvent,
    Direction,
    Instance,
    Message,
    Session,
    WebhookDelivery,
    WebhookOutcome,
)
from conversations.whatsapp.payload import (
    Customer,
    Echo,
    InboundKind,
    InboundMessage,
    PayloadError,
    StatusUpdate,
    WebhookPayload,
    decode_body,
    parse_payload,
)
from conversations.whatsapp.statuses import FAILED, KNOWN_STATUSES, statuses_before
from prompts_admin.models import RuntimeConfig

logger = logging.getLogger(__name__)

EnqueueFn = Callable[[int], None]
M = TypeVar("M", bound=models.Model)

# SYSTEM events written by the channel (message_type), read by the transcript.
EVENT_SESSION_CLOSED = "session_closed"
EVENT_HANDOFF = "handoff"
EVENT_IDENTITY_CHANGED = "identity_changed"
ACTION_UNSUPPORTED_MEDIA = "unsupported_media"
IDLE_CLOSED_TEXT = "Conversa encerrada por inatividade: o cliente voltou depois de {hours} h."
STAFF_TAKEOVER_TEXT = "Atendimento assumido pela equipe pelo app WhatsApp Business."
_NEVER = datetime.min.replace(tzinfo=UTC)
_NAME_CHARS = 200
_TITLE_CHARS = 255
_ERROR_CHARS = 2_000
# What the channel reads of a session (the rest, JSON data included, is the pipeline's).
_SESSION_FIELDS = (
    "instance_id",
    "state",
    "customer_phone",
    "customer_user_id",
    "customer_name",
    "created_at",
    "last_message_at",
)
_STORED_HEADERS = ("Content-Type", "Content-Length", "User-Agent", "X-Hub-Signature-256")


@dataclass(frozen=True, slots=True)
class DeliveryReceipt:
    delivery_id: int
    outcome: str
    messages_count: int
    statuses_count: int


class DeliveryNotStored(Exception):
    """Even the raw body could not be stored (database down): the webhook must not answer 200."""


def stored_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """The request headers worth keeping with a delivery (never cookies or credentials)."""
    return {name: headers[name] for name in _STORED_HEADERS if name in headers}


def webhook_delivery_receive(
    *,
    raw_body: bytes,
    headers: Mapping[str, str],
    enqueue_turn: EnqueueFn,
    enqueue_send: EnqueueFn,
) -> DeliveryReceipt:
    """Store and apply one signature-checked webhook body (see the module docstring).

    Raises `MalformedBodyError` (nothing stored) when the body is not JSON, and
    `DeliveryNotStored` when the database refuses even the raw body.
    """
    document = decode_body(raw_body)
    try:
        payload = parse_payload(document)
    except Exception as exc:
        # Parsing is pure: nothing was written, so the body alone is stored, marked failed.
        _log_apply_failure(exc)
        receipt = _store_failed_body(raw_body, headers, exc)
    else:
        receipt = _apply_and_store(payload, raw_body, headers, enqueue_turn, enqueue_send)
    logger.info("whatsapp_webhook_received", extra=_log_fields(receipt))
    return receipt


def _apply_and_store(
    payload: WebhookPayload,
    raw_body: bytes,
    headers: Mapping[str, str],
    enqueue_turn: EnqueueFn,
    enqueue_send: EnqueueFn,
    *,
    attempts: int = 2,
) -> DeliveryReceipt:
    """The events and the raw body in one transaction, without a savepoint: on a failure the
    whole transaction rolls back (its turns are discarded with it) and the raw body is stored
    alone, marked failed, in a transaction of its own — never both, never neither (short of
    `DeliveryNotStored`). A savepoint around the events would spare that second transaction on
    the rare failure at the price of two round trips (SAVEPOINT, RELEASE) on every delivery.
    """
    try:
        with transaction.atomic():
            result = _Applier(enqueue_turn, enqueue_send).apply(payload)
            fields = result.delivery_fields()
            delivery_id = _insert_row(
                WebhookDelivery, raw_body=raw_body, headers=dict(headers), **fields
            )
    except OperationalError as exc:
        # A deadlock or a lock timeout: the rollback released our locks, so try once more.
        if attempts > 1:
            logger.warning("whatsapp_webhook_apply_retry", extra={"error": _describe_error(exc)})
            return _apply_and_store(
                payload, raw_body, headers, enqueue_turn, enqueue_send, attempts=attempts - 1
            )
        _log_apply_failure(exc)
        return _store_failed_body(raw_body, headers, exc)
    except Exception as exc:
        _log_apply_failure(exc)
        return _store_failed_body(raw_body, headers, exc)
    return DeliveryReceipt(
        delivery_id=delivery_id,
        outcome=fields["outcome"],
        messages_count=fields["messages_count"],
        statuses_count=fields["statuses_count"],
    )


def _log_apply_failure(exc: BaseException) -> None:
    if isinstance(exc, PayloadError):
        logger.warning("whatsapp_webhook_payload_refused", extra={"error": _describe_error(exc)})
    else:
        logger.exception("whatsapp_webhook_apply_failed", extra={"error": _describe_error(exc)})


def webhook_delivery_reprocess(
    *, delivery_id: int, enqueue_turn: EnqueueFn, enqueue_send: EnqueueFn
) -> DeliveryReceipt | None:
    """Apply a ``failed`` delivery again; None when it is not (or no longer) failed."""
    with transaction.atomic():
        delivery = (
            WebhookDelivery.objects.select_for_update()
            .filter(pk=delivery_id, outcome=WebhookOutcome.FAILED)
            .first()
        )
        if delivery is None:
            return None
        try:
            document = decode_body(bytes(delivery.raw_body))
        except ValueError as exc:
            result = _Result.failed(exc)
        else:
            result = _apply_in_savepoint(document, enqueue_turn, enqueue_send)
        fields = result.delivery_fields()
        for name, value in fields.items():
            setattr(delivery, name, value)
        delivery.save(update_fields=list(fields))
    receipt = _receipt(delivery)
    logger.info("whatsapp_webhook_reprocessed", extra=_log_fields(receipt))
    return receipt


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

    def delivery_fields(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome,
            "error": self.error,
            "messages_count": self.messages_count,
            "statuses_count": self.statuses_count,
            "processed_at": timezone.now(),
        }


def _apply_in_savepoint(
    document: Any, enqueue_turn: EnqueueFn, enqueue_send: EnqueueFn, *, attempts: int = 2
) -> _Result:
    """Reprocessing's apply: the delivery row is locked and updated in the same transaction, so
    the events get a savepoint of their own (a rare path; see `_apply_and_store` for the hot
    one)."""
    try:
        with transaction.atomic():
            payload = parse_payload(document)
            return _Applier(enqueue_turn, enqueue_send).apply(payload)
    except OperationalError as exc:
        # A deadlock or a lock timeout: the savepoint released its locks, so try once more.
        if attempts > 1:
            logger.warning("whatsapp_webhook_apply_retry", extra={"error": _describe_error(exc)})
            return _apply_in_savepoint(document, enqueue_turn, enqueue_send, attempts=attempts - 1)
        logger.exception("whatsapp_webhook_apply_failed", extra={"error": _describe_error(exc)})
        return _Result.failed(exc)
    except PayloadError as exc:
        # Everything the savepoint wrote is gone; the raw body is kept for reprocessing.
        logger.warning("whatsapp_webhook_payload_refused", extra={"error": _describe_error(exc)})
        return _Result.failed(exc)
    except Exception as exc:
        logger.exception("whatsapp_webhook_apply_failed", extra={"error": _describe_error(exc)})
        return _Result.failed(exc)


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
        return _Result(
            WebhookOutcome.PROCESSED if self.routed else WebhookOutcome.IGNORED,
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
        pending_text = message.kind is InboundKind.TEXT and in_bot_state
        stored = _insert_once(
            Message,
            session=session,
            direction=Direction.INBOUND,
            message_type=message.message_type,
            content=message.text,
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
        if pending_text and session.pk not in self.turns:
            self.turns.append(session.pk)
        if (
            message.kind is InboundKind.UNSUPPORTED_MEDIA
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
        session = _find_open_session(message.phone_number_id, message.customer)
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
        stored = _insert_once(
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
        _update_identity(session, changes)
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
        stored = _insert_once(
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
        if session.state != SessionState.HUMAN:
            self._staff_takeover(session)
        logger.info(
            "whatsapp_echo_received", extra={"message_id": stored.pk, "session_id": session.pk}
        )

    def _staff_takeover(self, session: Session) -> None:
        Session.objects.filter(pk=session.pk).update(
            state=SessionState.HUMAN,
            handoff_reason=HandoffReason.STAFF_TAKEOVER,
            handoff_detail="",
            handed_off_at=self.now,
        )
        session.state = SessionState.HUMAN
        Message.objects.create(
            session=session,
            direction=Direction.SYSTEM,
            message_type=EVENT_HANDOFF,
            action=HandoffReason.STAFF_TAKEOVER,
            content=STAFF_TAKEOVER_TEXT,
            created_at=self.now,
        )
        Message.objects.filter(
            session=session, direction=Direction.INBOUND, processed_at=None
        ).update(processed_at=self.now)
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
        for status in sorted(statuses, key=lambda s: s.timestamp):
            if status.status not in KNOWN_STATUSES:
                logger.info(
                    "whatsapp_status_unknown",
                    extra={"wamid": status.wamid, "status": status.status},
                )
                continue
            self._apply_status(status, outbound.get(status.wamid))

    def _apply_status(self, status: StatusUpdate, message_id: int | None) -> None:
        error = status.errors[0] if status.errors else None
        code = error.code if error else None
        title = error.title[:_TITLE_CHARS] if error else ""
        event = _insert_once(
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
        """The customer's open session on that number (see the module docstring), its times
        moved forward; None when the number is not an active instance."""
        key = (phone_number_id, customer.user_id, customer.phone)
        session = self.sessions.get(key)
        if session is not None:
            return session
        moved_to = self.latest.get(key, at) if inbound else at
        session = _touch_open_session(
            phone_number_id, customer, idle_at=at, moved_to=moved_to, inbound=inbound
        )
        if session is not None:
            # The common case, in one statement: found, not idle, times moved forward.
            self._known(phone_number_id, session)
            self._stored(session, moved_to, inbound=inbound)
            _fill_identity(session, customer)
            self.sessions[key] = session
            return session
        session = _find_open_session(phone_number_id, customer)
        if session is not None:
            self._known(phone_number_id, session)
            _fill_identity(session, customer)
            if _is_idle(session, at):
                self._close_idle(session)
                session = None
        if session is None:
            instance_id = self._instance_id(phone_number_id)
            if instance_id is None:
                return None
            session, opened = _open_session(
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
            changes["last_message_at"] = Greatest(Coalesce(F("last_message_at"), at), at)
        if inbound and at > self.stored_inbound_times.get(session.pk, _NEVER):
            changes["last_inbound_at"] = Greatest(Coalesce(F("last_inbound_at"), at), at)
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
            transaction.on_commit(lambda sid=session_id: self.enqueue_turn(sid), robust=True)
        for message_id in self.sends:
            transaction.on_commit(lambda mid=message_id: self.enqueue_send(mid), robust=True)


def _customer_key(event: InboundMessage | Echo) -> tuple[str, str, str]:
    return (event.phone_number_id, event.customer.user_id, event.customer.phone)


def _by_customer(event: InboundMessage | Echo) -> tuple[str, str, str, datetime]:
    return (*_customer_key(event), event.timestamp)


def _insert_once(model: type[M], **values: Any) -> M | None:
    """Insert a row unless it conflicts with a unique constraint; None when it did.

    ``INSERT ... ON CONFLICT DO NOTHING RETURNING id``: one round trip, no savepoint, and the
    database settles the race — a concurrent insert of the same wamid waits for the first
    transaction and then does nothing. (The public `bulk_create(ignore_conflicts=True)` cannot
    say whether the row was inserted.)
    """
    row = model(**values)
    pk = _insert_row(model, row=row, ignore_conflicts=True)
    if pk is None:
        return None
    row.pk = pk
    row._state.adding = False
    return row


# (database alias, model, ignore_conflicts) -> (INSERT statement, its fields in order).
_INSERT_STATEMENTS: dict[tuple[str, type[models.Model], bool], tuple[str, list[Any]]] = {}


def _insert_row(
    model: type[models.Model],
    *,
    row: models.Model | None = None,
    ignore_conflicts: bool = False,
    **values: Any,
) -> Any:
    """Insert one row (`row`, or a new one from `values`) and return its primary key; None when
    `ignore_conflicts` and it conflicted. No model signals (the channel's models have none).

    The statement is the one the ORM compiles (`QuerySet._insert`, which `bulk_create` uses),
    compiled once per model and reused; each call only prepares the values, as the ORM does
    (``pre_save`` then ``get_db_prep_save``). Compiling the INSERT costs more CPU than running
    it: on the webhook's hot path this halves the cost of each of its two inserts.
    """
    if row is None:
        row = model(**values)
    connection = connections[model._default_manager.db]
    key = (connection.alias, model, ignore_conflicts)
    compiled = _INSERT_STATEMENTS.get(key)
    if compiled is None:
        compiled = _INSERT_STATEMENTS[key] = _compile_insert(connection, model, ignore_conflicts)
    statement, fields = compiled
    params = [field.get_db_prep_save(field.pre_save(row, True), connection) for field in fields]
    with _hot_cursor(connection) as cursor:
        cursor.execute(statement, params)
        returned = cursor.fetchone()
    return returned[0] if returned else None


def _hot_cursor(connection: Any) -> Any:
    """A cursor for the webhook's hot statements (the session's ``UPDATE ... RETURNING``, the
    message and delivery inserts): on PostgreSQL it binds on the server and prepares each
    statement once per connection, so PostgreSQL parses and plans it once instead of for every
    delivery — measured on the 2-core bench machine, 0.36 -> 0.18 ms of PostgreSQL CPU for the
    session update (a join over the session's fourteen indexes is costly to plan), 0.16 -> 0.13
    and 0.14 -> 0.08 ms for the two inserts, and less client CPU too.

    Django keeps prepared statements off by default (``prepare_threshold``) for
    transaction-mode connection poolers: behind PgBouncer older than 1.21 in that mode, use
    ``connection.cursor()`` here. Elsewhere (SQLite) this is ``connection.cursor()``. The cursor
    is Django's wrapper, so execute wrappers, query logging and error translation apply.
    """
    if connection.vendor != "postgresql":
        return connection.cursor()
    connection.close_if_health_check_failed()
    connection.ensure_connection()
    with connection.wrap_database_errors:
        cursor = _PreparingCursor(connection.connection)
    wrap = connection.make_debug_cursor if connection.queries_logged else connection.make_cursor
    return wrap(cursor)


def _preparing_cursor_class() -> type:
    try:
        import psycopg
    except ImportError:  # SQLite-only installs never reach `_hot_cursor`'s PostgreSQL branch
        return object

    class PreparingCursor(psycopg.Cursor):  # server-side binding, like Django's own option
        def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
            return super().execute(query, params, prepare=True)

    return PreparingCursor


_PreparingCursor = _preparing_cursor_class()


def _compile_insert(
    connection: Any, model: type[models.Model], ignore_conflicts: bool
) -> tuple[str, list[Any]]:
    if not connection.features.can_return_columns_from_insert:
        raise NotImplementedError("the channel needs INSERT ... RETURNING (PostgreSQL, SQLite)")
    fields = [f for f in model._meta.concrete_fields if not f.primary_key and not f.generated]
    query = InsertQuery(model, on_conflict=OnConflict.IGNORE if ignore_conflicts else None)
    query.insert_values(fields, [model()])
    compiler = query.get_compiler(connection=connection)
    compiler.returning_fields = [model._meta.pk]
    [(statement, _params)] = compiler.as_sql()
    return statement, fields


# In the model's field order: `Model.from_db` maps a partial row by that order.
_TOUCH_RETURNS = tuple(
    f.attname
    for f in Session._meta.concrete_fields
    if f.attname
    in {"id", "instance_id", "state", "customer_phone", "customer_user_id", "customer_name"}
)


def _touch_open_session(
    phone_number_id: str,
    customer: Customer,
    *,
    idle_at: datetime,
    moved_to: datetime,
    inbound: bool,
) -> Session | None:
    """Find the customer's open session on that number, not idle at `idle_at`, and move its
    times forward to `moved_to`, in one ``UPDATE ... RETURNING`` per identifier (user id first,
    then phone).

    The webhook's hot path: the ORM needs a SELECT, then an UPDATE, and spends more CPU building
    them than the database spends running them. None when there is no such session (new
    customer, idle session, unknown number): the caller then takes the ORM path.
    """
    connection = connections[Session.objects.db]
    moment = connection.ops.adapt_datetimefield_value(moved_to)
    idle_since = connection.ops.adapt_datetimefield_value(
        idle_at - timedelta(hours=settings.SESSION_IDLE_HOURS)
    )
    for field_name, value in (
        ("customer_user_id", customer.user_id),
        ("customer_phone", customer.phone),
    ):
        if not value:
            continue
        sql = _touch_statement(connection.alias, field_name, inbound)
        params = [moment, moment] * (2 if inbound else 1) + [
            phone_number_id,
            True,
            value,
            SessionState.CLOSED.value,
            idle_since,
        ]
        with _hot_cursor(connection) as cursor:
            cursor.execute(sql, params)
            row = cursor.fetchone()
        if row is not None:
            return Session.from_db(connection.alias, list(_TOUCH_RETURNS), row)
    return None


@functools.cache
def _touch_statement(alias: str, field_name: str, inbound: bool) -> str:
    """`_touch_open_session`'s statement for one identifier column, built once per database."""
    quote = connections[alias].ops.quote_name

    def column(name: str) -> str:
        return quote(Session._meta.get_field(name).column)

    def instance_column(name: str) -> str:
        return quote(Instance._meta.get_field(name).column)

    moved = [column("last_message_at")] + ([column("last_inbound_at")] if inbound else [])
    assignments = ", ".join(
        f"{name} = CASE WHEN {name} IS NULL OR {name} < %s THEN %s ELSE {name} END"
        for name in moved
    )
    return (
        f"UPDATE {quote(Session._meta.db_table)} SET {assignments} "
        f"WHERE {column('id')} = ("
        f"SELECT s.{column('id')} FROM {quote(Session._meta.db_table)} s "
        f"JOIN {quote(Instance._meta.db_table)} i "
        f"ON i.{instance_column('id')} = s.{column('instance')} "
        f"WHERE i.{instance_column('phone_number_id')} = %s "
        f"AND i.{instance_column('is_active')} = %s "
        f"AND s.{column(field_name)} = %s AND s.{column('state')} <> %s "
        f"AND COALESCE(s.{column('last_message_at')}, s.{column('created_at')}) >= %s "
        "LIMIT 1) "
        f"RETURNING {', '.join(column(name) for name in _TOUCH_RETURNS)}"
    )


def _find_open_session(phone_number_id: str, customer: Customer) -> Session | None:
    match = Q()
    if customer.user_id:
        match |= Q(customer_user_id=customer.user_id)
    if customer.phone:
        match |= Q(customer_phone=customer.phone)
    candidates = list(
        Session.objects.filter(
            match, instance__phone_number_id=phone_number_id, instance__is_active=True
        )
        .exclude(state=SessionState.CLOSED)
        .only(*_SESSION_FIELDS)
        .order_by()  # at most two rows; the model's default ordering would only cost a sort
    )
    # The user id names the customer more precisely than a phone that may have changed hands.
    for session in candidates:
        if customer.user_id and session.customer_user_id == customer.user_id:
            return session
    return candidates[0] if candidates else None


def _open_session(
    instance_id: int,
    phone_number_id: str,
    customer: Customer,
    now: datetime,
    at: datetime,
    *,
    inbound: bool,
) -> tuple[Session, bool]:
    """A new session with its times at `at`, and True; or, when another delivery opened the
    customer's session first, that one and False."""
    try:
        with transaction.atomic():
            session = Session.objects.create(
                instance_id=instance_id,
                customer_phone=customer.phone,
                customer_user_id=customer.user_id,
                customer_name=customer.name[:_NAME_CHARS],
                created_at=now,
                last_message_at=at,
                last_inbound_at=at if inbound else None,
            )
            return session, True
    except IntegrityError:
        # Another delivery opened this customer's session first (one open session per phone and
        # per user id); ours waited for its commit, so it is visible now.
        session = _find_open_session(phone_number_id, customer)
        if session is None:
            raise
        _fill_identity(session, customer)
        return session, False


def _fill_identity(session: Session, customer: Customer) -> None:
    changes = {}
    if customer.phone and not session.customer_phone:
        changes["customer_phone"] = customer.phone
    if customer.user_id and not session.customer_user_id:
        changes["customer_user_id"] = customer.user_id
    if customer.name and not session.customer_name:
        changes["customer_name"] = customer.name[:_NAME_CHARS]
    _update_identity(session, changes)


def _update_identity(session: Session, changes: dict[str, str]) -> None:
    if not changes:
        return
    try:
        with transaction.atomic():
            Session.objects.filter(pk=session.pk).update(**changes)
    except IntegrityError:
        # Another open session holds that phone or user id; leave both as they are.
        logger.warning(
            "whatsapp_identity_conflict",
            extra={"session_id": session.pk, "fields": sorted(changes)},
        )
        return
    for name, value in changes.items():
        setattr(session, name, value)


def _is_idle(session: Session, at: datetime) -> bool:
    last = session.last_message_at or session.created_at
    return at - last > timedelta(hours=settings.SESSION_IDLE_HOURS)


def _store_failed_body(
    raw_body: bytes, headers: Mapping[str, str], exc: BaseException
) -> DeliveryReceipt:
    """The raw body alone, marked failed for `webhook_delivery_reprocess`, in one transaction."""
    try:
        with transaction.atomic():
            delivery_id = _insert_row(
                WebhookDelivery,
                raw_body=raw_body,
                headers=dict(headers),
                outcome=WebhookOutcome.FAILED,
                error=_describe_error(exc),
                processed_at=timezone.now(),
            )
    except Exception as second:
        logger.exception("whatsapp_webhook_body_lost")
        raise DeliveryNotStored(str(second)) from exc
    return DeliveryReceipt(
        delivery_id=delivery_id, outcome=WebhookOutcome.FAILED, messages_count=0, statuses_count=0
    )


def _describe_error(exc: BaseException) -> str:
    text = f"{exc.__class__.__name__}: {exc}".replace("\x00", "")
    return text[:_ERROR_CHARS]


def _receipt(delivery: WebhookDelivery) -> DeliveryReceipt:
    return DeliveryReceipt(
        delivery_id=delivery.pk,
        outcome=delivery.outcome,
        messages_count=delivery.messages_count,
        statuses_count=delivery.statuses_count,
    )


def _log_fields(receipt: DeliveryReceipt) -> dict[str, Any]:
    return {
        "delivery_id": receipt.delivery_id,
        "outcome": receipt.outcome,
        "messages": receipt.messages_count,
        "statuses": receipt.statuses_count,
    }
