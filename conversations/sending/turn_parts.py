"""Sending a message together with the other parts of its turn, in order."""

import logging

from conversations.models import Direction, Message
from conversations.sending.claim import parts_fail_unsent
from conversations.sending.outcomes import SendOutcome
from conversations.sending.part import part_send
from conversations.whatsapp.client import WhatsAppSender

logger = logging.getLogger(__name__)


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
    chain = turn_parts(message_id)
    if message_id not in chain:
        logger.warning("whatsapp_send_skipped", extra={"message_id": message_id})
        return SendOutcome.SKIPPED
    outcomes: dict[int, SendOutcome] = {}
    for position, part_id in enumerate(chain):
        outcome = part_send(part_id, client, last_attempt=last_attempt, swept_later=swept_later)
        outcomes[part_id] = outcome
        if outcome is SendOutcome.FAILED:
            parts_fail_unsent(chain[position + 1 :])
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


def turn_parts(message_id: int) -> list[int]:
    """The ids of the parts sent together with `message_id`, in sending order: itself (an
    OUTBOUND message, not superseded) and the other parts of its turn; none when it is no such
    message."""
    origin = (
        Message.objects.filter(pk=message_id, direction=Direction.OUTBOUND)
        .not_superseded()
        .values_list("session_id", "turn_id")
        .first()
    )
    if origin is None:
        return []
    session_id, turn_id = origin
    if turn_id is None:
        return [message_id]
    return list(
        Message.objects.filter(session_id=session_id, turn_id=turn_id, direction=Direction.OUTBOUND)
        .not_superseded()
        .order_by("part_index", "id")
        .values_list("id", flat=True)
    )
