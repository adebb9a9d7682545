"""Sending a file staff attached (an OUTBOUND image or document with its MessageMedia) through
the real httpx client and the fake Graph API: the upload happens once, its media id is kept, and
a retry after a failure names the same upload."""

from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from django.core.files.base import ContentFile
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from pytest_django import Settings

from conversations.models import (
    DeliveryStatus,
    Direction,
    MediaStatus,
    Message,
    MessageMedia,
    Session,
)
from conversations.sending import RetryableSendError, SendOutcome, outbound_message_send
from conversations.sending.part import NO_FILE
from conversations.sending.worker import send_message
from tests import baker_recipes as recipes
from tests.baker_recipes import CUSTOMER_PHONE, PHONE_NUMBER_ID
from tests.fakes.graph_server import FakeGraphAPI
from whatsapp.client import GraphClient, SentMessage

pytestmark = pytest.mark.django_db

PDF = b"%PDF-1.7\n1 0 obj\n<<>>\nendobj\n%%EOF\n"
JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + b"j" * 200


@pytest.fixture(autouse=True)
def media_root(settings: Settings, tmp_path: Path) -> Path:
    settings.MEDIA_ROOT = str(tmp_path)
    return tmp_path


@pytest.fixture
def client(fake_graph: FakeGraphAPI) -> GraphClient:
    return GraphClient(base_url=fake_graph.base_url)


def staff_file(
    session: Session,
    *,
    kind: str = "document",
    content: bytes = PDF,
    mime_type: str = "application/pdf",
    filename: str = "laudo.pdf",
    caption: str = "Seu laudo",
    media_id: str = "",
) -> Message:
    """A file as the composer stores it: an OUTBOUND message and its media, the file saved."""
    message: Message = recipes.reply.make(
        session=session,
        message_type=kind,
        content=caption,
        staff_user=recipes.staff_user.make(),
    )
    media = MessageMedia(
        message=message,
        kind=kind,
        mime_type=mime_type,
        filename=filename,
        caption=caption,
        file_size=len(content),
        media_id=media_id,
        status=MediaStatus.DOWNLOADED,
    )
    media.file.save(f"test{kind}.bin", ContentFile(content), save=False)
    media.save()
    return message


def document_send(message: Message, media_id: str) -> dict[str, object]:
    return {
        "messaging_product": "whatsapp",
        "recipient_type": "individual",
        "to": CUSTOMER_PHONE,
        "type": "document",
        "document": {"id": media_id, "caption": "Seu laudo", "filename": "laudo.pdf"},
        "biz_opaque_callback_data": f"message:{message.pk}",
    }


def test_a_document_is_uploaded_then_sent_naming_the_upload(
    fake_graph: FakeGraphAPI, client: GraphClient, known_customer: Session
) -> None:
    message = staff_file(known_customer)

    outcome = outbound_message_send(message_id=message.pk, client=client)

    assert outcome is SendOutcome.SENT
    [upload] = fake_graph.uploads
    assert upload.path == f"/v23.0/{PHONE_NUMBER_ID}/media"
    assert upload.headers["Authorization"] == "Bearer test-access-token"
    assert upload.headers["Content-Type"].startswith("multipart/form-data; boundary=")
    assert upload.form == {"messaging_product": "whatsapp", "type": "application/pdf"}
    assert (upload.filename, upload.content_type, upload.content) == (
        "laudo.pdf",
        "application/pdf",
        PDF,
    )
    [send] = fake_graph.sends
    assert send.json == document_send(message, "800000000000001")
    message.refresh_from_db()
    assert (message.wa_message_id, message.delivery_status, message.send_attempts) == (
        "wamid.FAKE0001",
        DeliveryStatus.SENT,
        1,
    )
    assert message.media.media_id == "800000000000001"


def test_a_file_s_send_costs_three_queries_more_than_a_text_s(
    fake_graph: FakeGraphAPI, client: GraphClient, known_customer: Session
) -> None:
    text: Message = recipes.reply.make(session=known_customer)
    message = staff_file(known_customer)

    with CaptureQueriesContext(connection) as text_queries:
        outbound_message_send(message_id=text.pk, client=client)
    with CaptureQueriesContext(connection) as file_queries:
        outbound_message_send(message_id=message.pk, client=client)

    # Its media read, its media id stored, its claim renewed.
    assert (len(text_queries), len(file_queries)) == (9, 12)


def test_an_image_goes_without_a_file_name(
    fake_graph: FakeGraphAPI, client: GraphClient, known_customer: Session
) -> None:
    message = staff_file(
        known_customer,
        kind="image",
        content=JPEG,
        mime_type="image/jpeg",
        filename="foto.jpg",
        caption="",
    )

    outbound_message_send(message_id=message.pk, client=client)

    assert fake_graph.uploads[0].form == {"messaging_product": "whatsapp", "type": "image/jpeg"}
    assert fake_graph.sends[0].json["type"] == "image"
    assert fake_graph.sends[0].json["image"] == {"id": "800000000000001"}


def test_an_upload_that_fails_with_a_5xx_is_retried_and_uploaded_once_in_the_end(
    fake_graph: FakeGraphAPI, client: GraphClient, known_customer: Session
) -> None:
    message = staff_file(known_customer)
    fake_graph.respond_error(500, 2, "Service temporarily unavailable")

    with pytest.raises(RetryableSendError):
        outbound_message_send(message_id=message.pk, client=client)

    message.refresh_from_db()
    assert (message.delivery_status, message.delivery_status_at, message.wa_message_id) == (
        DeliveryStatus.PENDING,
        None,
        None,
    )
    assert (message.delivery_error_code, message.delivery_error_title) == (
        2,
        "Service temporarily unavailable",
    )
    assert message.media.media_id == ""
    assert (len(fake_graph.uploads), fake_graph.sends) == (1, [])

    assert outbound_message_send(message_id=message.pk, client=client) is SendOutcome.SENT

    # Two requests, one accepted: the only media id Meta gave is the one sent.
    assert len(fake_graph.uploads) == 2
    [send] = fake_graph.sends
    assert send.json == document_send(message, "800000000000001")
    message.refresh_from_db()
    assert (message.media.media_id, message.wa_message_id, message.send_attempts) == (
        "800000000000001",
        "wamid.FAKE0001",
        2,
    )


def test_a_send_that_fails_after_the_upload_is_retried_with_the_same_media_id(
    fake_graph: FakeGraphAPI, client: GraphClient, known_customer: Session
) -> None:
    message = staff_file(known_customer)
    fake_graph.respond_delay(0.0)  # the upload is answered as usual
    fake_graph.respond_error(503, 2, "Service temporarily unavailable")

    with pytest.raises(RetryableSendError):
        outbound_message_send(message_id=message.pk, client=client)

    message.refresh_from_db()
    assert message.media.media_id == "800000000000001"
    assert outbound_message_send(message_id=message.pk, client=client) is SendOutcome.SENT

    assert len(fake_graph.uploads) == 1
    first, second = fake_graph.sends
    assert first.json == second.json == document_send(message, "800000000000001")


def test_the_send_task_retries_a_failed_upload_on_its_own(
    fake_graph: FakeGraphAPI, known_customer: Session, eager_retries: None
) -> None:
    message = staff_file(known_customer)
    fake_graph.respond_error(500, 2, "Service temporarily unavailable")

    assert send_message.apply(args=(message.pk,)).get() == "sent"

    assert len(fake_graph.uploads) == 2
    assert [s.json["document"]["id"] for s in fake_graph.sends] == ["800000000000001"]


def test_a_refused_upload_fails_the_message_for_good(
    fake_graph: FakeGraphAPI, client: GraphClient, known_customer: Session
) -> None:
    message = staff_file(known_customer)
    fake_graph.respond_error(400, 131053, "Media upload error", "Unsupported file type")

    assert outbound_message_send(message_id=message.pk, client=client) is SendOutcome.FAILED

    message.refresh_from_db()
    assert (message.delivery_status, message.delivery_error_code, message.delivery_error_title) == (
        DeliveryStatus.FAILED,
        131053,
        "Media upload error",
    )
    assert fake_graph.sends == []


def test_a_file_missing_from_the_storage_fails_the_message_without_a_request(
    fake_graph: FakeGraphAPI, client: GraphClient, known_customer: Session
) -> None:
    message = staff_file(known_customer)
    message.media.file.delete(save=False)

    assert outbound_message_send(message_id=message.pk, client=client) is SendOutcome.FAILED

    message.refresh_from_db()
    assert (message.delivery_status, message.delivery_error_title) == (
        DeliveryStatus.FAILED,
        NO_FILE,
    )
    assert (fake_graph.uploads, fake_graph.requests) == ([], [])


class WatchingClient(GraphClient):
    """The real client, noting what the database holds when the message request starts."""

    def __init__(self, base_url: str) -> None:
        super().__init__(base_url=base_url)
        self.seen: list[tuple[str, datetime | None]] = []
        self.uploaded_at: datetime | None = None

    def media_upload(self, **kwargs: Any) -> str:
        media_id = super().media_upload(**kwargs)
        self.uploaded_at = timezone.now()
        return media_id

    def send_media(self, **kwargs: Any) -> SentMessage:
        row = Message.objects.select_related("media").get(pk=kwargs["callback_data"].split(":")[1])
        self.seen.append((row.media.media_id, row.delivery_status_at))
        return super().send_media(**kwargs)


def test_the_media_id_is_kept_and_the_claim_renewed_before_the_message_request(
    fake_graph: FakeGraphAPI, known_customer: Session
) -> None:
    message = staff_file(known_customer)
    watching = WatchingClient(fake_graph.base_url)

    outbound_message_send(message_id=message.pk, client=watching)

    [(media_id, claimed_at)] = watching.seen
    assert media_id == "800000000000001"
    assert watching.uploaded_at is not None
    assert claimed_at is not None
    assert claimed_at >= watching.uploaded_at


def test_a_message_of_a_file_with_no_media_row_fails_for_good(
    fake_graph: FakeGraphAPI, client: GraphClient, known_customer: Session
) -> None:
    message: Message = recipes.reply.make(
        session=known_customer, direction=Direction.OUTBOUND, message_type="document", content=""
    )

    assert outbound_message_send(message_id=message.pk, client=client) is SendOutcome.FAILED
    message.refresh_from_db()
    assert message.delivery_error_title == NO_FILE
