"""The bot's reading of a customer's media, after its download: a voice note transcribed
(`TRANSCRIBE_AUDIO`, `OPENAI_MODEL_TRANSCRIPTION`), an image described (`DESCRIBE_IMAGES`,
`OPENAI_MODEL_VISION`).

The webhook marks a media the bot will read (`reading_for`: ``reading_status`` pending); the
download task (`conversations.media_tasks`) calls `media_read` once the file is in, or failed.
Each model call is an `LLMCall` (agent ``media``, purpose ``transcription`` or ``description``,
its cost and latency), made with no DB transaction open. A reading that fails `READING_ATTEMPTS`
times ends ``failed``: a turn then hands an audio's session off (``transcription_failed``) and
reads an image without its description. The message's turn waits while a pending message's
media is being read (`conversations.turns.run`) — at most `READING_WAIT`, past which the
reading counts as failed — and the end of a reading enqueues the turn.
"""

import logging
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings

from agents.llm import LLMCallResult, LLMError, MediaReader
from agents.media_markers import DESCRIBE_INSTRUCTIONS
from agents.sources import CallRecord, CallRecorder
from agents.states import AgentName
from conversations.models import MediaStatus, MessageMedia, ReadingStatus

logger = logging.getLogger(__name__)

# "A transcription that fails twice hands off": each attempt is one client call, with the
# client's own retries of timeouts and 5xx inside it.
READING_ATTEMPTS = 2
TRANSCRIPTION_LANGUAGE = "pt"
# How long a turn waits for a reading: the download's retries (within Meta's five-minute URL)
# and two model calls fit in it; a reading still pending after it (a lost task) counts as failed.
READING_WAIT = timedelta(minutes=6)


def reading_for(kind: str) -> str:
    """Whether the bot will read a new media of this kind (its `ReadingStatus` at the webhook)."""
    if kind == "audio" and settings.TRANSCRIBE_AUDIO:
        return ReadingStatus.PENDING
    if kind == "image" and settings.DESCRIBE_IMAGES:
        return ReadingStatus.PENDING
    return ReadingStatus.NOT_READ


def bot_reads(kind: str) -> bool:
    """Whether a media of this kind reaches the agents (as a marker or a transcript): all but an
    audio when nothing transcribes it (the customer then gets the runtime settings' media text)."""
    return kind != "audio" or settings.TRANSCRIBE_AUDIO


@dataclass(frozen=True, slots=True)
class ReadingOutcome:
    status: str  # ReadingStatus
    session_id: int
    message_pending: bool  # the message still waits for its turn: the caller enqueues it


def media_read(media_pk: int, *, reader: MediaReader, recorder: CallRecorder) -> ReadingOutcome:
    """Read a media whose reading is pending (see the module docstring); a media read or failed
    already, or not the bot's to read, is left as it is."""
    media = MessageMedia.objects.select_related("message").get(pk=media_pk)
    message = media.message
    if media.reading_status != ReadingStatus.PENDING:
        return ReadingOutcome(media.reading_status, message.session_id, False)
    pending = message.processed_at is None
    if media.status != MediaStatus.DOWNLOADED or not media.file:
        return _end(media, ReadingStatus.FAILED, pending, "not downloaded")
    with media.file.open("rb") as stored:
        content = stored.read()
    transcribing = media.kind == "audio"
    model = settings.OPENAI_MODEL_TRANSCRIPTION if transcribing else settings.OPENAI_MODEL_VISION
    mime_type = media.mime_type.split(";")[0].strip() or "application/octet-stream"
    for _ in range(READING_ATTEMPTS):
        try:
            if transcribing:
                result = reader.transcribe(
                    model=model,
                    audio=content,
                    filename=_upload_name(media),
                    mime_type=mime_type,
                    language=TRANSCRIPTION_LANGUAGE,
                )
            else:
                result = reader.describe(
                    model=model,
                    image=content,
                    mime_type=mime_type,
                    instructions=DESCRIBE_INSTRUCTIONS,
                )
        except LLMError as error:
            _record(recorder, media, model, error=error)
            continue
        _record(recorder, media, model, result=result)
        if transcribing:
            media.transcript = result.raw_response
        else:
            media.description = result.raw_response
        return _end(media, ReadingStatus.DONE, pending, "")
    return _end(media, ReadingStatus.FAILED, pending, "the model did not answer")


def _record(
    recorder: CallRecorder,
    media: MessageMedia,
    model: str,
    *,
    result: LLMCallResult | None = None,
    error: LLMError | None = None,
) -> None:
    recorder.record(
        CallRecord(
            session_id=media.message.session_id,
            agent=AgentName.MEDIA,
            purpose="transcription" if media.kind == "audio" else "description",
            model=model,
            prompt_version="",
            result=result,
            error=error,
            # The text is the media's (MessageMedia.transcript, .description), erased with it.
            raw_response="",
            message_id=media.message_id,
        )
    )


def _end(media: MessageMedia, status: str, pending: bool, why: str) -> ReadingOutcome:
    media.reading_status = status
    media.save(update_fields=["transcript", "description", "reading_status"])
    logger.info(
        "media_read",
        extra={"media_id": media.pk, "kind": media.kind, "status": status, "why": why},
    )
    return ReadingOutcome(status, media.message.session_id, pending)


# The transcription API tells the format by the file name's extension (its list: flac, mp3, mp4,
# mpeg, mpga, m4a, ogg, wav, webm); Python names audio/ogg ".oga", which it refuses.
_AUDIO_EXTENSIONS = {
    "audio/ogg": "ogg",
    "audio/opus": "ogg",
    "audio/mpeg": "mp3",
    "audio/mp4": "m4a",
    "audio/wav": "wav",
    "audio/x-wav": "wav",
    "audio/webm": "webm",
    "audio/flac": "flac",
}


def _upload_name(media: MessageMedia) -> str:
    # Never the customer's file name: only the format matters to the API.
    mime_type = media.mime_type.split(";")[0].strip().lower()
    return f"audio.{_AUDIO_EXTENSIONS.get(mime_type, 'ogg')}"
