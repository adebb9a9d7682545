"""What the agents read for a media message (agents.media_markers): the marker, the transcript,
and the media-only handoff rule."""

import pytest

from agents.media_markers import (
    MAX_MARKER_TEXT_CHARS,
    MediaView,
    media_handoff,
    media_text,
    readable,
)
from agents.states import HandoffReason

LOCATION = {
    "latitude": -22.97,
    "longitude": -47.0,
    "name": "Sítio Boa Vista",
    "address": "Estrada Municipal, km 3",
}
CARDS = {
    "contacts": [
        {
            "name": "Maria Silva",
            "phones": [{"phone": "+55 11 98765-4321", "wa_id": "5511987654321"}],
        },
        {"name": "", "phones": [{"phone": "(19) 3333-4444", "wa_id": ""}]},
    ]
}


@pytest.mark.parametrize(
    ("media", "text"),
    [
        (MediaView("image"), "[imagem]"),
        (MediaView("image", caption=" rótulo da amostra "), "[imagem] legenda: rótulo da amostra"),
        (
            MediaView("image", caption="rótulo", description='frasco com etiqueta "Poço 2"'),
            '[imagem: frasco com etiqueta "Poço 2"] legenda: rótulo',
        ),
        (MediaView("sticker"), "[figurinha]"),
        (MediaView("video", caption="coleta"), "[vídeo] legenda: coleta"),
        (MediaView("document", filename="laudo.pdf"), "[documento: laudo.pdf]"),
        (
            MediaView("document", filename="pedido.pdf", caption="segue o pedido"),
            "[documento: pedido.pdf] legenda: segue o pedido",
        ),
        (MediaView("document"), "[documento]"),
        (
            MediaView("location", data=LOCATION),
            "[localização: -22.97, -47.0] Sítio Boa Vista - Estrada Municipal, km 3",
        ),
        (
            MediaView("location", data={"latitude": -22.97, "longitude": -47}),
            "[localização: -22.97, -47]",
        ),
        (MediaView("location", data={"latitude": "x"}), "[localização]"),
        (
            MediaView("contacts", data=CARDS),
            "[contato: Maria Silva, +55 11 98765-4321; (19) 3333-4444]",
        ),
        (MediaView("audio"), "[áudio]"),
        (
            MediaView("audio", transcript=" Quero analisar a água do poço. "),
            "Quero analisar a água do poço.",
        ),
        (MediaView("gif"), "[mídia]"),
    ],
)
def test_each_media_reads_as_its_marker_or_its_transcript(media: MediaView, text: str) -> None:
    assert media_text(media) == text


@pytest.mark.parametrize(("chars", "expected"), [(499, 499), (500, 500), (501, 500)])
def test_a_long_caption_is_cut_at_500_characters(chars: int, expected: int) -> None:
    caption = media_text(MediaView("image", caption="a" * chars)).removeprefix("[imagem] legenda: ")

    assert len(caption) == expected
    assert caption.endswith("…") is (chars > MAX_MARKER_TEXT_CHARS)


@pytest.mark.parametrize(
    ("media", "is_readable"),
    [
        (MediaView("image"), False),
        (MediaView("image", caption="  "), False),
        (MediaView("image", caption="rótulo"), True),
        (MediaView("image", description="um frasco"), True),
        (MediaView("document", filename="laudo.pdf"), False),
        (MediaView("video"), False),
        (MediaView("audio", transcript="oi"), True),
        (MediaView("location"), True),
        (MediaView("contacts"), True),
        (MediaView("sticker"), True),
    ],
)
def test_a_media_is_readable_with_a_text_or_as_data(media: MediaView, is_readable: bool) -> None:
    assert readable(media) is is_readable


def test_only_unreadable_media_hand_off_as_media() -> None:
    photo, document = MediaView("image"), MediaView("document", filename="laudo.pdf")

    assert media_handoff([photo, document]) is HandoffReason.MEDIA
    assert media_handoff([photo, None]) is None  # a text in the turn: the agent reads both
    assert media_handoff([photo, MediaView("image", caption="rótulo")]) is None
    assert media_handoff([None]) is None
    assert media_handoff([]) is None


def test_an_audio_without_transcript_hands_off_whatever_came_with_it() -> None:
    assert media_handoff([MediaView("audio")]) is HandoffReason.TRANSCRIPTION_FAILED
    assert media_handoff([None, MediaView("audio")]) is HandoffReason.TRANSCRIPTION_FAILED
    assert media_handoff([MediaView("audio", transcript="oi")]) is None
