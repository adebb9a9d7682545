"""Use cases that call the Graph API: send an OUTBOUND message, mark an INBOUND one as read.

Sending is at-most-once per message as far as this side can make it:

1. claim: a short transaction locks the row (``SELECT ... FOR UPDATE``); a message that has a wamid,
   has failed for good, or is claimed by another worker (``delivery_status="pending"`` with a
   ``delivery_status_at`` younger than `SEND_CLAIM_SECONDS`) is left alone; otherwise the claim is
   written (``pending``, now, ``send_attempts + 1``) and committed;
2. call the Graph API with no transaction open;
3. store the wamid and ``sent``, or Meta's error code and title.

A worker that dies between 2 and 3 leaves a claim that expires after `SEND_CLAIM_SECONDS`; the
message may then be sent a second time — the Cloud API has no idempotency key, so that window is
the one duplicate this design cannot close.

The parts of a split answer (same ``turn_id``, ``part_index`` 0, 1, ...) go out in order: sending
any part sends the turn's parts in ``part_index`` order, each only after the previous one was
accepted (it has a wamid). So the pipeline may enqueue `send_message` for the first part only,
or for every part: a task that meets a part claimed by another worker stops, and that worker
carries on with the rest. A part refused for good fails the parts after it, unsent.

Dry run (`sender_for`): with no access token at all (neither the instance's nor
``WHATSAPP_ACCESS_TOKEN``: the `make run` default) or for a simulated session
(`Session.is_simulated`), the message goes through the same claim and store steps with
`DryRunSender`: it is stored as sent with a fake wamid ``sim.<uuid>`` (how a simulated send is
told apart: `is_simulated_wamid`) and logged as ``whatsapp_send_simulated`` with its id and why
(`DryRunReason`); no request leaves the machine. Mark-read does nothing then. Staff read such a
message as simulated, never as sent (`conversations.labels.delivery_label`).
"""

import logging
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum
from typing import Any

from django.conf import settings
from django.db import connections, transaction
from django.db.models import Q
from django.utils import timezone

from compat.django_private import load_model, select_columns
from conversations.inbound.hot_path import hot_cursor
from conversations.metrics import read_receipt_counted, send_counted
from conversations.models import (
    SUPERSEDED,
    DeliveryStatus,
    DeliveryStatusEvent,
    Direction,
    Instance,
    Message,
    Session,
)
from whatsapp import CUSTOMER_SERVICE_WINDOW
from whatsapp.client import (
    DryRunSender,
    GraphAPIError,
    GraphClient,
    WhatsAppSender,
)
from whatsapp.statuses import STATUS_ORDER, send_callback_data, statuses_before

logger = logging.getLogger(__name__)

# Longer than the client's whole request (connect 5 s + read 10 s), so a live claim never expires.
SEND_CLAIM_SECONDS = 60
PREVIOUS_PART_FAILED = "Parte anterior da resposta não foi enviada"
NO_RECIPIENT = "Conversa sem telefone nem ID de usuário do cliente"
_TITLE_CHARS = 255
DRY_RUN_SENDER = DryRunSender()


class SendOutcome(StrEnum):
    SENT = "sent"
    ALREADY_SENT = "already_sent"  # it has a wamid: never sent again
    IN_FLIGHT = "in_flight"  # another worker holds the claim of this part or an earlier one
    FAILED = "failed"  # refused for good; code and title stored on the message
    # The retries of this task are over but the Graph API may still accept it: left unsent for
    # the unsent-messages sweep's next round (conversations.sweeps), until the 24-hour window.
    DEFERRED = "deferred"
    SKIPPED = "skipped"  # no such OUTBOUND message, or a superseded draft


TEMPLATE_MESSAGE_TYPE = "template"


class DryRunReason(StrEnum):
    """Why a session's sends go to the dry-run sender."""

    SIMULATED_SESSION = "simulated_session"
    NO_ACCESS_TOKEN = "no_access_token"  # neither the instance's nor WHATSAPP_ACCESS_TOKEN


def dry_run_reason(session: Session) -> DryRunReason | None:
    """Why `session`'s messages would not leave the machine (its instance is read), or None
    when they go to the Graph API."""
    return _dry_run_reason(
        simulated=session.is_simulated,
        access_token=session.instance.access_token or settings.WHATSAPP_ACCESS_TOKEN,
    )


def _dry_run_reason(*, simulated: bool, access_token: str) -> DryRunReason | None:
    if simulated:
        return DryRunReason.SIMULATED_SESSION
    if not access_token:
        return DryRunReason.NO_ACCESS_TOKEN
    return None


@dataclass(frozen=True, slots=True)
class TemplatePayload:
    """What an OUTBOUND ``template`` message sends, kept in its `json_part` under "template"."""

    name: str
    language: str
    parameters: tuple[str, ...] = ()

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "language": self.language, "parameters": list(self.parameters)}


def template_of(message: Message) -> TemplatePayload:
    data = (message.json_part or {}).get("template") or {}
    return TemplatePayload(
        name=str(data.get("name", "")),
        language=str(data.get("language", "")),
        parameters=tuple(str(value) for value in data.get("parameters", ())),
    )


class RetryableSendError(Exception):
    """The Graph API may accept the message later (timeout, 5xx, 130429, 131056)."""

    def __init__(self, *, message_id: int, error: GraphAPIError) -> None:
        super().__init__(f"message {message_id}: {error}")
        self.message_id = message_id
        self.error = error


def outbound_message_send(
    *,
    message_id: int,
    client: WhatsAppSender,
    last_attempt: bool = False,
    swept_later: bool = True,
) -> SendOutcome:
    """Send OUTBOUND message `message_id` and the other parts of its turn, in order.

    Raises `RetryableSendError` when a retry may succeed, unless `last_attempt`: then a transient
    failure leaves the message for the unsent-messages sweep while WhatsApp's 24-hour window is
    open (`DEFERRED`), or marks it failed when the window is closed or no sweep runs
    (`swept_later=False`: the embedded default has no beat). Returns the outcome of `message_id`
    itself.
    """
    chain = _turn_chain(message_id)
    if message_id not in chain:
        logger.warning("whatsapp_send_skipped", extra={"message_id": message_id})
        return SendOutcome.SKIPPED
    outcomes: dict[int, SendOutcome] = {}
    for position, part_id in enumerate(chain):
        outcome = _send_part(part_id, client, last_attempt=last_attempt, swept_later=swept_later)
        outcomes[part_id] = outcome
        if outcome is SendOutcome.FAILED:
            _fail_unsent(chain[position + 1 :])
            break
        if outcome in (SendOutcome.IN_FLIGHT, SendOutcome.DEFERRED):
            break
    if message_id in outcomes:
        return outcomes[message_id]
    # Not reached: an earlier part failed (and failed this one), was deferred, or is being sent
    # elsewhere.
    for outcome in (SendOutcome.FAILED, SendOutcome.DEFERRED):
        if outcome in outcomes.values():
            return outcome
    return SendOutcome.IN_FLIGHT


@dataclass(frozen=True, slots=True)
class ReadReceipt:
    """What marking one INBOUND message read needs. The turn holds all of it already (its
    session, instance and newest message), so sending a receipt reads nothing from the database.
    `access_token` is the one to send with: the instance's, else ``WHATSAPP_ACCESS_TOKEN``."""

    message_id: int
    wamid: str
    phone_number_id: str
    access_token: str
    simulated: bool

    def __repr__(self) -> str:
        # Never the token, wherever a receipt is logged or shown in a traceback.
        return f"ReadReceipt(message_id={self.message_id}, wamid={self.wamid!r})"


def read_receipt_for(session: Session, message: Message) -> ReadReceipt | None:
    """The receipt of INBOUND `message` of `session` (its instance loaded); None for a message
    WhatsApp did not deliver (no wamid: nothing to mark)."""
    if not message.wa_message_id:
        return None
    instance = session.instance
    return ReadReceipt(
        message_id=message.pk,
        wamid=message.wa_message_id,
        phone_number_id=instance.phone_number_id,
        access_token=instance.access_token or settings.WHATSAPP_ACCESS_TOKEN,
        simulated=session.is_simulated,
    )


def read_receipt_send(receipt: ReadReceipt, *, client: WhatsAppSender) -> bool:
    """Mark the message read with a typing indicator; a failure is logged, never raised.

    A simulated session's receipt, or one with no access token, goes to the dry-run sender
    (`sender_for`): nothing leaves the machine."""
    sender = _sender(simulated=receipt.simulated, access_token=receipt.access_token, client=client)
    try:
        sender.mark_read(
            phone_number_id=receipt.phone_number_id,
            access_token=receipt.access_token,
            wamid=receipt.wamid,
        )
    except GraphAPIError as exc:
        logger.warning(
            "whatsapp_mark_read_failed",
            extra={"message_id": receipt.message_id, "code": exc.code, "title": exc.title},
        )
        read_receipt_counted("failed")
        return False
    read_receipt_counted("sent")
    return True


def sender_for(session: Session, *, access_token: str, client: WhatsAppSender) -> WhatsAppSender:
    """The dry-run sender instead of the Graph API client when nothing may leave the machine: a
    simulated session, or no access token at all (neither the instance's nor
    ``WHATSAPP_ACCESS_TOKEN``: the `make run` default, where a real request could only fail);
    else `client`. A sender that is not the Graph client (the demo loader's) is kept as given:
    it never reaches the network anyway."""
    return _sender(simulated=session.is_simulated, access_token=access_token, client=client)


def _sender(*, simulated: bool, access_token: str, client: WhatsAppSender) -> WhatsAppSender:
    reason = _dry_run_reason(simulated=simulated, access_token=access_token)
    if isinstance(client, GraphClient) and reason is not None:
        return DRY_RUN_SENDER
    return client


# The send's hot statements, hand-written: compiling the ORM's queries costs the worker more CPU
# than running them (about 0.6-0.9 ms per statement on the 2-core bench machine; together a
# tenth of a send, bench/worker_cpu.py). tests/conversations/whatsapp/test_sending_sql.py checks
# each against the ORM's, quoted in the comments.
_MESSAGE = Message._meta.db_table
_NOT_SUPERSEDED = f"<> '{SUPERSEDED}'"
# The parts sent together with the message: itself (an OUTBOUND message, not superseded) and the
# other parts of its turn, in sending order; none when it is no such message. One statement for
# the ORM's two:
#   origin = Message.objects.filter(pk=message_id, direction=OUTBOUND).not_superseded()
#       .values("session_id", "turn_id").first()
#   [message_id] if origin["turn_id"] is None else list(Message.objects.filter(
#       session_id=origin["session_id"], turn_id=origin["turn_id"], direction=OUTBOUND)
#       .not_superseded().order_by("part_index", "id").values_list("id", flat=True))
TURN_CHAIN_SQL = f"""SELECT part.id FROM {_MESSAGE} origin
    JOIN {_MESSAGE} part ON part.id = origin.id OR (
        part.session_id = origin.session_id AND part.turn_id = origin.turn_id
        AND part.direction = '{Direction.OUTBOUND.value}' AND part.error {_NOT_SUPERSEDED})
    WHERE origin.id = %s AND origin.direction = '{Direction.OUTBOUND.value}'
        AND origin.error {_NOT_SUPERSEDED}
    ORDER BY part.part_index, part.id"""
# The wamid, and SENT unless a status callback already moved the message on (forward only: it may
# have named this message by its biz_opaque_callback_data), in one statement for the ORM's two:
#   Message.objects.filter(pk=pk).update(wa_message_id=wamid)
#   Message.objects.filter(pk=pk, delivery_status__in=statuses_before(SENT)).update(
#       delivery_status=SENT, delivery_status_at=now, delivery_error_code=None,
#       delivery_error_title="")
_BEFORE_SENT = ", ".join(f"'{status}'" for status in statuses_before(DeliveryStatus.SENT))
_WHEN_BEFORE_SENT = f"CASE WHEN delivery_status IN ({_BEFORE_SENT})"
STORE_SENT_SQL = f"""UPDATE {_MESSAGE} SET wa_message_id = %s,
        delivery_status = {_WHEN_BEFORE_SENT} THEN %s ELSE delivery_status END,
        delivery_status_at = {_WHEN_BEFORE_SENT} THEN %s ELSE delivery_status_at END,
        delivery_error_code = {_WHEN_BEFORE_SENT} THEN NULL ELSE delivery_error_code END,
        delivery_error_title = {_WHEN_BEFORE_SENT} THEN '' ELSE delivery_error_title END
    WHERE id = %s"""
# Whether a status callback of this wamid arrived before it was stored (kept unlinked): rare, so
# the ORM's fold (`_fold_early_statuses`) runs only then.
#   DeliveryStatusEvent.objects.filter(wa_message_id=wamid, message__isnull=True).exists()
EARLY_STATUS_SQL = f"""SELECT 1 FROM {DeliveryStatusEvent._meta.db_table}
    WHERE wa_message_id = %s AND message_id IS NULL LIMIT 1"""


def _turn_chain(message_id: int) -> list[int]:
    """The ids of the parts sent together with `message_id`, in sending order (`TURN_CHAIN_SQL`)."""
    with hot_cursor(connections[Message.objects.db]) as cursor:
        cursor.execute(TURN_CHAIN_SQL, [message_id])
        return [row[0] for row in cursor.fetchall()]


def _send_part(
    message_id: int, client: WhatsAppSender, *, last_attempt: bool, swept_later: bool
) -> SendOutcome:
    message = _claim(message_id)
    if isinstance(message, SendOutcome):
        return message
    session = message.session
    instance = session.instance
    log: dict[str, object] = {
        "message_id": message.pk,
        "session_id": session.pk,
        "attempt": message.send_attempts,
    }
    if not session.customer_phone and not session.customer_user_id:
        _store_failure(message, code=None, title=NO_RECIPIENT)
        logger.error("whatsapp_send_failed", extra={**log, "title": NO_RECIPIENT})
        send_counted(SendOutcome.FAILED)
        return SendOutcome.FAILED
    access_token = instance.access_token or settings.WHATSAPP_ACCESS_TOKEN
    client = sender_for(session, access_token=access_token, client=client)
    address = {
        "phone_number_id": instance.phone_number_id,
        "access_token": access_token,
        "to_phone": session.customer_phone,
        "to_user_id": session.customer_user_id,
        "callback_data": send_callback_data(message.pk),
    }
    try:
        if message.message_type == TEMPLATE_MESSAGE_TYPE:
            # A staff template (support.staff_actions): what to send is in `json_part`;
            # `content` is the text staff read in the transcript.
            template = template_of(message)
            sent = client.send_template(
                name=template.name,
                language=template.language,
                parameters=template.parameters,
                **address,
            )
        else:
            sent = client.send_text(body=message.content, **address)
    except GraphAPIError as exc:
        log |= {"code": exc.code, "title": exc.title, "http_status": exc.http_status}
        if exc.retryable and not last_attempt:
            _release_claim(message, code=exc.code, title=exc.title)
            logger.warning("whatsapp_send_retry", extra=log)
            send_counted("retry", exc.code)
            raise RetryableSendError(message_id=message.pk, error=exc) from exc
        window_open = message.created_at > timezone.now() - CUSTOMER_SERVICE_WINDOW
        if exc.retryable and swept_later and window_open:
            # Graph down for longer than this task's retries: the sweep tries again later, until
            # the customer-service window closes (then it marks the message failed).
            _release_claim(message, code=exc.code, title=exc.title)
            logger.error("whatsapp_send_deferred", extra=log)
            send_counted(SendOutcome.DEFERRED, exc.code)
            return SendOutcome.DEFERRED
        _store_failure(message, code=exc.code, title=exc.title)
        logger.error("whatsapp_send_failed", extra=log)
        send_counted(SendOutcome.FAILED, exc.code)
        return SendOutcome.FAILED
    _store_success(message, sent.wamid)
    if not session.is_simulated:  # a simulated conversation stays out of the figures
        send_counted(SendOutcome.SENT)
    if isinstance(client, DryRunSender):
        # Stored as sent with its ``sim.`` wamid; the id and why are logged (no personal data).
        reason = _dry_run_reason(simulated=session.is_simulated, access_token=access_token)
        logger.info(
            "whatsapp_send_simulated",
            extra={"message_id": message.pk, "reason": reason.value if reason else ""},
        )
        return SendOutcome.SENT
    logger.info("whatsapp_message_sent", extra={**log, "wamid": sent.wamid})
    return SendOutcome.SENT


# The send's claim, hand-written like its other statements: the ORM's compilation of the wide
# locked join and of the claim's UPDATE cost the send more CPU than running them
# (bench/worker_cpu.py). The ORM's, which tests/conversations/whatsapp/test_sending_sql.py checks
# them against:
#   Message.objects.select_for_update(of=("self",)).select_related("session__instance")
#       .get(pk=message_id)
#   message.save(update_fields=CLAIM_FIELDS)
CLAIM_SQL = f"""SELECT {select_columns(Message, "m")},
        {select_columns(Session, "s")},
        {select_columns(Instance, "i")}
    FROM {Message._meta.db_table} m
    JOIN {Session._meta.db_table} s ON s.id = m.session_id
    JOIN {Instance._meta.db_table} i ON i.id = s.instance_id
    WHERE m.id = %s"""
CLAIM_FIELDS = ("delivery_status", "delivery_status_at", "last_send_attempt_at", "send_attempts")
_CLAIM_UPDATE_FIELDS = [f for f in Message._meta.concrete_fields if f.name in CLAIM_FIELDS]
CLAIM_UPDATE_SQL = f"""UPDATE {Message._meta.db_table}
    SET {", ".join(f"{field.column} = %s" for field in _CLAIM_UPDATE_FIELDS)}
    WHERE id = %s"""
_MESSAGE_FIELDS = len(Message._meta.concrete_fields)
_SESSION_END = _MESSAGE_FIELDS + len(Session._meta.concrete_fields)


def _locked_message(connection: Any, message_id: int) -> Message:
    """Message `message_id`, its row locked (PostgreSQL), with its session and instance."""
    # Where the backend has no row locks (SQLite) the ORM drops the clause, as here.
    lock = " FOR UPDATE OF m" if connection.features.has_select_for_update_of else ""
    with hot_cursor(connection) as cursor:
        cursor.execute(CLAIM_SQL + lock, [message_id])
        row = cursor.fetchone()
    if row is None:
        raise Message.DoesNotExist(f"{Message._meta.object_name} matching query does not exist.")
    message = load_model(connection, Message, row[:_MESSAGE_FIELDS])
    session = load_model(connection, Session, row[_MESSAGE_FIELDS:_SESSION_END])
    _MESSAGE_SESSION.set_cached_value(message, session)
    _SESSION_INSTANCE.set_cached_value(
        session, load_model(connection, Instance, row[_SESSION_END:])
    )
    return message


_MESSAGE_SESSION = Message._meta.get_field("session")
_SESSION_INSTANCE = Session._meta.get_field("instance")


def _claim(message_id: int) -> Message | SendOutcome:
    now = timezone.now()
    connection = connections[Message.objects.db]
    with transaction.atomic(using=connection.alias):
        message = _locked_message(connection, message_id)
        if message.wa_message_id:
            return SendOutcome.ALREADY_SENT
        if message.delivery_status == DeliveryStatus.FAILED:
            return SendOutcome.FAILED
        if (
            message.delivery_status == DeliveryStatus.PENDING
            and message.send_attempts > 0
            and message.delivery_status_at is not None
            and message.delivery_status_at > now - timedelta(seconds=SEND_CLAIM_SECONDS)
        ):
            logger.info("whatsapp_send_in_flight", extra={"message_id": message_id})
            return SendOutcome.IN_FLIGHT
        message.delivery_status = DeliveryStatus.PENDING
        message.delivery_status_at = now
        message.last_send_attempt_at = now
        message.send_attempts += 1
        params = [
            field.get_db_prep_save(getattr(message, field.attname), connection)
            for field in _CLAIM_UPDATE_FIELDS
        ]
        with hot_cursor(connection) as cursor:
            cursor.execute(CLAIM_UPDATE_SQL, [*params, message.pk])
    return message


def _release_claim(message: Message, *, code: int | None, title: str) -> None:
    # Keep the last error visible in admin while the retry waits; the claim time goes, so the
    # retry (or another task) may claim at once.
    Message.objects.filter(pk=message.pk).update(
        delivery_status=DeliveryStatus.PENDING,
        delivery_status_at=None,
        delivery_error_code=code,
        delivery_error_title=title[:_TITLE_CHARS],
    )


def _store_failure(message: Message, *, code: int | None, title: str) -> None:
    Message.objects.filter(pk=message.pk).update(
        delivery_status=DeliveryStatus.FAILED,
        delivery_status_at=timezone.now(),
        delivery_error_code=code,
        delivery_error_title=title[:_TITLE_CHARS],
    )


def _store_success(message: Message, wamid: str) -> None:
    connection = connections[Message.objects.db]
    sent_at = _STATUS_AT.get_db_prep_value(timezone.now(), connection)
    with transaction.atomic(), hot_cursor(connection) as cursor:
        cursor.execute(STORE_SENT_SQL, [wamid, DeliveryStatus.SENT.value, sent_at, message.pk])
        cursor.execute(EARLY_STATUS_SQL, [wamid])
        if cursor.fetchone() is not None:
            _fold_early_statuses(message.pk, wamid)


_STATUS_AT = Message._meta.get_field("delivery_status_at")


def _fold_early_statuses(message_id: int, wamid: str) -> None:
    """Apply status callbacks that arrived before the wamid was stored (kept unlinked)."""
    early = list(
        DeliveryStatusEvent.objects.filter(wa_message_id=wamid, message__isnull=True).order_by(
            "wa_timestamp", "id"
        )
    )
    if not early:
        return
    DeliveryStatusEvent.objects.filter(pk__in=[event.pk for event in early]).update(
        message_id=message_id
    )
    for event in sorted(early, key=_status_rank):
        changes: dict[str, object] = {
            "delivery_status": event.status,
            "delivery_status_at": event.wa_timestamp or timezone.now(),
        }
        if event.status == DeliveryStatus.FAILED:
            changes |= {
                "delivery_error_code": event.error_code,
                "delivery_error_title": event.error_title,
            }
        Message.objects.filter(
            pk=message_id, delivery_status__in=statuses_before(event.status)
        ).update(**changes)


def _status_rank(event: DeliveryStatusEvent) -> int:
    return STATUS_ORDER.index(event.status) if event.status in STATUS_ORDER else 0


def _fail_unsent(message_ids: list[int]) -> None:
    if not message_ids:
        return
    Message.objects.filter(pk__in=message_ids, wa_message_id=None).filter(
        ~Q(delivery_status=DeliveryStatus.PENDING) | Q(delivery_status_at=None)
    ).update(
        delivery_status=DeliveryStatus.FAILED,
        delivery_status_at=timezone.now(),
        delivery_error_code=None,
        delivery_error_title=PREVIOUS_PART_FAILED,
    )
