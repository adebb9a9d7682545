"""Apply again the WhatsApp webhook deliveries whose processing failed.

    python manage.py reprocess_webhooks                # every failed delivery, oldest first
    python manage.py reprocess_webhooks --id 12 --id 15
    python manage.py reprocess_webhooks --limit 100

Safe to run at any time and more than once: messages and statuses are deduplicated by the
database, so what a delivery had already applied is not applied twice.
"""

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from conversations import publishers
from conversations.inbound.deliveries import webhook_delivery_reprocess
from conversations.models import WebhookDelivery, WebhookOutcome


class Command(BaseCommand):
    help = "Re-apply WhatsApp webhook deliveries marked failed (raw bodies are kept)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--id", dest="ids", type=int, action="append", help="only this delivery (repeatable)"
        )
        parser.add_argument("--limit", type=int, default=None, help="at most this many")

    def handle(self, *args: Any, ids: list[int] | None, limit: int | None, **options: Any) -> None:
        failed = WebhookDelivery.objects.filter(outcome=WebhookOutcome.FAILED)
        if ids:
            failed = failed.filter(pk__in=ids)
        delivery_ids = list(failed.order_by("received_at", "id").values_list("id", flat=True))
        if limit is not None:
            delivery_ids = delivery_ids[:limit]
        outcomes: dict[str, int] = {}
        for delivery_id in delivery_ids:
            receipt = webhook_delivery_reprocess(
                delivery_id=delivery_id,
                enqueue_turn=publishers.enqueue_turn,
                enqueue_send=publishers.enqueue_send,
            )
            outcome = receipt.outcome if receipt else "skipped"
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
            self.stdout.write(f"delivery {delivery_id}: {outcome}")
        summary = ", ".join(f"{count} {outcome}" for outcome, count in sorted(outcomes.items()))
        self.stdout.write(
            f"Reprocessed {len(delivery_ids)} deliveries" + (f": {summary}" if summary else ".")
        )
