"""Downloading a customer's media file (conversations.MessageMedia) from the Graph API into the
default storage, after the webhook's commit (task `conversations.download_message_media`).

Meta's URL for the bytes lives about five minutes, so each attempt asks for a fresh one. What
ends a media: downloaded (the bytes match the announced SHA-256 and fit the kind's limit),
too_large, failed (a hash mismatch, a refused request) or expired (Meta no longer has it). A
retryable failure (timeouts, 5xx, 429) is the task's to retry; nothing partial is ever kept.
"""

import base64
import hashlib
import logging
import mimetypes
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.core.files.base import ContentFile
from django.db import transaction

from conversations.models import MediaStatus, MessageMedia
from whatsapp.client import GraphAPIError, GraphClient, MediaTooLargeError

logger = logging.getLogger("conversations.media")

# Meta's "object does not exist" (the media id expired or was deleted).
EXPIRED_ERROR_CODES = frozenset({100})
_MAX_ERROR_CHARS = 255


@dataclass(frozen=True, slots=True)
class DownloadOutcome:
    status: str
    retry: bool = False


def media_max_bytes(kind: str) -> int:
    """The largest file kept for a media kind (stickers are images)."""
    limits = {
        "image": settings.WHATSAPP_MEDIA_MAX_BYTES_IMAGE,
        "sticker": settings.WHATSAPP_MEDIA_MAX_BYTES_IMAGE,
        "audio": settings.WHATSAPP_MEDIA_MAX_BYTES_AUDIO,
        "video": settings.WHATSAPP_MEDIA_MAX_BYTES_VIDEO,
    }
    limit: int = limits.get(kind, settings.WHATSAPP_MEDIA_MAX_BYTES_DOCUMENT)
    return limit


def media_download(
    media_pk: int, *, client: GraphClient, now: datetime, last_attempt: bool
) -> DownloadOutcome:
    """One attempt at a pending media's file; `retry` when a later attempt may succeed (never
    on the `last_attempt`, which ends the media failed instead)."""
    media = MessageMedia.objects.select_related("message__session__instance").get(pk=media_pk)
    if media.status != MediaStatus.PENDING:
        return DownloadOutcome(media.status)
    token = media.message.session.instance.access_token or settings.WHATSAPP_ACCESS_TOKEN
    limit = media_max_bytes(media.kind)
    try:
        location = client.media_url(media.media_id, token)
        if location.file_size is not None and location.file_size > limit:
            raise MediaTooLargeError(f"{location.file_size} bytes announced")
        content = client.media_bytes(location.url, token, max_bytes=limit)
    except MediaTooLargeError:
        return _end(media, MediaStatus.TOO_LARGE, f"larger than {limit} bytes")
    except GraphAPIError as exc:
        if exc.http_status == 404 or exc.code in EXPIRED_ERROR_CODES:
            return _end(media, MediaStatus.EXPIRED, "the media is no longer at WhatsApp")
        if exc.retryable and not last_attempt:
            logger.info("media_download_retry", extra={"media_id": media.pk, "code": exc.code})
            return DownloadOutcome(MediaStatus.PENDING, retry=True)
        return _end(media, MediaStatus.FAILED, f"Graph API: {exc}")
    if media.sha256 and not _sha256_matches(content, media.sha256):
        return _end(media, MediaStatus.FAILED, "SHA-256 does not match the webhook's")
    name = f"{media.pk}{_extension(media.mime_type or location.mime_type)}"
    with transaction.atomic():
        media.file.save(name, ContentFile(content), save=False)
        media.file_size = len(content)
        media.status = MediaStatus.DOWNLOADED
        media.error = ""
        media.downloaded_at = now
        media.save(update_fields=["file", "file_size", "status", "error", "downloaded_at"])
    logger.info("media_downloaded", extra={"media_id": media.pk, "bytes": len(content)})
    return DownloadOutcome(MediaStatus.DOWNLOADED)


# Shown inline in the browser: everything else is a download.
INLINE_TYPES = ("image/", "audio/", "video/")
# Types a browser would run as a page or script: always served as opaque bytes.
ACTIVE_TYPES = frozenset({"text/html", "application/xhtml+xml", "image/svg+xml", "text/xml"})


@dataclass(frozen=True, slots=True)
class MediaFile:
    media: MessageMedia
    content_type: str
    attachment: bool
    filename: str


def media_file_find(message_id: int) -> MediaFile | None:
    """The downloaded file of a message's media and how to serve it; None when there is none."""
    media = MessageMedia.objects.filter(message_id=message_id).first()
    if media is None or not media.file or media.status != MediaStatus.DOWNLOADED:
        return None
    mime_type = media.mime_type.split(";")[0].strip().lower()
    if not mime_type or mime_type in ACTIVE_TYPES:
        content_type, attachment = "application/octet-stream", True
    else:
        content_type, attachment = mime_type, not mime_type.startswith(INLINE_TYPES)
    filename = media.filename or f"{media.kind}-{media.message_id}{_extension(mime_type)}"
    return MediaFile(media, content_type, attachment, filename)


def _end(media: MessageMedia, status: str, error: str) -> DownloadOutcome:
    MessageMedia.objects.filter(pk=media.pk).update(status=status, error=error[:_MAX_ERROR_CHARS])
    logger.info("media_download_ended", extra={"media_id": media.pk, "status": status})
    return DownloadOutcome(status)


def _sha256_matches(content: bytes, announced: str) -> bool:
    # Meta announces the digest base64-encoded; a hex digest is accepted too.
    digest = hashlib.sha256(content).digest()
    return announced in {base64.b64encode(digest).decode(), digest.hex()}


def _extension(mime_type: str) -> str:
    # The file name never comes from the customer (their file name is kept in `filename`).
    return mimetypes.guess_extension(mime_type.split(";")[0].strip()) or ".bin"
