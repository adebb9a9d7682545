"""Celery tasks of the WhatsApp channel: thin; the logic lives in `conversations.sending`.

The retry policy is here, in the decorator: a `RetryableSendError` (timeout, 5xx, 130429,
131056) is retried with exponential backoff and jitter — 5 s, 10 s, 20 s ... capped at 5 min, at
most `SEND_MAX_RETRIES` times; after the last attempt a transient failure leaves the message
unsent for the sweep while WhatsApp's 24-hour window is open, and a permanent one stores the error.

Run eagerly with propagation (no broker: the embedded default, `CELERY_TASK_ALWAYS_EAGER` and
`CELERY_TASK_EAGER_PROPAGATES`), Celery's retry cannot run: its `Retry` raises out of the caller
(the turn's commit hook), the retry never happens, and no beat exists to sweep the reply later.
So such a send retries in-process instead, `EAGER_SEND_BACKOFF` seconds apart (a couple of
seconds in all: it runs inside the webhook's request there), and its last attempt stores the
error on the message (failed), since no sweep would try it again. (Without propagation Celery
runs an eager retry itself, at once; the tests use that to exercise the worker's policy.)

``conversations.requeue_unsent_messages`` (beat, every minute) re-enqueues `send_message` for
OUTBOUND messages whose send was never published, and fails those past the 24-hour window
(`conversations.sweeps.unsent_messages_requeue`).
"""

import functools
import time

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
# Eager mode only: the waits between the in-process attempts (so 1 + len() attempts).
EAGER_SEND_BACKOFF: tuple[float, ...] = (0.5, 1.0)


def graph_client() -> GraphClient:
    """This process's Graph API client: one keep-alive connection pool reused by every send and
    mark-read task (httpx's client is thread-safe), instead of a TLS handshake per task."""
    return _graph_client_for(settings.WHATSAPP_API_BASE_URL)


@functools.lru_cache(maxsize=4)
def _graph_client_for(base_url: str) -> GraphClient:
    # Keyed by the URL so a changed setting (a test's fake server) gets a client of its own;
    # built lazily, so each forked worker process makes its own after the fork.
    return GraphClient(base_url=base_url)


@shared_task(
    name="conversations.send_message",
    bind=True,
    autoretry_for=(RetryableSendError,),
    retry_backoff=5,
    retry_backoff_max=300,
    retry_jitter=True,
    max_retries=SEND_MAX_RETRIES,
)
def send_message(self: Task[[int], str], message_id: int) -> str:
    """Send OUTBOUND message `message_id` (and the other parts of its turn, in order)."""
    if self.request.is_eager and self.app.conf.task_eager_propagates:
        return _send_in_process(message_id)
    last_attempt = self.request.retries >= SEND_MAX_RETRIES
    outcome = outbound_message_send(
        message_id=message_id, client=graph_client(), last_attempt=last_attempt
    )
    return outcome.value


def _send_in_process(message_id: int) -> str:
    """The eager send: bounded retries with a short backoff, never Celery's `Retry`."""
    client = graph_client()
    for wait in EAGER_SEND_BACKOFF:
        try:
            return outbound_message_send(message_id=message_id, client=client).value
        except RetryableSendError:
            time.sleep(wait)
    # No beat runs without a broker, so nothing would retry a deferred message: fail it.
    return outbound_message_send(
        message_id=message_id, client=client, last_attempt=True, swept_later=False
    ).value


@shared_task(name="conversations.mark_read")
def mark_read(message_id: int) -> bool:
    """Mark INBOUND message `message_id` read with a typing indicator; never fails the caller."""
    return inbound_message_mark_read(message_id=message_id, client=graph_client())


@shared_task(name="conversations.requeue_unsent_messages")
def requeue_unsent_messages() -> int:
    """Re-enqueue the sending of OUTBOUND messages left unsent; returns how many."""
    return len(unsent_messages_requeue(now=timezone.now(), enqueue=send_message.delay).requeued)
