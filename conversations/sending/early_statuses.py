"""Status callbacks that arrived before their message's wamid was stored (kept unlinked by the
webhook), applied once the send stores it."""

from django.utils import timezone

from conversations.models import DeliveryStatus, DeliveryStatusEvent, Message
from whatsapp.status_order import STATUS_ORDER, statuses_before


def early_statuses_fold(message_id: int, wamid: str) -> None:
    """Link the unlinked callbacks of `wamid` to the message and move its status forward with
    each, in `STATUS_ORDER` (one query when there is none)."""
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
