"""The claim state machine of one OUTBOUND message: claim it, then store what the Graph API
answered (the wamid and ``sent``, a failure for good) or release the claim for a retry.

A claim is ``delivery_status="pending"`` with a ``delivery_status_at`` younger than
`SEND_CLAIM_SECONDS` and ``send_attempts`` > 0: another worker is sending the message now.
"""

import logging
from datetime import timedelta

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from conversations.models import DeliveryStatus, Message
from conversations.sending.early_statuses import early_statuses_fold
from conversations.sending.outcomes import SendOutcome
from conversations.whatsapp.statuses import statuses_before

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


def claim_release(message: Message, *, code: int | None, title: str) -> None:
    """Give the claim up for a retry: the last error stays visible in admin while the retry
    waits; the claim time goes, so the retry (or another task) may claim at once."""
    Message.objects.filter(pk=message.pk).update(
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


def message_store_sent(message: Message, wamid: str) -> None:
    """Store the wamid, and ``sent`` unless a status callback already moved the message on
    (forward only: it may have named this message by its biz_opaque_callback_data); then fold in
    the callbacks of this wamid that arrived before it was stored."""
    with transaction.atomic():
        Message.objects.filter(pk=message.pk).update(wa_message_id=wamid)
        Message.objects.filter(
            pk=message.pk, delivery_status__in=statuses_before(DeliveryStatus.SENT)
        ).update(
            delivery_status=DeliveryStatus.SENT,
            delivery_status_at=timezone.now(),
            delivery_error_code=None,
            delivery_error_title="",
        )
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
