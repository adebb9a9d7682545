"""What the agents read for a customer's media message: a short pt-BR marker, or the transcript.

The model never sees a file. An audio it could transcribe reads as its transcript, as if typed;
every other media reads as a marker in brackets with what is known of it, then its caption:

    [imagem] legenda: rótulo da amostra
    [imagem: frasco de vidro com etiqueta "Poço 2"] legenda: rótulo da amostra
    [documento: laudo.pdf]
    [localização: -22.97, -47.0] Sítio Boa Vista - Estrada Municipal, km 3
    [contato: Maria Silva, +55 11 98765-4321]

so the agent can ask for text or hand off instead of answering blind (the model reads Portuguese
prompts, hence the Portuguese words). `readable` says whether a media gives the bot anything to
act on: a turn made only of media that are not is handed off ("mídia") before any model call,
and so is a turn with an audio the bot could not transcribe (`media_handoff`). Pure module.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agents.phones import format_phone
from agents.states import HandoffReason
from agents.texts import shortened

# The words of each media kind, as the model reads them.
KIND_WORDS: Mapping[str, str] = {
    "image": "imagem",
    "sticker": "figurinha",
    "audio": "áudio",
    "video": "vídeo",
    "document": "documento",
    "location": "localização",
    "contacts": "contato",
}
# Enough of a description or a caption for the model; the rest is the staff's to read.
MAX_MARKER_TEXT_CHARS = 500
# What the vision model is asked (`DESCRIBE_IMAGES`): a short, factual description the agent
# reads inside the marker; no diagnosis, no guess at a result (the seeds' health rule).
DESCRIBE_INSTRUCTIONS = (
    "Você descreve imagens enviadas por clientes de um laboratório de análises pelo WhatsApp. "
    "Responda em português, em no máximo duas frases curtas, só com o que se vê: o tipo de "
    "imagem (foto de amostra, rótulo, formulário, laudo, documento, outra) e os textos legíveis "
    "que importam para o atendimento (por exemplo, o que está escrito num rótulo ou o título de "
    "um documento). Não interprete resultados, não faça diagnósticos e não invente o que não "
    "está legível."
)


@dataclass(frozen=True, slots=True)
class MediaView:
    """A media message as the agents see it (conversations.MessageMedia's readable part)."""

    kind: str
    caption: str = ""
    filename: str = ""
    transcript: str = ""
    description: str = ""
    # location: latitude, longitude, name, address; contacts: {"contacts": [{name, phones}]}.
    data: Mapping[str, Any] = field(default_factory=dict)


def media_text(media: MediaView) -> str:
    """What the model reads for this media (see the module docstring)."""
    if media.kind == "audio" and media.transcript.strip():
        return _cut(media.transcript.strip())
    word = KIND_WORDS.get(media.kind, "mídia")
    detail = _detail(media)
    marker = f"[{word}: {detail}]" if detail else f"[{word}]"
    extra = _place(media) if media.kind == "location" else ""
    caption = media.caption.strip()
    parts = [marker]
    if extra:
        parts.append(extra)
    if caption:
        parts.append(f"legenda: {_cut(caption)}")
    return " ".join(parts)


def readable(media: MediaView) -> bool:
    """Whether the bot can act on this media: it has a caption, a transcript or a description,
    or is data (a location, a contact card) or a sticker (an emoji, as far as a turn goes)."""
    if media.kind in ("location", "contacts", "sticker"):
        return True
    return any(text.strip() for text in (media.caption, media.transcript, media.description))


def _detail(media: MediaView) -> str:
    if media.kind in ("image", "video") and media.description.strip():
        return _cut(media.description.strip())
    if media.kind == "document":
        return media.filename.strip()
    if media.kind == "location":
        latitude, longitude = media.data.get("latitude"), media.data.get("longitude")
        if isinstance(latitude, int | float) and isinstance(longitude, int | float):
            return f"{latitude}, {longitude}"
        return ""
    if media.kind == "contacts":
        return "; ".join(_card(card) for card in _cards(media.data) if _card(card))
    return ""


def _place(media: MediaView) -> str:
    names = (media.data.get("name"), media.data.get("address"))
    return " - ".join(str(part).strip() for part in names if isinstance(part, str) and part.strip())


def _cards(data: Mapping[str, Any]) -> Sequence[Mapping[str, Any]]:
    cards = data.get("contacts")
    return [card for card in cards if isinstance(card, Mapping)] if isinstance(cards, list) else []


def _card(card: Mapping[str, Any]) -> str:
    name = str(card.get("name") or "").strip()
    phones = []
    for phone in card.get("phones") or ():
        if isinstance(phone, Mapping):
            digits = str(phone.get("wa_id") or "").strip()
            phones.append(format_phone(digits) if digits else str(phone.get("phone") or "").strip())
    return ", ".join(part for part in (name, *phones) if part)


def _cut(text: str) -> str:
    return shortened(text, MAX_MARKER_TEXT_CHARS)


def media_handoff(media: Sequence[MediaView | None]) -> HandoffReason | None:
    """Why a turn goes to a human before any model call, from its messages' media (None: a
    text): an audio with no transcript (its transcription failed); or only media, none of which
    the bot can act on (`readable`). The seeds' rule: uncertainty goes to a person."""
    if any(m is not None and m.kind == "audio" and not m.transcript.strip() for m in media):
        return HandoffReason.TRANSCRIPTION_FAILED
    if media and all(m is not None and not readable(m) for m in media):
        return HandoffReason.MEDIA
    return None
