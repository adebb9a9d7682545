"""Celery tasks that tell the outside about a conversation: the handoff alert and the CRM's lead.

Thin: each calls a use case of `support.alerts` or `support.crm`; the retry policy
is here, in the decorators. A `RetryableDeliveryError` (timeout, connection error, 5xx) is
retried with exponential backoff and jitter — 10 s, 20 s, 40 s ... capped at 10 min, at most
`DELIVERY_MAX_RETRIES` times (so 1 + 5 POSTs over about five minutes); the last attempt records
the failure instead of raising. A 4xx is never retried.

Each POST is over within `SIGNED_POST_TIMEOUT_SECONDS` (`support.signed_post`); the POST
tasks' soft time limit is that and `DELIVERY_TIME_MARGIN` more (the attempt's few queries, a
pooled connection's wait), so the deadline, not the soft limit, ends a slow POST and the attempt
is retried. Should the soft limit still fire during a POST (a resolver that hangs), the use case
takes it as a retryable failure too, so the last attempt still records the outcome.

Run eagerly with propagation (no broker: the embedded default), Celery's retry cannot run (its
`Retry` would raise out of the commit hook), so the POST is retried in-process
`EAGER_BACKOFF` seconds apart, as `conversations.sending.worker.send_message` does; and the
alert and the lead are handed to threads of the process (`support.delivery_threads`), so
the request whose commit produced them does not wait on the receiver.

- ``conversations.notify_handoff(session_id)``: enqueued after a handoff's commit
  (`enqueue_handoff_alert`); waits for the summary (`support.alerts.SUMMARY_WAIT`), e-mails
  the team and enqueues the webhook's POST.
- ``conversations.post_handoff_alert(session_id)``: the signed POST to `HANDOFF_WEBHOOK_URL`.
- ``conversations.deliver_lead(lead_id)``: the signed POST of a new lead to `CRM_WEBHOOK_URL`,
  enqueued after the commit of the turn that created it (`enqueue_lead_delivery`) or by the
  admin's "resend" action.
- ``conversations.notify_note_mentions(note_id)``: enqueued after the commit of an internal
  note that mentions colleagues (`enqueue_note_mentions`, `support.notes`); e-mails each of
  them once (`support.alerts.note_mentions_email_send`), not retried.
- ``conversations.retry_stale_leads()``: every minute (Celery beat), one last attempt for each
  lead ``pending`` with no delivery activity for `support.crm.LEAD_STALE_AFTER`, longer
  than the whole retry schedule (its chain was lost: a worker died, a publish failed).
"""

import math
import time
from collections.abc import Callable
from typing import Any

from celery import Task, shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from conversations.announcements import HandoffCommitted
from conversations.commit_hooks import on_commit_call
from prompts_admin.selectors import DatabasePromptSource
from support.alerts import (
    SUMMARY_POLL_SECONDS,
    alert_due,
    alert_suppressed,
    alerts_configured,
    handoff_alert_email_send,
    handoff_alert_webhook_post,
    note_mentions_email_send,
    summary_awaited,
)
from support.crm import lead_deliver, stale_leads_retry
from support.delivery_threads import delivery_threads
from support.signed_post import RetryableDeliveryError

DELIVERY_MAX_RETRIES = 5
# Beyond the POST's own deadline: the attempt's queries and a pooled connection's wait.
DELIVERY_TIME_MARGIN = 30
DELIVERY_SOFT_TIME_LIMIT = math.ceil(settings.SIGNED_POST_TIMEOUT_SECONDS) + DELIVERY_TIME_MARGIN
DELIVERY_TIME_LIMIT = DELIVERY_SOFT_TIME_LIMIT + 15
# What ends an attempt that overran: taken as a retryable failure of its POST.
_OUT_OF_TIME = (SoftTimeLimitExceeded,)
# Eager mode only: the waits between the in-process attempts (so 1 + len() attempts).
EAGER_BACKOFF: tuple[float, ...] = (0.5, 1.0)
# The summary wait's polls (SUMMARY_WAIT bounds it in time; this bounds it in count too).
SUMMARY_MAX_POLLS = 12


def _eager_in_process(task: Task[..., Any]) -> bool:
    return bool(task.request.is_eager and task.app.conf.task_eager_propagates)


def _attempts_in_process(attempt: Callable[[int, bool], str]) -> str:
    """Call ``attempt(number, last)`` until it does not raise `RetryableDeliveryError`."""
    for number, wait in enumerate(EAGER_BACKOFF, start=1):
        try:
            return attempt(number, False)
        except RetryableDeliveryError:
            time.sleep(wait)
    return attempt(len(EAGER_BACKOFF) + 1, True)


def handoff_alert_register(handoff: HandoffCommitted) -> None:
    """Subscribed to `handoff_committed` (`support.apps`): a handoff whose reason alerts the
    team, when an alert is configured, gets its alert after the commit."""
    if alert_due(handoff.reason) and alerts_configured():
        on_commit_call(enqueue_handoff_alert, handoff.session_id)


def lead_delivery_register(lead_id: int) -> None:
    """Subscribed to `lead_created` (`support.apps`): the lead's delivery after the commit."""
    on_commit_call(enqueue_lead_delivery, lead_id)


def enqueue_handoff_alert(session_id: int) -> None:
    _start(notify_handoff, session_id)


def enqueue_lead_delivery(lead_id: int) -> None:
    _start(deliver_lead, lead_id)


def enqueue_note_mentions(note_id: int) -> None:
    _start(notify_note_mentions, note_id)


def enqueue_lead_last_attempt(lead_id: int) -> None:
    """The stale-leads sweep's: one attempt, the chain's last (it records the failure)."""
    # `retries` is the message's retry count, as Celery's own retries set it (`Task.retry`);
    # celery-types declares only the common options of `apply_async`.
    deliver_lead.apply_async((lead_id,), retries=DELIVERY_MAX_RETRIES)  # type: ignore[call-arg]


def _start(task: Task[[int], Any], object_id: int) -> None:
    """``task.delay(object_id)``; without a broker, on a thread of this process
    (`support.delivery_threads`), not in the request whose commit called it. Inline when
    the caller holds a transaction open, whose rows a thread could not read: after-commit hooks
    run outside any, so only a test wrapped in its transaction takes that path."""
    if task.app.conf.task_always_eager and not transaction.get_connection().in_atomic_block:
        delivery_threads().submit(task, object_id)
    else:
        task.delay(object_id)


@shared_task(name="conversations.notify_handoff", bind=True, max_retries=SUMMARY_MAX_POLLS)
def notify_handoff(self: Task[[int], str], session_id: int) -> str:
    """Alert the team of a handoff: e-mail now (after the summary's brief wait), webhook next."""
    if alert_suppressed(session_id):
        return "skipped"
    waiting = not _eager_in_process(self) and self.request.retries < SUMMARY_MAX_POLLS
    if waiting and summary_awaited(session_id=session_id, now=timezone.now()):
        raise self.retry(countdown=SUMMARY_POLL_SECONDS)
    outcome = handoff_alert_email_send(
        session_id=session_id, runtime=DatabasePromptSource().runtime()
    )
    if settings.HANDOFF_WEBHOOK_URL:
        if self.request.is_eager:
            # Right here, as `support.delivery_threads` runs this task: an eager `delay`
            # would set Celery's process-wide join flag from a thread other than the request's.
            post_handoff_alert.apply((session_id,))
        else:
            post_handoff_alert.delay(session_id)
    return outcome


@shared_task(
    name="conversations.post_handoff_alert",
    bind=True,
    autoretry_for=(RetryableDeliveryError,),
    retry_backoff=10,
    retry_backoff_max=600,
    retry_jitter=True,
    max_retries=DELIVERY_MAX_RETRIES,
    soft_time_limit=DELIVERY_SOFT_TIME_LIMIT,
    time_limit=DELIVERY_TIME_LIMIT,
)
def post_handoff_alert(self: Task[[int], str], session_id: int) -> str:
    """POST the signed handoff alert; returns ``sent``, ``failed`` or ``skipped``."""
    runtime = DatabasePromptSource().runtime()

    def attempt(number: int, last: bool) -> str:
        return handoff_alert_webhook_post(
            session_id=session_id,
            runtime=runtime,
            attempt=number,
            last_attempt=last,
            deadline_errors=_OUT_OF_TIME,
        )

    if _eager_in_process(self):
        return _attempts_in_process(attempt)
    return attempt(self.request.retries + 1, self.request.retries >= DELIVERY_MAX_RETRIES)


@shared_task(
    name="conversations.deliver_lead",
    bind=True,
    autoretry_for=(RetryableDeliveryError,),
    retry_backoff=10,
    retry_backoff_max=600,
    retry_jitter=True,
    max_retries=DELIVERY_MAX_RETRIES,
    soft_time_limit=DELIVERY_SOFT_TIME_LIMIT,
    time_limit=DELIVERY_TIME_LIMIT,
)
def deliver_lead(self: Task[[int], str], lead_id: int) -> str:
    """POST the signed lead to the CRM; returns its status after the attempt."""

    def attempt(_number: int, last: bool) -> str:
        return lead_deliver(lead_id=lead_id, last_attempt=last, deadline_errors=_OUT_OF_TIME)

    if _eager_in_process(self):
        return _attempts_in_process(attempt)
    return attempt(self.request.retries + 1, self.request.retries >= DELIVERY_MAX_RETRIES)


@shared_task(name="conversations.notify_note_mentions")
def notify_note_mentions(note_id: int) -> int:
    """E-mail the colleagues an internal note mentions; how many were e-mailed."""
    return note_mentions_email_send(note_id=note_id, now=timezone.now())


@shared_task(name="conversations.retry_stale_leads")
def retry_stale_leads() -> int:
    """Beat: one last attempt for each lead whose delivery chain was lost; how many."""
    return len(stale_leads_retry(now=timezone.now(), enqueue=enqueue_lead_last_attempt))
