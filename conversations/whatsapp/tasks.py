"""Celery tasks of the WhatsApp channel: thin; the logic lives in `conversations.sending`.

The retry policy is here, in the decorator: a `RetryableSendError` (timeout, 5xx, 130429,
131056) is retried with exponential backoff and jitter — 5 s, 10 s, 20 s ... capped at 5 min, at
most `SEND_MAX_RETRIES` times; the last attempt stores the error on the message instead of raising.

``conversations.requeue_unsent_messages`` (beat, every minute) re-enqueues `send_message` for
OUTBOUND messages whose send was never published, and fails those past the 24-hour window
(`conversations.sweeps.unsent_messages_requeue`).
"""

from celery import Task, shared_task
from django.conf import settings
from django.utils import timezone

from conversations.sending import (
    RetryableSendError,
    inbound_message_mark_read,
    outbound_message_send,
)
from conversations.sweeps import unsent_messages_requeue
from conversations.whatsapp.client import GraphClient

SEND_MAX_RETRIES = 6


def graph_client() -> GraphClient:
    return GraphClient(base_url=settings.WHATSAPP_API_BASE_URL)


@shared_task(
    name="conversations.send_message",
    bind=True,
    autoretry_for=(RetryableSendError,),
    retry_backoff=5,
    retry_backoff_max=300,
    retry_jitter=True,
    max_retries=SEND_MAX_RETRIES,
)
def send_message(self: Task, message_id: int) -> str:
    """Send OUTBOUND message `message_id` (and the other parts of its turn, in order)."""
    last_attempt = self.request.retries >= SEND_MAX_RETRIES
    with graph_client() as client:
        outcome = outbound_message_send(
            message_id=message_id, client=client, last_attempt=last_attempt
        )
    return outcome.value


@shared_task(name="conversations.mark_read")
def mark_read(message_id: int) -> bool:
    """Mark INBOUND message `message_id` read with a typing indicator; never fails the caller."""
    with graph_client() as client:
        return inbound_message_mark_read(message_id=message_id, client=client)


@shared_task(name="conversations.requeue_unsent_messages")
def requeue_unsent_messages() -> int:
    """Re-enqueue the sending of OUTBOUND messages left unsent; returns how many."""
    return len(unsent_messages_requeue(now=timezone.now(), enqueue=send_message.delay).requeued)
