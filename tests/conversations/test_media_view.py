"""The staff-only page of a message's media file (GET /admin/conversations/message/<id>/media/):
who may read it, and how each type is served."""

from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.files.base import ContentFile
from django.test import Client
from pytest_django import Settings

from conversations.models import Instance, MediaStatus, Message, MessageMedia
from tests import baker_recipes as recipes
from tests.helpers.staff import logged_in, staff_member

pytestmark = pytest.mark.django_db

CONTENT = b"\x89PNG\r\n\x1a\nfake"


@pytest.fixture(autouse=True)
def media_root(settings: Settings, tmp_path: Path) -> Path:
    settings.MEDIA_ROOT = str(tmp_path)
    return tmp_path


def downloaded(
    instance: Instance, kind: str, mime_type: str, *, filename: str = "", status: str = "downloaded"
) -> MessageMedia:
    session = recipes.session.make(instance=instance)
    message = Message.objects.create(session=session, direction="INBOUND", message_type=kind)
    media = MessageMedia(
        message=message, kind=kind, mime_type=mime_type, filename=filename, status=status
    )
    media.file.save("stored.bin", ContentFile(CONTENT), save=False)
    media.save()
    return media


def url(media: MessageMedia) -> str:
    return f"/admin/conversations/message/{media.message_id}/media/"


def test_anonymous_visitors_are_sent_to_the_login(client: Client, instance: Instance) -> None:
    media = downloaded(instance, "image", "image/png")

    response = client.get(url(media))

    assert response.status_code == 302
    assert "/login/" in response["Location"]


@pytest.mark.parametrize(
    ("who", "status"),
    [("no permission", 403), ("prompt editor", 403), ("support", 200), ("superuser", 200)],
)
def test_only_staff_who_read_personal_data_get_the_file(
    instance: Instance,
    admin_client: Client,
    support_client: Client,
    prompt_editor_client: Client,
    who: str,
    status: int,
) -> None:
    media = downloaded(instance, "image", "image/png")
    clients = {
        "no permission": logged_in(staff_member()),
        "prompt editor": prompt_editor_client,
        "support": support_client,
        "superuser": admin_client,
    }

    response = clients[who].get(url(media))

    assert response.status_code == status


def test_a_staff_member_with_only_view_session_is_refused(instance: Instance) -> None:
    user: User = staff_member(permissions=("conversations.view_session",))
    media = downloaded(instance, "image", "image/png")

    assert logged_in(user).get(url(media)).status_code == 403


@pytest.mark.parametrize(
    ("kind", "mime_type", "filename", "content_type", "disposition"),
    [
        ("image", "image/png", "", "image/png", 'inline; filename="image-{id}.png"'),
        ("audio", "audio/ogg; codecs=opus", "", "audio/ogg", 'inline; filename="audio-{id}.oga"'),
        ("video", "video/mp4", "", "video/mp4", 'inline; filename="video-{id}.mp4"'),
        (
            "document",
            "application/pdf",
            "pedido.pdf",
            "application/pdf",
            'attachment; filename="pedido.pdf"',
        ),
        (
            "document",
            "text/html",
            "pagina.html",
            "application/octet-stream",
            'attachment; filename="pagina.html"',
        ),
        (
            "image",
            "image/svg+xml",
            "",
            "application/octet-stream",
            'attachment; filename="image-{id}.svg"',
        ),
    ],
)
def test_each_type_is_served_safely(
    instance: Instance,
    support_client: Client,
    kind: str,
    mime_type: str,
    filename: str,
    content_type: str,
    disposition: str,
) -> None:
    media = downloaded(instance, kind, mime_type, filename=filename)

    response = support_client.get(url(media))

    assert response.status_code == 200
    assert b"".join(response.streaming_content) == CONTENT  # type: ignore[attr-defined]
    assert response["Content-Type"] == content_type
    assert response["Content-Disposition"] == disposition.format(id=media.message_id)
    assert response["X-Content-Type-Options"] == "nosniff"


def test_missing_messages_media_and_files_are_404(
    instance: Instance, support_client: Client
) -> None:
    pending = downloaded(instance, "image", "image/png", status=MediaStatus.PENDING)
    session = recipes.session.make(instance=instance)
    text = Message.objects.create(session=session, direction="INBOUND", content="Oi")

    assert support_client.get("/admin/conversations/message/999999/media/").status_code == 404
    assert support_client.get(f"/admin/conversations/message/{text.pk}/media/").status_code == 404
    assert support_client.get(url(pending)).status_code == 404


def test_post_is_refused(instance: Instance, support_client: Client) -> None:
    media = downloaded(instance, "image", "image/png")

    assert support_client.post(url(media)).status_code == 403
