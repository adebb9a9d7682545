"""The download of a customer's media file, enqueued after the webhook's commit; the work is in
`conversations.media`."""

from typing import Any

from celery import shared_task
from django.utils import timezone

from conversations.media import media_download
from conversations.sending.worker import graph_client

# Meta's media URL lives about five minutes: the retries end within about four.
MEDIA_RETRY_COUNTDOWNS = (10, 30, 60, 120)


@shared_task(name="conversations.download_message_media", bind=True, max_retries=4)
def download_message_media(self: Any, media_pk: int) -> str:
    if self.request.is_eager:
        # Eager mode (tests, the embedded default): the attempts run in this process, at once.
        for attempt in range(len(MEDIA_RETRY_COUNTDOWNS) + 1):
            last = attempt == len(MEDIA_RETRY_COUNTDOWNS)
            outcome = media_download(
                media_pk, client=graph_client(), now=timezone.now(), last_attempt=last
            )
            if not outcome.retry:
                break
        return outcome.status
    attempt = self.request.retries
    last = attempt >= len(MEDIA_RETRY_COUNTDOWNS)
    outcome = media_download(media_pk, client=graph_client(), now=timezone.now(), last_attempt=last)
    if outcome.retry:
        raise self.retry(countdown=MEDIA_RETRY_COUNTDOWNS[attempt])
    return outcome.status


def enqueue_media_download(media_pk: int) -> None:
    """Enqueue the download of a pending media (after the webhook's commit)."""
    download_message_media.delay(media_pk)
