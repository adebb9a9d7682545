"""The conversation page's live updates in a real browser: two colleagues have the same
conversation open in two browser contexts; a customer message posted to the WhatsApp webhook
appears in both pages without a reload, within 3 s, and so does the delivery of a colleague's
reply; each page says who else is there; the
composer keeps its text and the window its scroll position.

Playwright drives Debian's chromium (`tests.helpers.browser`); the time the message took to appear
in each page is printed. A screenshot of each page goes to `BROWSER_SCREENSHOTS_DIR`.
"""

import json
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.utils import timezone
from model_bakery import baker
from pytest_django.live_server_helper import LiveServer

from conversations.models import DeliveryStatus, Direction, Instance, Message, Session
from tests.helpers.browser import PASSWORD, VIEWPORT, browser_staff
from tests.helpers.webhooks import PHONE_NUMBER_ID, post_delivery, text_delivery

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

SUPPORT_PERMISSIONS = (
    "conversations.view_session",
    "conversations.view_personal_data",
    "conversations.attend_session",
)
# Both pages poll every 2 s: a message waits at most one interval and a request.
APPEAR_WITHIN_SECONDS = 3.0


def status_delivery(wamid: str) -> bytes:
    """Meta's "delivered" status webhook for `wamid`, timestamped now."""
    status = {
        "id": wamid,
        "status": "delivered",
        "timestamp": str(int(time.time())),
        "recipient_id": "5511912345678",
    }
    value = {
        "messaging_product": "whatsapp",
        "metadata": {"display_phone_number": "5511999990000", "phone_number_id": PHONE_NUMBER_ID},
        "statuses": [status],
    }
    document = {
        "object": "whatsapp_business_account",
        "entry": [{"id": "200000000000001", "changes": [{"value": value, "field": "messages"}]}],
    }
    return json.dumps(document).encode()


def open_conversation(browser: Any, base_url: str, username: str, session: Session) -> Any:
    page = browser.new_context(viewport=VIEWPORT, locale="pt-BR").new_page()
    change_url = f"/admin/conversations/session/{session.pk}/change/"
    page.goto(f"{base_url}/admin/login/?next={change_url}")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url(f"**{change_url}")
    return page


def test_a_customer_message_appears_for_both_colleagues_without_a_reload(
    live_server: LiveServer, browser: Any, screenshots_dir: Path
) -> None:
    ana = browser_staff("ana", *SUPPORT_PERMISSIONS)
    bruno = browser_staff("bruno", *SUPPORT_PERMISSIONS)
    for user, first_name in ((ana, "Ana"), (bruno, "Bruno")):
        user.first_name = first_name
        user.save()
    instance = baker.make(
        Instance, phone_number_id=PHONE_NUMBER_ID, name="Vale Analítico", display_phone="5511400"
    )
    at = timezone.now() - timedelta(minutes=5)
    session = baker.make(
        Session,
        instance=instance,
        state="HUMAN",
        customer_name="Maria Souza",
        customer_phone="5511912345678",
        assigned_to=bruno,
        handoff_reason="model_requested",
        handed_off_at=at,
        last_inbound_at=at,
        last_message_at=at,
    )
    Message.objects.create(
        session=session, direction=Direction.INBOUND, content="Quero falar com uma pessoa"
    )
    reply = Message.objects.create(
        session=session,
        direction=Direction.OUTBOUND,
        content="Olá, Maria! Sou o Bruno.",
        staff_user=bruno,
        wa_message_id="wamid.LIVEOUT",
        delivery_status=DeliveryStatus.SENT,
    )
    ana_page = open_conversation(browser, live_server.url, "ana", session)
    bruno_page = open_conversation(browser, live_server.url, "bruno", session)
    ana_page.fill("#reply-text", "Olá, Maria! Estou ")
    ana_page.evaluate("window.__notReloaded = true; window.scrollTo(0, 120)")
    bruno_page.evaluate("window.__notReloaded = true")

    # Each page's first poll records its reader; the other's next poll names them.
    ana_page.wait_for_selector("#session-presence:not([hidden])", timeout=5000)
    bruno_page.wait_for_selector("#session-presence:not([hidden])", timeout=5000)
    assert ana_page.locator("#session-presence").inner_text() == (
        "Bruno também está nesta conversa"
    )
    assert bruno_page.locator("#session-presence").inner_text() == "Ana também está nesta conversa"
    assert ana_page.locator("#live-state").inner_text() == "Com humano · atribuída a Bruno"

    port = int(live_server.url.rsplit(":", 1)[1])
    secret = settings.WHATSAPP_APP_SECRET
    sent = time.monotonic()
    status = post_delivery(
        port,
        text_delivery(
            phone="5511912345678", wamid="wamid.LIVE1", text="Chegou a amostra?", name="Maria"
        ),
        secret=secret,
    )
    assert status == 200
    appeared = {}
    for name, page in (("ana", ana_page), ("bruno", bruno_page)):
        page.wait_for_selector(
            "#transcript li.bubble.customer:has-text('Chegou a amostra?')",
            timeout=APPEAR_WITHIN_SECONDS * 1000,
        )
        appeared[name] = time.monotonic() - sent
    print(
        "\nthe customer's message appeared after "
        + ", ".join(f"{name} {seconds:.2f} s" for name, seconds in appeared.items())
    )

    assert max(appeared.values()) <= APPEAR_WITHIN_SECONDS

    # Bruno's reply is delivered: its bubble says so in both pages.
    sent = time.monotonic()
    assert post_delivery(port, status_delivery("wamid.LIVEOUT"), secret=secret) == 200
    for name, page in (("ana", ana_page), ("bruno", bruno_page)):
        page.wait_for_selector(
            f"[data-message-id='{reply.pk}'] .delivery:has-text('entregue')",
            timeout=APPEAR_WITHIN_SECONDS * 1000,
        )
        appeared[name] = time.monotonic() - sent
    print(
        "the delivery status appeared after "
        + ", ".join(f"{name} {seconds:.2f} s" for name, seconds in appeared.items())
    )
    assert max(appeared.values()) <= APPEAR_WITHIN_SECONDS
    for page in (ana_page, bruno_page):
        assert page.locator("#transcript li").all_inner_texts()[-1].split("\n")[0] == (
            "Maria Souza"
        )
        assert page.locator("#transcript li .text").all_inner_texts() == [
            "Quero falar com uma pessoa",
            "Olá, Maria! Sou o Bruno.",
            "Chegou a amostra?",
        ]
        assert page.evaluate("window.__notReloaded") is True
    assert ana_page.input_value("#reply-text") == "Olá, Maria! Estou "
    assert ana_page.evaluate("window.scrollY") == 120
    ana_page.screenshot(path=str(screenshots_dir / "live-ana.png"), full_page=True)
    bruno_page.screenshot(path=str(screenshots_dir / "live-bruno.png"), full_page=True)


def test_a_poll_after_the_login_expired_leaves_the_page_as_it_is(
    live_server: LiveServer, browser: Any
) -> None:
    browser_staff("ana", *SUPPORT_PERMISSIONS)
    session = baker.make(Session, instance=baker.make(Instance), state="HUMAN")
    Message.objects.create(session=session, direction=Direction.INBOUND, content="Oi")
    page = open_conversation(browser, live_server.url, "ana", session)
    assert page.evaluate("window.sessionLivePoll()") in (True, "unchanged")

    page.context.clear_cookies()
    Message.objects.create(session=session, direction=Direction.INBOUND, content="Alguém aí?")

    assert page.evaluate("window.sessionLivePoll()") is False
    assert page.locator("#transcript li .text").all_inner_texts() == ["Oi"]


def test_a_bot_bubble_that_arrives_live_links_to_save_it_as_a_test_case(
    live_server: LiveServer, browser: Any, screenshots_dir: Path
) -> None:
    browser_staff(
        "bia",
        "conversations.view_session",
        "conversations.view_llmcall",
        "governance.add_prompttestcase",
    )
    session = baker.make(
        Session, instance=baker.make(Instance), state="TRIAGE", customer_phone="5511912345678"
    )
    Message.objects.create(session=session, direction=Direction.INBOUND, content="Oi")
    page = open_conversation(browser, live_server.url, "bia", session)
    page.evaluate("window.__notReloaded = true")
    assert page.locator("a.save-case").count() == 0

    bot = Message.objects.create(
        session=session,
        direction=Direction.OUTBOUND,
        content="Olá! Como posso ajudar?",
        turn_id="6f1c1a52-8f0e-4a8e-9d1e-0c5b9c1f2a10",
    )
    link = page.locator(f'li[data-message-id="{bot.pk}"] a.save-case')
    link.wait_for(state="attached", timeout=APPEAR_WITHIN_SECONDS * 1000)

    assert page.evaluate("window.__notReloaded") is True
    assert link.text_content() == "Guardar como caso de teste"
    assert link.get_attribute("href") == (
        f"/admin/governance/prompttestcase/from-message/{bot.pk}/"
    )
