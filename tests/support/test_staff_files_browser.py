"""Attaching a file in the workspace's composer in a real browser (Playwright, Debian's chromium,
pytest-django's live server, the fake Graph API): "Anexar arquivo" picks the file, its name shows
beside the composer, the same button sends it with the text as the caption, the bubble arrives
by the live poll; a file that is not what WhatsApp takes is refused in the composer, in pt-BR,
with the attachment kept. Screenshots go to ``BROWSER_SCREENSHOTS_DIR``."""

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.utils import timezone
from pytest_django import Settings

from conversations.models import DeliveryStatus, Direction, Instance, Message, Session
from tests.fakes.graph_server import FakeGraphAPI
from tests.helpers.conversation_rows import ensure_staff_groups

PHONE_NUMBER_ID = "100000000000001"
CUSTOMER_PHONE = "5511987654321"
PASSWORD = "senha-de-teste-1"
JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + b"j" * 2048
HTML = b"<!DOCTYPE html><html><body><script>alert(1)</script></body></html>"

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def fake_graph(fake_graph: FakeGraphAPI, settings: Settings, tmp_path: Path) -> FakeGraphAPI:
    # The live server speaks plain HTTP; the files go to this test's folder.
    settings.SESSION_COOKIE_SECURE = False
    settings.CSRF_COOKIE_SECURE = False
    settings.MEDIA_ROOT = str(tmp_path / "media")
    return fake_graph


def with_the_team(user: User) -> Session:
    now = timezone.now()
    session = Session.objects.create(
        instance=Instance.objects.create(phone_number_id=PHONE_NUMBER_ID, name="Lab"),
        customer_phone=CUSTOMER_PHONE,
        customer_name="Maria Silva",
        state="HUMAN",
        handoff_reason="staff_takeover",
        assigned_to=user,
        handed_off_at=now - timedelta(minutes=5),
        last_inbound_at=now - timedelta(minutes=10),
        last_message_at=now - timedelta(minutes=9),
    )
    Message.objects.create(
        session=session,
        direction=Direction.INBOUND,
        content="Pode me mandar a foto da etiqueta que vocês colam na amostra?",
        wa_message_id="wamid.IN01",
        processed_at=now - timedelta(minutes=9),
        created_at=now - timedelta(minutes=10),
    )
    return session


def test_support_attaches_an_image_with_a_caption_and_a_wrong_file_is_refused(
    live_server: Any, browser: Any, fake_graph: FakeGraphAPI, screenshots_dir: Path
) -> None:
    ensure_staff_groups()
    ana = User.objects.create_user(username="ana", password=PASSWORD, is_staff=True)
    ana.groups.add(Group.objects.get(name="Support"))
    session = with_the_team(ana)
    path = f"/admin/conversations/session/{session.pk}/change/"
    page = browser.new_page(viewport={"width": 1366, "height": 900}, locale="pt-BR")
    page.goto(f"{live_server.url}/admin/login/?next={path}")
    page.fill("#id_username", "ana")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url(f"{live_server.url}{path}*")

    assert page.locator("#composer-attach").inner_text() == "Anexar arquivo"
    page.set_input_files(
        "#attach-file", files=[{"name": "etiqueta.jpg", "mimeType": "image/jpeg", "buffer": JPEG}]
    )
    assert page.locator("#composer-attachment").is_visible()
    assert page.locator("#attachment-name").inner_text() == "etiqueta.jpg (2 KB)"
    assert page.locator("#action-reply").inner_text() == "Enviar arquivo"
    assert page.locator("#reply-text").get_attribute("placeholder") == "Legenda (opcional)…"
    page.fill("#reply-text", "Esta é a etiqueta, Maria.")
    page.screenshot(path=screenshots_dir / "files-1-attached.png", full_page=True)

    page.click("#action-reply")
    page.wait_for_selector("li.bubble.staff[data-kind=image]")

    [upload] = fake_graph.uploads
    assert (upload.filename, upload.content_type, upload.content) == (
        "etiqueta.jpg",
        "image/jpeg",
        JPEG,
    )
    [send] = fake_graph.sends
    assert send.json["image"] == {"id": "800000000000001", "caption": "Esta é a etiqueta, Maria."}
    bubble = page.locator("li.bubble.staff[data-kind=image]")
    assert bubble.locator(".media-caption").inner_text() == "Esta é a etiqueta, Maria."
    assert "enviada" in bubble.locator(".delivery").inner_text()
    message_id = Message.objects.get(session=session, message_type="image").pk
    media_link = f"/admin/conversations/message/{message_id}/media/"
    assert bubble.locator("a.media-open").get_attribute("href") == media_link  # by the poll
    assert page.locator("#composer-attachment").is_hidden()
    assert page.locator("#action-reply").inner_text() == "Enviar resposta"
    assert page.locator("#reply-text").input_value() == ""

    page.set_input_files(
        "#attach-file",
        files=[{"name": "laudo.pdf", "mimeType": "application/pdf", "buffer": HTML}],
    )
    page.click("#action-reply")
    page.wait_for_selector("#composer-error:not([hidden])")
    assert page.locator("#composer-error").inner_text() == (
        "Este arquivo não pode ser enviado: o conteúdo não é uma imagem JPEG ou PNG nem um "
        "documento PDF, Word, Excel ou PowerPoint (diga o nome o que disser)."
    )
    assert page.locator("#attachment-name").inner_text() == "laudo.pdf (1 KB)"
    page.screenshot(path=screenshots_dir / "files-2-sent-and-refused.png", full_page=True)

    page.reload()
    link = page.locator("li.bubble.staff[data-kind=image] a.media-open")
    assert link.get_attribute("href") == media_link
    message = Message.objects.get(session=session, direction=Direction.OUTBOUND)
    assert (message.delivery_status, message.media.filename, message.media.media_id) == (
        DeliveryStatus.SENT,
        "etiqueta.jpg",
        "800000000000001",
    )
    assert len(fake_graph.uploads) == 1
