"""A media message's block in the conversation (templates/admin/conversations/session/media.html):
what the bubble shows of its `MessageMedia`, prepared here so the page and the live endpoint
render the same partial from the same values.

The file itself is served only by the permission-checked media view
(`conversations.admin.logs.MessageAdmin.media_view`), which refuses staff who may not read
personal data: for them (a masker is given) the block names the kind and says why nothing else is
shown — a photo, a voice, a place or a contact card cannot be masked — while the caption and what
the bot read in it are shown masked, as every text of the page.
"""

from dataclasses import dataclass
from typing import Any

from django.template.defaultfilters import filesizeformat
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.functional import Promise
from django.utils.safestring import SafeString
from django.utils.translation import gettext_lazy as _

from agents.masking import Masker
from agents.phones import format_phone, phone_digits
from conversations.admin.logs import MEDIA_URL_NAME
from conversations.models import MediaStatus, Message, MessageMedia, ReadingStatus

MEDIA_TEMPLATE = "admin/conversations/session/media.html"
MAP_URL = "https://www.openstreetmap.org/?mlat={lat}&mlon={lon}#map=17/{lat}/{lon}"

# One label table: rendered when shown (gettext), never stored.
KIND_LABELS: dict[str, Promise] = {
    "image": _("Image"),
    "sticker": _("Sticker"),
    "audio": _("Audio"),
    "video": _("Video"),
    "document": _("Document"),
    "location": _("Location"),
    "contacts": _("Contact card"),
}
# Why a file is not shown, by its download status.
NOT_SHOWN: dict[str, Promise] = {
    MediaStatus.PENDING: _("Downloading the media…"),
    MediaStatus.EXPIRED: _("The media expired at WhatsApp before it was downloaded"),
    MediaStatus.TOO_LARGE: _("The file is larger than the configured limit"),
    MediaStatus.FAILED: _("The media could not be downloaded"),
}
# A downloaded media whose file is gone: its conversation was anonymised.
FILE_DELETED = _("The file was deleted with the conversation's personal data")
HIDDEN = _("Media hidden: seeing it needs permission to view personal data")
AUDIO_READING: dict[str, Promise] = {
    ReadingStatus.PENDING: _("Transcribing…"),
    ReadingStatus.FAILED: _("The audio could not be transcribed"),
}


@dataclass(frozen=True, slots=True)
class ContactCard:
    name: str
    phones: list[str]  # as people read them (+55 11 91234-5678)


@dataclass(frozen=True, slots=True)
class Place:
    latitude: str
    longitude: str
    name: str
    address: str
    map_url: str  # "" without coordinates


@dataclass(frozen=True, slots=True)
class MediaBlock:
    """What a bubble shows of its media; `state` changes when the block would render differently
    (the live endpoint sends a block again when it does)."""

    message_id: int
    kind: str  # MessageMedia.kind ("image", "audio", …)
    label: str  # "Imagem"
    state: str  # "<download status>:<reading status>"
    url: str  # the media view, when the file is there and the reader may see it; else ""
    not_shown: str  # why there is no file to show ("Baixando mídia…"); "" when there is
    hidden: bool  # the reader may not see personal data
    filename: str
    size: str  # "1,2 MB" in the active locale; "" when unknown
    mime_type: str
    caption: str
    transcript: str  # an audio's, once read; "" otherwise
    reading: str  # an audio's transcription in progress or failed, as a sentence; else ""
    description: str  # an image's automatic description
    place: Place | None
    contacts: list[ContactCard]

    @property
    def pending(self) -> bool:
        """Whether the block may still change by itself (a download or a reading under way)."""
        return self.state.startswith(MediaStatus.PENDING + ":") or self.state.endswith(
            ":" + ReadingStatus.PENDING
        )


def message_media(message: Message) -> MessageMedia | None:
    """The message's media when it was loaded with it (`select_related("media")`); None when
    it has none."""
    try:
        media: MessageMedia = message.media
    except MessageMedia.DoesNotExist:
        return None
    return media


def media_block(media: MessageMedia, *, masker: Masker | None) -> MediaBlock:
    mask = masker.text if masker is not None else str
    hidden = masker is not None
    has_file = media.status == MediaStatus.DOWNLOADED and bool(media.file)
    if media.status == MediaStatus.NOT_APPLICABLE:
        not_shown = ""
    elif media.status == MediaStatus.DOWNLOADED:
        not_shown = "" if has_file else str(FILE_DELETED)
    else:
        not_shown = str(NOT_SHOWN.get(media.status, NOT_SHOWN[MediaStatus.FAILED]))
    reading = ""
    if media.kind == "audio" and not media.transcript:
        reading = str(AUDIO_READING.get(media.reading_status, ""))
    return MediaBlock(
        message_id=media.message_id,
        kind=media.kind,
        label=str(KIND_LABELS.get(media.kind, media.kind)),
        state=f"{media.status}:{media.reading_status}",
        url=reverse(f"admin:{MEDIA_URL_NAME}", args=[media.message_id])
        if has_file and not hidden
        else "",
        not_shown=not_shown,
        hidden=hidden,
        filename="" if hidden else media.filename,
        size=filesizeformat(media.file_size) if media.file_size else "",
        mime_type=media.mime_type.split(";")[0].strip(),
        caption=mask(media.caption),
        transcript=mask(media.transcript),
        reading=reading,
        description=mask(media.description),
        place=None if hidden or media.kind != "location" else _place(media.data),
        contacts=[] if hidden or media.kind != "contacts" else _contacts(media.data),
    )


def media_html(block: MediaBlock) -> SafeString:
    """The block as the page renders it (the live endpoint sends it as is)."""
    return SafeString(render_to_string(MEDIA_TEMPLATE, {"media": block}))


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _place(data: Any) -> Place:
    data = data if isinstance(data, dict) else {}
    latitude, longitude = _number(data.get("latitude")), _number(data.get("longitude"))
    located = latitude is not None and longitude is not None
    return Place(
        latitude=f"{latitude:.6f}".rstrip("0").rstrip(".") if latitude is not None else "",
        longitude=f"{longitude:.6f}".rstrip("0").rstrip(".") if longitude is not None else "",
        name=str(data.get("name") or ""),
        address=str(data.get("address") or ""),
        map_url=MAP_URL.format(lat=latitude, lon=longitude) if located else "",
    )


def _phone_text(phone: Any) -> str:
    if not isinstance(phone, dict):
        return ""
    wa_id = str(phone.get("wa_id") or "")
    if wa_id.isdigit():
        return format_phone(wa_id)
    written = str(phone.get("phone") or "")
    digits = phone_digits(written) if written else None
    return format_phone(digits) if digits else written


def _contacts(data: Any) -> list[ContactCard]:
    cards = data.get("contacts") if isinstance(data, dict) else None
    found = []
    for card in cards if isinstance(cards, list) else []:
        if not isinstance(card, dict):
            continue
        phones = card.get("phones")
        numbers = [_phone_text(p) for p in phones] if isinstance(phones, list) else []
        found.append(ContactCard(str(card.get("name") or ""), [n for n in numbers if n]))
    return found
