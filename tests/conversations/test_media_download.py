"""Downloading a customer's media file (conversations.download_message_media) from the fake Graph
API into the default storage: after the webhook's commit, checked against the announced SHA-256
and the kind's size limit."""

from pathlib import Path

import pytest
from django.core.files.storage import default_storage
from django.test import Client
from pytest_django import DjangoCaptureOnCommitCallbacks, Settings

from conversations import media_tasks
from conversations.media_tasks import download_message_media
from conversations.models import Instance, MediaStatus, Message, MessageMedia
from tests import baker_recipes as recipes
from tests.fakes.graph_server import FakeGraphAPI
from tests.helpers.meta_payloads import APP_SECRET, encode, load_fixture, signed_post

pytestmark = pytest.mark.django_db

# The real publisher (tests/conftest.py replaces it with a recorder for every test).
ENQUEUE_MEDIA_DOWNLOAD = media_tasks.enqueue_media_download
JPEG = b"\xff\xd8\xff\xe0" + b"x" * 96
MEDIA_ID = "900000000000001"


@pytest.fixture(autouse=True)
def media_root(settings: Settings, tmp_path: Path) -> Path:
    settings.MEDIA_ROOT = str(tmp_path)
    return tmp_path


def stored_files(root: Path) -> list[Path]:
    return [path for path in root.rglob("*") if path.is_file()]


def pending_media(
    instance: Instance, kind: str = "image", *, sha256: str, media_id: str = MEDIA_ID
) -> MessageMedia:
    session = recipes.session.make(instance=instance)
    message = Message.objects.create(session=session, direction="INBOUND", message_type=kind)
    media: MessageMedia = MessageMedia.objects.create(
        message=message, kind=kind, media_id=media_id, sha256=sha256
    )
    return media


def download(media: MessageMedia) -> MessageMedia:
    download_message_media.apply(args=(media.pk,))
    media.refresh_from_db()
    return media


@pytest.mark.parametrize(
    ("kind", "mime_type", "extension"),
    [
        ("image", "image/jpeg", ".jpg"),
        ("audio", "audio/ogg; codecs=opus", ".oga"),
        ("video", "video/mp4", ".mp4"),
        ("document", "application/pdf", ".pdf"),
        ("sticker", "image/webp", ".webp"),
    ],
)
def test_each_kind_is_downloaded_with_the_token_into_the_storage(
    instance: Instance, fake_graph: FakeGraphAPI, kind: str, mime_type: str, extension: str
) -> None:
    digest = fake_graph.set_media(MEDIA_ID, JPEG, mime_type)
    media = pending_media(instance, kind, sha256=digest)
    media.mime_type = mime_type
    media.save()

    media = download(media)

    assert (media.status, media.error, media.file_size) == (MediaStatus.DOWNLOADED, "", 100)
    assert media.downloaded_at is not None
    name = str(media.file.name)
    assert name.startswith("whatsapp-media/")
    assert name.endswith(f"/{media.pk}{extension}")
    with default_storage.open(name) as stored:
        assert stored.read() == JPEG
    assert [(r.path, r.headers["Authorization"]) for r in fake_graph.media_requests] == [
        (f"/v23.0/{MEDIA_ID}", "Bearer test-access-token"),
        (f"/media-bytes/{MEDIA_ID}", "Bearer test-access-token"),
    ]


def test_a_sha256_mismatch_fails_and_keeps_nothing(
    instance: Instance, fake_graph: FakeGraphAPI, media_root: Path
) -> None:
    fake_graph.set_media(MEDIA_ID, JPEG, "image/jpeg")
    media = pending_media(instance, sha256="bm90IHRoZSBoYXNo")

    media = download(media)

    assert (media.status, media.error, media.file.name) == (
        MediaStatus.FAILED,
        "SHA-256 does not match the webhook's",
        "",
    )
    assert stored_files(media_root) == []


@pytest.mark.parametrize(
    ("size", "status"),
    [(99, MediaStatus.DOWNLOADED), (100, MediaStatus.DOWNLOADED), (101, MediaStatus.TOO_LARGE)],
)
def test_the_kind_s_size_limit_is_kept_at_and_below_and_refused_above(
    settings: Settings,
    instance: Instance,
    fake_graph: FakeGraphAPI,
    media_root: Path,
    size: int,
    status: str,
) -> None:
    settings.WHATSAPP_MEDIA_MAX_BYTES_IMAGE = 100
    digest = fake_graph.set_media(MEDIA_ID, b"y" * size, "image/jpeg")
    media = download(pending_media(instance, sha256=digest))

    assert media.status == status
    assert len(stored_files(media_root)) == (1 if status == MediaStatus.DOWNLOADED else 0)
    if status == MediaStatus.TOO_LARGE:
        assert media.error == "larger than 100 bytes"


def test_a_graph_500_is_retried_then_downloaded(
    instance: Instance, fake_graph: FakeGraphAPI
) -> None:
    digest = fake_graph.set_media(MEDIA_ID, JPEG, "image/jpeg")
    fake_graph.respond_error(500, 2, "Service temporarily unavailable")

    media = download(pending_media(instance, sha256=digest))

    assert media.status == MediaStatus.DOWNLOADED
    assert [r.path for r in fake_graph.media_requests] == [
        f"/v23.0/{MEDIA_ID}",
        f"/v23.0/{MEDIA_ID}",
        f"/media-bytes/{MEDIA_ID}",
    ]


def test_a_graph_500_on_every_attempt_ends_failed(
    instance: Instance, fake_graph: FakeGraphAPI
) -> None:
    fake_graph.set_media(MEDIA_ID, JPEG, "image/jpeg")
    for _ in range(5):
        fake_graph.respond_error(500, 2, "Service temporarily unavailable")

    media = download(pending_media(instance, sha256="x"))

    assert (media.status, media.error) == (
        MediaStatus.FAILED,
        "Graph API: 2 Service temporarily unavailable",
    )
    assert len(fake_graph.media_requests) == 5


def test_an_expired_media_id_ends_expired(instance: Instance, fake_graph: FakeGraphAPI) -> None:
    media = download(pending_media(instance, sha256="x", media_id="900000000000099"))

    assert (media.status, media.error) == (
        MediaStatus.EXPIRED,
        "the media is no longer at WhatsApp",
    )


def test_nothing_is_downloaded_inside_the_webhook_request(
    monkeypatch: pytest.MonkeyPatch,
    settings: Settings,
    client: Client,
    instance: Instance,
    fake_graph: FakeGraphAPI,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    monkeypatch.setattr(media_tasks, "enqueue_media_download", ENQUEUE_MEDIA_DOWNLOAD)
    settings.WHATSAPP_APP_SECRET = APP_SECRET
    document = load_fixture("image")
    image = document["entry"][0]["changes"][0]["value"]["messages"][0]["image"]
    image["sha256"] = fake_graph.set_media(image["id"], JPEG, "image/jpeg")

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = signed_post(client, encode(document))

    assert response.status_code == 200
    assert fake_graph.media_requests == []
    assert MessageMedia.objects.get().status == MediaStatus.PENDING
    for callback in callbacks:
        callback()
    assert MessageMedia.objects.get().status == MediaStatus.DOWNLOADED


@pytest.mark.parametrize(
    "url",
    ["https://attacker.example.com/media", "http://lookaside.fbsbx.com/whatsapp_business/x"],
)
def test_a_media_url_off_meta_s_hosts_gets_no_token_and_fails(
    instance: Instance, fake_graph: FakeGraphAPI, url: str
) -> None:
    fake_graph.respond_json(200, {"url": url, "mime_type": "image/jpeg", "id": MEDIA_ID})

    media = download(pending_media(instance, sha256="x"))

    assert (media.status, media.error) == (
        MediaStatus.FAILED,
        "Graph API: URL de mídia fora da Meta",
    )
    assert [r.path for r in fake_graph.media_requests] == [f"/v23.0/{MEDIA_ID}"]
