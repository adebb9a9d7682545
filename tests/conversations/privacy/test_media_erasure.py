"""Anonymising a conversation deletes its media files from the storage, once it commits, and
empties what described them."""

from datetime import timedelta
from pathlib import Path

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.utils import timezone
from pytest_django import DjangoCaptureOnCommitCallbacks, Settings

from conversations.models import Instance, MediaStatus, Message, MessageMedia, Session
from conversations.privacy.retention import closed_sessions_anonymise, session_anonymise
from tests import baker_recipes as recipes

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def media_root(settings: Settings, tmp_path: Path) -> Path:
    settings.MEDIA_ROOT = str(tmp_path)
    return tmp_path


def media_of(session: Session, **fields: object) -> MessageMedia:
    message = Message.objects.create(session=session, direction="INBOUND", message_type="image")
    media: MessageMedia = MessageMedia.objects.create(message=message, **fields)
    return media


def test_anonymising_deletes_the_files_after_commit_and_empties_the_descriptions(
    instance: Instance, django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks
) -> None:
    now = timezone.now()
    session: Session = recipes.session.make(
        instance=instance, state="CLOSED", closed_at=now - timedelta(days=400)
    )
    photo = media_of(
        session,
        kind="image",
        media_id="900000000000001",
        mime_type="image/jpeg",
        sha256="aGFzaA==",
        caption="Foto do laudo da Maria",
        status=MediaStatus.DOWNLOADED,
        file_size=4,
        description="Laudo com o nome Maria Silva",
    )
    photo.file.save("laudo.jpg", ContentFile(b"\xff\xd8\xff\xe0"), save=True)
    stored_name = str(photo.file.name)
    place = media_of(
        session,
        kind="location",
        status=MediaStatus.NOT_APPLICABLE,
        data={"latitude": -23.5, "longitude": -46.6, "name": "Casa da Maria", "address": ""},
    )
    voice = media_of(
        session,
        kind="audio",
        status=MediaStatus.DOWNLOADED,
        transcript="Meu CPF é 529.982.247-25",
        reading_status="done",
    )
    assert stored_name.startswith("whatsapp-media/")
    assert default_storage.exists(stored_name)

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        assert session_anonymise(session.pk, now=now) is True
    assert default_storage.exists(stored_name)  # nothing deleted before the commit

    for callback in callbacks:
        callback()

    assert not default_storage.exists(stored_name)
    photo.refresh_from_db()
    place.refresh_from_db()
    assert (
        photo.file.name,
        photo.caption,
        photo.media_id,
        photo.sha256,
        photo.kind,
        photo.mime_type,
        photo.file_size,
        photo.status,
    ) == ("", "", "", "", "image", "image/jpeg", 4, MediaStatus.DOWNLOADED)
    assert (place.data, place.kind) == ({}, "location")
    voice.refresh_from_db()
    # Masked as the messages' texts are: the CPF by its pattern (the session knows no name).
    assert (photo.description, voice.transcript, voice.reading_status) == (
        "Laudo com o nome Maria Silva",
        "Meu CPF é ***.***.***-**",
        "done",
    )


def test_a_conversation_without_media_files_registers_no_deletion(
    instance: Instance, django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks
) -> None:
    now = timezone.now()
    session: Session = recipes.session.make(instance=instance, state="CLOSED", closed_at=now)
    media_of(session, kind="contacts", status=MediaStatus.NOT_APPLICABLE, data={"contacts": []})

    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        session_anonymise(session.pk, now=now)

    assert callbacks == []


def test_the_retention_run_deletes_the_files_of_expired_conversations_only(
    instance: Instance,
    settings: Settings,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    settings.RETENTION_DAYS = 365
    now = timezone.now()
    expired: Session = recipes.session.make(
        instance=instance,
        customer_name="Maria Souza",
        state="CLOSED",
        closed_at=now - timedelta(days=365, seconds=1),
    )
    kept: Session = recipes.session.make(
        instance=instance, state="CLOSED", closed_at=now - timedelta(days=364)
    )
    voice = media_of(
        expired,
        kind="audio",
        status=MediaStatus.DOWNLOADED,
        transcript="Aqui é a Maria Souza, meu CPF é 529.982.247-25",
        description="",
        reading_status="done",
    )
    voice.file.save("voz.ogg", ContentFile(b"OggS"), save=True)
    other = media_of(kept, kind="image", status=MediaStatus.DOWNLOADED, caption="Rótulo")
    other.file.save("rotulo.jpg", ContentFile(b"\xff\xd8"), save=True)
    expired_name, kept_name = str(voice.file.name), str(other.file.name)

    with django_capture_on_commit_callbacks(execute=True):
        assert closed_sessions_anonymise(now=now) == 1

    voice.refresh_from_db()
    other.refresh_from_db()
    assert (default_storage.exists(expired_name), default_storage.exists(kept_name)) == (
        False,
        True,
    )
    assert (voice.file.name, voice.transcript, voice.status) == (
        "",
        "Aqui é a M*** S***, meu CPF é ***.***.***-**",
        MediaStatus.DOWNLOADED,
    )
    assert (other.file.name, other.caption) == (kept_name, "Rótulo")


def test_anonymising_masks_an_image_s_description_and_keeps_an_unread_media_as_it_is(
    instance: Instance, django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks
) -> None:
    now = timezone.now()
    session: Session = recipes.session.make(
        instance=instance, customer_name="Maria Souza", state="CLOSED", closed_at=now
    )
    photo = media_of(
        session,
        kind="image",
        status=MediaStatus.EXPIRED,
        description="Um documento com o nome Maria Souza",
    )
    unread = media_of(session, kind="video", status=MediaStatus.TOO_LARGE, mime_type="video/mp4")

    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        session_anonymise(session.pk, now=now)

    photo.refresh_from_db()
    unread.refresh_from_db()
    assert photo.description == "Um documento com o nome M*** S***"
    assert (unread.transcript, unread.description, unread.mime_type, unread.status) == (
        "",
        "",
        "video/mp4",
        MediaStatus.TOO_LARGE,
    )
    assert callbacks == []  # no file to delete
