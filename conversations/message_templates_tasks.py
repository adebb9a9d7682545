"""The daily sync of the approved WhatsApp message templates (beat: `sync-message-templates`);
the work is in `conversations.message_templates`."""

from celery import shared_task
from django.utils import timezone

from conversations.message_templates import message_templates_sync


@shared_task(name="conversations.sync_message_templates")
def sync_message_templates() -> dict[str, int]:
    report = message_templates_sync(now=timezone.now())
    return {
        "created": report.created,
        "updated": report.updated,
        "deactivated": report.deactivated,
        "unsupported": report.unsupported,
        "failed_accounts": len(report.failed),
        "skipped_instances": len(report.skipped),
    }
