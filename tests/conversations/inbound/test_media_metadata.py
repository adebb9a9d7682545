"""Inbound media keeps its metadata (conversations.MessageMedia) next to its message, in the
delivery's transaction; the customer still gets the fixed unsupported-media text."""

from typing import Any

import pytest

from agents.states import SessionState
from conversations.models import Direction, Instance, MediaStatus, Message, MessageMedia, Session
from tests.helpers.inbound import Receiver, make_session, messages
from tests.helpers.meta_payloads import Recorder, encode, load_fixture

pytestmark = pytest.mark.django_db


@pytest.fixture
def downloads(media_downloads: Recorder) -> Recorder:
    """The media downloads enqueued after the commit (tests/conftest.py records them)."""
    return media_downloads


MEDIA_FIELDS = (
    "kind",
    "media_id",
    "mime_type",
    "sha256",
    "caption",
    "filename",
    "voice",
    "status",
    "error",
    "data",
)


def media_row(media: MessageMedia) -> dict[str, Any]:
    return {name: getattr(media, name) for name in MEDIA_FIELDS}


def file_row(kind: str, media_id: str, mime_type: str, **extra: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "kind": kind,
        "media_id": media_id,
        "mime_type": mime_type,
        "sha256": "aGFzaA==",
        "caption": "",
        "filename": "",
        "voice": False,
        "status": MediaStatus.PENDING,
        "error": "",
        "data": {},
    }
    return row | extra


def data_row(kind: str, data: dict[str, Any]) -> dict[str, Any]:
    return file_row(kind, "", "", sha256="", status=MediaStatus.NOT_APPLICABLE, data=data)


EXPECTED = {
    "image": file_row("image", "900000000000001", "image/jpeg", caption="Foto do laudo"),
    "audio": file_row("audio", "900000000000002", "audio/ogg; codecs=opus", voice=True),
    "video": file_row("video", "900000000000003", "video/mp4", caption="Vídeo da coleta"),
    "document": file_row(
        "document", "900000000000004", "application/pdf", caption="Pedido", filename="pedido.pdf"
    ),
    "sticker": file_row("sticker", "900000000000005", "image/webp"),
    "location": data_row(
        "location",
        {
            "latitude": -23.5613,
            "longitude": -46.6565,
            "name": "Laboratório Central",
            "address": "Av. Paulista, 1000",
        },
    ),
    "contacts": data_row(
        "contacts",
        {
            "contacts": [
                {
                    "name": "João Souza",
                    "phones": [{"phone": "+55 11 91234-5678", "wa_id": "5511912345678"}],
                }
            ]
        },
    ),
}


@pytest.mark.parametrize(("fixture", "expected"), list(EXPECTED.items()))
def test_each_media_message_stores_its_metadata_and_waits_for_a_turn_without_a_fixed_text(
    instance: Instance,
    receive: Receiver,
    downloads: Recorder,
    fixture: str,
    expected: dict[str, Any],
) -> None:
    receive(fixture)

    session = Session.objects.get()
    [inbound_message] = messages(session, Direction.INBOUND)
    media = MessageMedia.objects.get()
    assert media.message_id == inbound_message.pk
    assert media_row(media) == expected
    assert (media.file.name, media.file_size, media.downloaded_at) == ("", None, None)
    assert messages(session, Direction.OUTBOUND) == []  # the agents read it instead
    assert inbound_message.processed_at is None
    pending = expected["status"] == MediaStatus.PENDING
    assert downloads.calls == ([media.pk] if pending else [])


def test_a_media_message_received_twice_keeps_one_media_row_and_one_download(
    instance: Instance, receive: Receiver, downloads: Recorder
) -> None:
    receive("image")
    receive("image")

    assert MessageMedia.objects.count() == 1
    assert downloads.calls == [MessageMedia.objects.get().pk]


def test_media_in_a_human_state_keeps_its_metadata_without_an_answer(
    instance: Instance, receive: Receiver
) -> None:
    session = make_session(instance, state=SessionState.HUMAN)

    receive("document")

    assert messages(session, Direction.OUTBOUND) == []
    assert MessageMedia.objects.get().message.session_id == session.pk


def test_a_file_without_a_media_id_is_stored_failed_and_not_downloaded(
    instance: Instance, receive: Receiver, downloads: Recorder
) -> None:
    document = load_fixture("image")
    document["entry"][0]["changes"][0]["value"]["messages"][0]["image"].pop("id")

    receive(encode(document))

    media = MessageMedia.objects.get()
    assert (media.status, media.error, media.media_id) == (
        MediaStatus.FAILED,
        "no media id in the webhook",
        "",
    )
    assert downloads.calls == []


def test_text_messages_have_no_media(instance: Instance, receive: Receiver) -> None:
    receive("text")

    assert Message.objects.filter(direction=Direction.INBOUND).count() == 1
    assert MessageMedia.objects.count() == 0
