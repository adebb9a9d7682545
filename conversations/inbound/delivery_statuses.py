"""Apply a delivery's statuses to the OUTBOUND messages they name.

Statuses update the OUTBOUND message with that wamid, forward only (`statuses_before`); a
``failed`` stores Meta's code and title. A status for a wamid we do not know (yet) is stored
unlinked and logged; the sender links it when it stores that wamid. A ``(wamid, status)`` is
stored once (``DeliveryStatusEvent`` is unique on it): a repeated status changes nothing.
"""

import logging
from datetime import datetime
from typing import Any

from compat.django_private import insert_unless_conflict
from conversations.models import DeliveryStatusEvent, Direction, Message
from whatsapp.payload import StatusUpdate
from whatsapp.status_order import (
    FAILED,
    KNOWN_STATUSES,
    message_id_from_callback,
    statuses_before,
)

# The package's name, not the module's: every inbound module logs under one logger name.
logger = logging.getLogger("conversations.inbound")

_TITLE_CHARS = 255


def statuses_apply(statuses: list[StatusUpdate], *, now: datetime) -> int:
    """Apply statuses of our instances' messages, oldest first; how many were new."""
    if not statuses:
        return 0
    rows = Message.objects.filter(
        wa_message_id__in={s.wamid for s in statuses}, direction=Direction.OUTBOUND
    ).values_list("wa_message_id", "id")
    outbound = {wamid: message_id for wamid, message_id in rows if wamid is not None}
    outbound |= _link_sent_by_callback(
        [s for s in statuses if s.wamid not in outbound and s.callback_data]
    )
    applied = 0
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
        applied += _status_apply(status, outbound.get(status.wamid), now)
    return applied


def _status_apply(status: StatusUpdate, message_id: int | None, now: datetime) -> int:
    error = status.errors[0] if status.errors else None
    code = error.code if error else None
    title = error.title[:_TITLE_CHARS] if error else ""
    event = DeliveryStatusEvent(
        wa_message_id=status.wamid,
        status=status.status,
        message_id=message_id,
        wa_timestamp=status.timestamp,
        error_code=code,
        error_title=title,
        error_details=error.details if error else "",
        created_at=now,
    )
    if not insert_unless_conflict(event):
        return 0  # this (wamid, status) was applied already
    log = {"wamid": status.wamid, "status": status.status, "message_id": message_id}
    if message_id is None:
        logger.info("whatsapp_status_unknown_message", extra=log)
        return 1
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
    return 1


def _link_sent_by_callback(statuses: list[StatusUpdate]) -> dict[str, int]:
    """wamid -> message id for statuses of messages whose send was accepted but whose wamid we
    never stored (the worker died in between): the status names the message through the
    ``biz_opaque_callback_data`` our send put on it. The wamid is stored on the message, so a
    retry of its send finds it sent instead of sending it twice.

    Only a message that could have been that send is linked: OUTBOUND, of the instance the
    status came to, with a send attempt claimed (``send_attempts``) and no wamid yet. Any other
    (another instance's number, a reply never sent) keeps its state and stays unsent; the
    status is stored unlinked."""
    by_message = {
        message_id: status
        for status in statuses
        if (message_id := message_id_from_callback(status.callback_data)) is not None
    }
    linked: dict[str, int] = {}
    for message_id, status in by_message.items():
        updated = Message.objects.filter(
            pk=message_id,
            direction=Direction.OUTBOUND,
            wa_message_id=None,
            send_attempts__gt=0,
            session__instance__phone_number_id=status.phone_number_id,
        ).update(wa_message_id=status.wamid)
        if updated:
            linked[status.wamid] = message_id
            logger.warning(
                "whatsapp_send_linked_by_status",
                extra={"message_id": message_id, "wamid": status.wamid},
            )
    return linked
