"""Celery tasks of the webhook's inbound side: thin — each wires its collaborators and calls one
use case.

- ``conversations.apply_webhook_delivery(delivery_id)``: `webhook_delivery_apply`, enqueued
  after the commit of a delivery too big to apply within the request (`WEBHOOK_INLINE_MAX_*`).
  Idempotent: the delivery row is locked and applied only while its outcome is ``received``.
- ``conversations.requeue_received_deliveries()``: every minute (Celery beat),
  `received_deliveries_requeue` — a stored delivery whose task was never published (broker
  down) or died with its worker is enqueued again, so nothing Meta sent is lost.
"""

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from conversations import publishers
from conversations.inbound.deliveries import webhook_delivery_apply
from conversations.sweeps import RECEIVED_GRACE, received_deliveries_requeue


@shared_task(
    name="conversations.apply_webhook_delivery",
    soft_time_limit=settings.CELERY_TASK_SOFT_TIME_LIMIT,
    time_limit=settings.CELERY_TASK_TIME_LIMIT,
)
def apply_webhook_delivery(delivery_id: int) -> str:
    """Apply a stored delivery; returns its outcome, or ``skipped`` when it was applied already."""
    receipt = webhook_delivery_apply(
        delivery_id=delivery_id,
        enqueue_turn=publishers.enqueue_turn,
        enqueue_send=publishers.enqueue_send,
    )
    return receipt.outcome if receipt else "skipped"


def enqueue_delivery(delivery_id: int) -> None:
    """Enqueue the application of a delivery too big to apply within the request."""
    publishers.publish(apply_webhook_delivery, delivery_id)


@shared_task(name="conversations.requeue_received_deliveries")
def requeue_received_deliveries() -> int:
    """Re-enqueue `apply_webhook_delivery` for deliveries left ``received`` (see the module)."""
    requeued = received_deliveries_requeue(
        now=timezone.now(), grace=RECEIVED_GRACE, enqueue=apply_webhook_delivery.delay
    )
    return len(requeued)
