"""The download of a customer's media file, enqueued after the webhook's commit, and the bot's
reading of it right after (`conversations.media_reading`); the work is in `conversations.media`
and `conversations.media_reading`."""

from typing import Any

from celery import shared_task
from django.db import transaction
from django.utils import timezone

from conversations.agent_sources import DatabaseCallRecorder
from conversations.media import DownloadOutcome, media_download
from conversations.media_reading import media_read
from conversations.provider_circuit import process_media_reader
from conversations.sending.worker import graph_client
from conversations.turns.tasks import process_session

# Meta's media URL lives about five minutes: the retries end within about four.
MEDIA_RETRY_COUNTDOWNS = (10, 30, 60, 120)


@shared_task(name="conversations.download_message_media", bind=True, max_retries=4)
def download_message_media(self: Any, media_pk: int) -> str:
    if self.request.is_eager:
        # Eager mode (tests, the embedded default): the attempts run in this process, at once.
        for attempt in range(len(MEDIA_RETRY_COUNTDOWNS) + 1):
            last = attempt == len(MEDIA_RETRY_COUNTDOWNS)
            outcome = _attempt(media_pk, last=last)
            if not outcome.retry:
                break
        return _read(media_pk, outcome)
    attempt = self.request.retries
    outcome = _attempt(media_pk, last=attempt >= len(MEDIA_RETRY_COUNTDOWNS))
    if outcome.retry:
        raise self.retry(countdown=MEDIA_RETRY_COUNTDOWNS[attempt])
    return _read(media_pk, outcome)


def _attempt(media_pk: int, *, last: bool) -> DownloadOutcome:
    return media_download(media_pk, client=graph_client(), now=timezone.now(), last_attempt=last)


def _read(media_pk: int, downloaded: DownloadOutcome) -> str:
    """The bot's reading once the download ended (a failed download fails a pending reading);
    the message's turn, which waited for it, is enqueued."""
    reading = media_read(media_pk, reader=process_media_reader(), recorder=DatabaseCallRecorder())
    if reading.message_pending:
        # The task itself, not `publishers.enqueue_turn`: the webhook's modules import this one,
        # and the publishers import the inbound tasks (an import cycle); a reading's end is rare
        # enough not to need the publishers' cheaper publish.
        transaction.on_commit(lambda: process_session.delay(reading.session_id), robust=True)
    return downloaded.status


def enqueue_media_download(media_pk: int) -> None:
    """Enqueue the download of a pending media (after the webhook's commit)."""
    download_message_media.delay(media_pk)
