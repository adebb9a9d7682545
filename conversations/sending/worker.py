"""Celery tasks of the WhatsApp channel: thin; the logic lives in `conversations.sending`.
Beside them, the process's Graph API client (`graph_client`) and its background read receipts
(`read_receipts`), which are not tasks: a receipt is one best-effort request, sent from the
worker process itself (`conversations.sending.background_receipts`).

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

A turn's reply does not go through this task first: the worker thread that committed the turn
sends it at once (`reply_send`), so no publish, broker round trip and task stand between the
model's answer and the customer, and the `sends` queue never holds a reply behind other work.
Only what may succeed later is handed to `send_message`, whose first retry comes after the same
backoff as above; a worker that dies before or during that first attempt leaves the reply to the
unsent-messages sweep, as a failed publish would.

``conversations.requeue_unsent_messages`` (beat, every minute) re-enqueues `send_message` for
OUTBOUND messages whose send was never published, and fails those past the 24-hour window
(`conversations.sweeps.unsent_messages_requeue`).
"""

import functools
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from celery import Task, shared_task
from celery.signals import worker_process_shutdown, worker_shutdown
from celery.utils.time import get_exponential_backoff_interval
from django.conf import settings
from django.utils import timezone

from conversations.sending import (
    ReadReceipt,
    RetryableSendError,
    outbound_message_send,
    read_receipt_send,
)
from conversations.sending.background_receipts import BackgroundReadReceipts
from conversations.sweeps import unsent_messages_requeue
from whatsapp.client import GraphClient, WhatsAppSender

logger = logging.getLogger(__name__)

SEND_MAX_RETRIES = 6
# send_message's backoff (its decorator's retry_backoff and retry_backoff_max), seconds.
SEND_BACKOFF_FACTOR, SEND_BACKOFF_MAX = 5, 300
# Eager mode only: the waits between the in-process attempts (so 1 + len() attempts).
EAGER_SEND_BACKOFF: tuple[float, ...] = (0.5, 1.0)


def graph_client() -> GraphClient:
    """This process's Graph API client: one keep-alive connection pool reused by every send and
    read receipt (httpx's client is thread-safe), instead of a TLS handshake per task."""
    # Under a lock: a threads worker's first burst would otherwise build one client per
    # thread (`lru_cache` does not hold back concurrent misses), each with its TLS context.
    with _graph_client_lock:
        return _graph_client_for(settings.WHATSAPP_API_BASE_URL)


_graph_client_lock = threading.Lock()


@functools.lru_cache(maxsize=4)
def _graph_client_for(base_url: str) -> GraphClient:
    # Keyed by the URL so a changed setting (a test's fake server) gets a client of its own;
    # built lazily, so each forked worker process makes its own after the fork.
    return GraphClient(base_url=base_url)


# A receipt is one short request; a few threads keep up with a worker's turns (100 turns/s need
# about one thread at a 30 ms Graph API), and the backlog bound caps the memory when it is down.
READ_RECEIPT_THREADS = 4
READ_RECEIPT_MAX_PENDING = 1000
_read_receipts: BackgroundReadReceipts | None = None
_read_receipts_lock = threading.Lock()


def read_receipts() -> BackgroundReadReceipts:
    """This process's background read receipts (`conversations.sending.background_receipts`), built
    on first use, and again in a forked child (its parent's threads did not survive the fork)."""
    global _read_receipts
    with _read_receipts_lock:
        if _read_receipts is None or _read_receipts.pid != os.getpid():
            _read_receipts = BackgroundReadReceipts(
                send=_read_receipt_send,
                max_workers=READ_RECEIPT_THREADS,
                max_pending=READ_RECEIPT_MAX_PENDING,
            )
        return _read_receipts


def read_receipt_submit(receipt: ReadReceipt) -> None:
    """Mark a message read in the background of this process (`read_receipts`); run eagerly (no
    broker: the embedded default and the tests), inline, as the eager tasks are, so the Graph
    API sees the receipt before the turn's reply, in the order a worker almost always sends
    them."""
    if settings.CELERY_TASK_ALWAYS_EAGER:
        _read_receipt_send(receipt)
    else:
        read_receipts().submit(receipt)


def _read_receipt_send(receipt: ReadReceipt) -> bool:
    return read_receipt_send(receipt, client=graph_client())


@worker_shutdown.connect
@worker_process_shutdown.connect
def _close_read_receipts(**_kwargs: Any) -> None:
    # A stopping worker does not wait on receipts not yet sent (best effort, see the module).
    if _read_receipts is not None and _read_receipts.pid == os.getpid():
        _read_receipts.close()


@shared_task(
    name="conversations.send_message",
    bind=True,
    autoretry_for=(RetryableSendError,),
    retry_backoff=SEND_BACKOFF_FACTOR,
    retry_backoff_max=SEND_BACKOFF_MAX,
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


def _send_later(message_id: int) -> None:
    # The countdown of send_message's own first retry (full jitter, as its decorator's).
    countdown = get_exponential_backoff_interval(
        factor=SEND_BACKOFF_FACTOR, retries=0, maximum=SEND_BACKOFF_MAX, full_jitter=True
    )
    send_message.apply_async((message_id,), countdown=countdown)


def reply_send(
    message_id: int,
    *,
    client: WhatsAppSender | None = None,
    send_later: Callable[[int], None] = _send_later,
) -> None:
    """Send a turn's OUTBOUND `message_id` (and its turn's other parts) from this worker thread,
    at once; `send_later` hands what may succeed later to `send_message` (a `RetryableSendError`,
    or any other error: the task's policy then decides, as if it had been the first attempt)."""
    try:
        outbound_message_send(message_id=message_id, client=client or graph_client())
    except RetryableSendError:
        send_later(message_id)  # outbound_message_send logged the retry
    except Exception as exc:
        logger.exception(
            "whatsapp_send_handed_to_task", extra={"message_id": message_id, "error": repr(exc)}
        )
        send_later(message_id)


@shared_task(name="conversations.requeue_unsent_messages")
def requeue_unsent_messages() -> int:
    """Re-enqueue the sending of OUTBOUND messages left unsent; returns how many."""
    return len(unsent_messages_requeue(now=timezone.now(), enqueue=send_message.delay).requeued)
