"""A conversation's media in the workspace, in a real browser (Debian's chromium through
Playwright, `tests.helpers.browser`), under the site's Content-Security-Policy: Ana (Support) sees
the customer's photo as a thumbnail that loads through the media view, a voice note's player
(its file loads: the policy's media-src) with its transcript, the PDF as a named download, the
quoted message of a reply, a reaction and the buttons the bot offered; a photo still downloading
when she opened the page turns into its thumbnail without a reload.

A screenshot of the workspace at 1,366 by 900 goes to `BROWSER_SCREENSHOTS_DIR`.
"""

import io
import math
import struct
import wave
import zlib
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.core.files.base import ContentFile
from django.utils import timezone
from model_bakery import baker
from pytest_django import Settings
from pytest_django.live_server_helper import LiveServer

from conversations.models import (
    DeliveryStatus,
    Direction,
    Instance,
    MediaStatus,
    Message,
    MessageMedia,
    ReadingStatus,
    Session,
)
from tests.helpers.browser import browser_staff
from tests.support.test_workspace_browser import (
    SUPPORT_PERMISSIONS,
    WORKSPACE_VIEWPORT,
    open_workspace,
)
from whatsapp.interactive import Option, reply_buttons

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def served(settings: Settings, tmp_path: Path) -> None:
    settings.MEDIA_ROOT = str(tmp_path)
    # The live server speaks plain HTTP.
    settings.SESSION_COOKIE_SECURE = False
    settings.CSRF_COOKIE_SECURE = False


def png(width: int, height: int) -> bytes:
    """A real PNG: a blue-to-green gradient with a white label stripe."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    rows = b""
    for y in range(height):
        row = bytearray([0])
        for x in range(width):
            stripe = height // 3 <= y < height // 2
            row += bytes((250, 250, 250) if stripe else (30, 90 + 120 * x // width, 200))
        rows += bytes(row)
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def wav(seconds: float) -> bytes:
    """A real WAV file: a quiet 440 Hz tone."""
    out = io.BytesIO()
    with wave.open(out, "wb") as file:
        file.setnchannels(1)
        file.setsampwidth(2)
        file.setframerate(8000)
        frames = int(8000 * seconds)
        file.writeframes(
            b"".join(
                struct.pack("<h", int(3000 * math.sin(2 * math.pi * 440 * i / 8000)))
                for i in range(frames)
            )
        )
    return out.getvalue()


def media_message(
    session: Session, at: Any, kind: str, content: bytes | None, **fields: Any
) -> Message:
    message = Message.objects.create(
        session=session,
        direction=Direction.INBOUND,
        message_type=kind,
        content=fields.get("caption", ""),
        created_at=at,
    )
    media = MessageMedia(message=message, kind=kind, **fields)
    if content is not None:
        media.file.save("stored", ContentFile(content), save=False)
        media.status = MediaStatus.DOWNLOADED
        media.file_size = len(content)
    media.save()
    return message


def conversation_with_media(ana: Any) -> tuple[Session, MessageMedia]:
    """Maria sends a photo of her sample, a voice note, the lab's old report, then a second
    photo still downloading (returned)."""
    now = timezone.now()
    instance = baker.make(Instance, phone_number_id="100000000000009", name="Vale Analítico")
    session = baker.make(
        Session,
        instance=instance,
        state="HUMAN",
        customer_name="Maria Souza",
        customer_phone="5511912345678",
        assigned_to=ana,
        handoff_reason="model_requested",
        handed_off_at=now - timedelta(minutes=9),
        last_inbound_at=now - timedelta(minutes=1),
        last_message_at=now - timedelta(minutes=1),
    )
    start = now - timedelta(minutes=10)
    offer = Message.objects.create(
        session=session,
        direction=Direction.OUTBOUND,
        message_type="interactive",
        agent="qualificacao",
        content="Confirma a análise de potabilidade de duas amostras?",
        interactive=reply_buttons(
            "Confirma a análise de potabilidade de duas amostras?",
            [Option("confirm", "Confirmar"), Option("fix", "Corrigir")],
        ),
        wa_message_id="wamid.OFFER",
        delivery_status=DeliveryStatus.READ,
        reaction="👍",
        created_at=start,
    )
    Message.objects.create(
        session=session,
        direction=Direction.INBOUND,
        content="Antes, olha a foto da amostra",
        reply_to_wamid=offer.wa_message_id or "",
        created_at=start + timedelta(minutes=1),
    )
    media_message(
        session,
        start + timedelta(minutes=2),
        "image",
        png(320, 240),
        mime_type="image/png",
        caption="Rótulo do frasco 1",
        description="Um frasco de vidro com rótulo branco escrito à mão",
        reading_status=ReadingStatus.DONE,
    )
    media_message(
        session,
        start + timedelta(minutes=3),
        "audio",
        wav(2.0),
        mime_type="audio/wav",
        voice=True,
        transcript="Oi, é a Maria. As duas amostras são do mesmo poço, coletei hoje cedo.",
        reading_status=ReadingStatus.DONE,
    )
    media_message(
        session,
        start + timedelta(minutes=4),
        "document",
        b"%PDF-1.4\n%fake report\n" * 40,
        mime_type="application/pdf",
        filename="laudo-2025-poco.pdf",
    )
    pending = media_message(
        session,
        start + timedelta(minutes=5),
        "image",
        None,
        mime_type="image/png",
        status=MediaStatus.PENDING,
    )
    return session, MessageMedia.objects.get(message=pending)


def test_the_workspace_shows_the_customer_s_media(
    live_server: LiveServer, browser: Any, screenshots_dir: Path
) -> None:
    ana = browser_staff("ana", *SUPPORT_PERMISSIONS)
    ana.first_name = "Ana"
    ana.save()
    session, pending = conversation_with_media(ana)

    page = open_workspace(browser, live_server.url, "ana", session, WORKSPACE_VIEWPORT)
    blocked: list[str] = []
    page.on(
        "console",
        lambda message: (
            blocked.append(message.text) if "Content Security Policy" in message.text else None
        ),
    )

    thumb = page.locator(".bubble .media-image img.media-thumb").first
    thumb.scroll_into_view_if_needed()
    page.wait_for_function(
        "img => img.complete && img.naturalWidth > 0", arg=thumb.element_handle(), timeout=5000
    )
    assert thumb.evaluate("img => [img.naturalWidth, img.naturalHeight]") == [320, 240]
    link = page.locator(".bubble .media-image a.media-open").first
    assert (link.get_attribute("target"), link.get_attribute("rel")) == (
        "_blank",
        "noopener noreferrer",
    )
    assert page.locator(".bubble .media-image .media-description").first.inner_text() == (
        "Descrição automática: Um frasco de vidro com rótulo branco escrito à mão"
    )

    audio = page.locator(".bubble .media-audio audio")
    page.wait_for_function(
        "audio => audio.readyState >= 1", arg=audio.element_handle(), timeout=5000
    )
    assert round(audio.evaluate("audio => audio.duration")) == 2
    assert page.locator(".bubble .media-audio .media-transcript").inner_text() == (
        "Transcrição Oi, é a Maria. As duas amostras são do mesmo poço, coletei hoje cedo."
    )

    document = page.locator(".bubble .media-document a.media-download")
    assert document.inner_text().strip() == "laudo-2025-poco.pdf"
    assert document.get_attribute("href") == (
        f"/admin/conversations/message/{MessageMedia.objects.get(kind='document').message_id}"
        "/media/"
    )
    assert page.locator(".bubble .media-document .media-details").inner_text() == (
        "880\xa0bytes · application/pdf"
    )

    assert page.locator(".bubble .quote").inner_text() == (
        "Em resposta a: Confirma a análise de potabilidade de duas amostras?"
    )
    assert page.locator(".bubble .reaction").inner_text() == "👍"
    assert page.locator(".bubble ul.options li.chip").all_inner_texts() == [
        "Confirmar",
        "Corrigir",
    ]
    assert page.locator(".bubble .media[data-media-pending] .media-note").inner_text() == (
        "Baixando mídia…"
    )

    audio.evaluate("audio => audio.scrollIntoView({block: 'center'})")
    page.screenshot(path=str(screenshots_dir / "workspace-media-1366x900.png"))
    page.locator(".bubble .quote").evaluate("quote => quote.scrollIntoView({block: 'center'})")
    page.screenshot(path=str(screenshots_dir / "workspace-quote-1366x900.png"))

    # The download ends while the page is open: the next poll turns the note into the thumbnail.
    pending.file.save("late.png", ContentFile(png(200, 150)), save=False)
    pending.status = MediaStatus.DOWNLOADED
    pending.save()
    late = f'[data-message-id="{pending.message_id}"] img.media-thumb'
    page.wait_for_selector(late, timeout=12000)
    page.wait_for_function(
        "img => img.complete && img.naturalWidth > 0",
        arg=page.locator(late).element_handle(),
        timeout=5000,
    )
    assert page.locator(".media[data-media-pending]").count() == 0

    # A new media message and a quoted reply arrive while the page is open: the same blocks.
    media_message(
        session,
        timezone.now(),
        "document",
        b"%PDF-1.4\n",
        mime_type="application/pdf",
        filename="requisicao.pdf",
    )
    Message.objects.create(
        session=session,
        direction=Direction.INBOUND,
        content="Esse é o pedido",
        reply_to_wamid="wamid.OFFER",
    )
    page.wait_for_selector(".bubble .media-download:has-text('requisicao.pdf')", timeout=12000)
    page.wait_for_selector(".bubble:has-text('Esse é o pedido') .quote", timeout=12000)
    assert page.locator(".bubble:has-text('Esse é o pedido') .quote").inner_text() == (
        "Em resposta a: Confirma a análise de potabilidade de duas amostras?"
    )
    assert blocked == []
    page.evaluate("window.scrollTo(0, document.scrollingElement.scrollHeight)")
    page.screenshot(path=str(screenshots_dir / "workspace-media-downloaded-1366x900.png"))
