"""The claim state machine of one OUTBOUND message: claim it, then store what the Graph API
answered (the wamid and ``sent``, a failure for good) or release the claim for a retry.

A claim is ``delivery_status="pending"`` with a ``delivery_status_at`` younger than
`SEND_CLAIM_SECONDS` and ``send_attempts`` > 0: another worker is sending the message now.
"""

import logging
from datetime import timedelta

from django.db import connections, transaction
from django.db.models import Q
from django.utils import timezone

from conversations.models import DeliveryStatus, Message
from conversations.sending.early_statuses import early_statuses_fold
from conversations.sending.outcomes import SendOutcome
from whatsapp.status_order import statuses_before

logger = logging.getLogger(__name__)

# Longer than the client's whole request (connect 5 s + read 10 s), so a live claim never expires.
SEND_CLAIM_SECONDS = 60
CLAIM_FIELDS = ("delivery_status", "delivery_status_at", "last_send_attempt_at", "send_attempts")
PREVIOUS_PART_FAILED = "Parte anterior da resposta não foi enviada"
_TITLE_CHARS = 255


def message_claim(message_id: int) -> Message | SendOutcome:
    """Claim OUTBOUND message `message_id` for this worker, in a short transaction of its own
    (the row locked while it is decided); the message with its session and instance loaded, or
    why it is not to be sent now. `Message.DoesNotExist` when there is no such message."""
    now = timezone.now()
    with transaction.atomic():
        message = (
            Message.objects.select_for_update(of=("self",))
            .select_related("session__instance")
            .get(pk=message_id)
        )
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
        message.save(update_fields=CLAIM_FIELDS)
    return message


def claim_refresh(message: Message) -> None:
    """Renew this worker's claim after a long step of the send (a file's upload), so the claim
    stays live for the message request that follows."""
    Message.objects.filter(pk=message.pk, delivery_status=DeliveryStatus.PENDING).update(
        delivery_status_at=timezone.now()
    )


def claim_release(message: Message, *, code: int | None, title: str) -> None:
    """Give the claim up for a retry: the last error stays visible in admin while the retry
    waits; the claim time goes, so the retry (or another task) may claim at once. Only a claim
    that still stands is released: the sweep may have marked the message failed meanwhile (its
    24-hour window closed while this worker was sending), and that stays."""
    Message.objects.filter(pk=message.pk, delivery_status=DeliveryStatus.PENDING).update(
        delivery_status=DeliveryStatus.PENDING,
        delivery_status_at=None,
        delivery_error_code=code,
        delivery_error_title=title[:_TITLE_CHARS],
    )


def message_fail(message: Message, *, code: int | None, title: str) -> None:
    """Refused for good: Meta's error code and title (or ours) stored on the message."""
    Message.objects.filter(pk=message.pk).update(
        delivery_status=DeliveryStatus.FAILED,
        delivery_status_at=timezone.now(),
        delivery_error_code=code,
        delivery_error_title=title[:_TITLE_CHARS],
    )


# Every send stores its wamid: literal SQL, one UPDATE for the ORM's two (the wamid; ``sent``
# where the status is one of `statuses_before(SENT)`) and the early-status check, because with
# every worker statement the ORM's a turn cost 25.4-34.9 ms of worker CPU on the bench machine,
# over the 25 ms floor (bench/worker_cpu.py).
_BEFORE_SENT = statuses_before(DeliveryStatus.SENT)
_WHEN_BEFORE_SENT = f"CASE WHEN delivery_status IN ({', '.join(['%s'] * len(_BEFORE_SENT))})"
STORE_SENT_SQL = f"""UPDATE conversations_message SET wa_message_id = %s,
        delivery_status = {_WHEN_BEFORE_SENT} THEN %s ELSE delivery_status END,
        delivery_status_at = {_WHEN_BEFORE_SENT} THEN %s ELSE delivery_status_at END,
        delivery_error_code = {_WHEN_BEFORE_SENT} THEN NULL ELSE delivery_error_code END,
        delivery_error_title = {_WHEN_BEFORE_SENT} THEN '' ELSE delivery_error_title END
    WHERE id = %s"""
EARLY_STATUS_SQL = """SELECT 1 FROM conversations_deliverystatusevent
    WHERE wa_message_id = %s AND message_id IS NULL LIMIT 1"""
_STATUS_AT = Message._meta.get_field("delivery_status_at")


def message_store_sent(message: Message, wamid: str) -> None:
    """Store the wamid, and ``sent`` unless a status callback already moved the message on
    (forward only: it may have named this message by its biz_opaque_callback_data); then fold in
    the callbacks of this wamid that arrived before it was stored (rare: only then the ORM's)."""
    connection = connections[Message.objects.db]
    sent_at = _STATUS_AT.get_db_prep_value(timezone.now(), connection)
    with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
        cursor.execute(
            STORE_SENT_SQL,
            [
                wamid,
                *_BEFORE_SENT,
                DeliveryStatus.SENT.value,
                *_BEFORE_SENT,
                sent_at,
                *_BEFORE_SENT,
                *_BEFORE_SENT,
                message.pk,
            ],
        )
        cursor.execute(EARLY_STATUS_SQL, [wamid])
        if cursor.fetchone() is not None:
            early_statuses_fold(message.pk, wamid)


def parts_fail_unsent(message_ids: list[int]) -> None:
    """Fail the parts after one refused for good, unless sent or claimed by another worker."""
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
