"""The daily LGPD task (beat: `apply-retention`); the work is in
`conversations.privacy.retention`."""

from celery import shared_task
from django.utils import timezone

from conversations.privacy.retention import closed_sessions_anonymise, webhook_bodies_delete


@shared_task(name="conversations.apply_retention")
def apply_retention() -> dict[str, int]:
    now = timezone.now()
    return {
        "sessions_anonymised": closed_sessions_anonymise(now=now),
        "webhook_bodies_deleted": webhook_bodies_delete(now=now),
    }
