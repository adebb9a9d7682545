"""Sending a message together with the other parts of its turn, in order."""

import logging

from django.db import connections

from conversations.models import Message
from conversations.sending.claim import parts_fail_unsent
from conversations.sending.outcomes import SendOutcome
from conversations.sending.part import part_send
from whatsapp.client import WhatsAppSender

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


# Every send reads its turn's parts first: one literal statement, not the ORM's two queries
# (the origin's session and turn, then its parts), because with every worker statement the ORM's
# a turn cost 25.4-34.9 ms of worker CPU on the bench machine, over the 25 ms floor
# (bench/worker_cpu.py); this one costs 0.14 ms a call there, the ORM's two 0.9-1.1. A part is an
# OUTBOUND message, not superseded (`MessageQuerySet.not_superseded`), of the origin's session
# and turn; a message of no turn is its own only part.
TURN_PARTS_SQL = """SELECT part.id FROM conversations_message origin
    JOIN conversations_message part ON part.id = origin.id OR (
        part.session_id = origin.session_id AND part.turn_id = origin.turn_id
        AND part.direction = 'OUTBOUND' AND part.error <> 'superseded')
    WHERE origin.id = %s AND origin.direction = 'OUTBOUND' AND origin.error <> 'superseded'
    ORDER BY part.part_index, part.id"""


def turn_parts(message_id: int) -> list[int]:
    """The ids of the parts sent together with `message_id`, in sending order: itself (an
    OUTBOUND message, not superseded) and the other parts of its turn; none when it is no such
    message."""
    with connections[Message.objects.db].cursor() as cursor:
        cursor.execute(TURN_PARTS_SQL, [message_id])
        return [part_id for (part_id,) in cursor.fetchall()]
