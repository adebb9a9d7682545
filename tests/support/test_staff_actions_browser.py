"""The conversation page's staff actions in a real browser: Playwright drives Debian's chromium
(never a downloaded browser) against pytest-django's live server, with a fake Graph API on 127.0.0.1
receiving what WhatsApp would.

As Support: log in → open a bot conversation → take over → reply (sent with fetch; the fake
Graph API receives the text; a signed "delivered" status webhook marks it) → give back and close,
each confirmed in the page's dialog. As a Prompt editor:
no action buttons. Screenshots of the page go to ``BROWSER_SCREENSHOTS_DIR`` (default: a
temporary directory; `.ci/run` sets it and prints it). Skipped, with the reason, when
/usr/bin/chromium is missing (`.ci/run` installs it with apt).
"""

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.contrib.auth.models import Group, User
from django.utils import timezone
from pytest_django import Settings

from conversations.models import DeliveryStatus, Direction, Instance, Message, Session
from tests.fakes.graph_server import FakeGraphAPI
from tests.helpers.conversation_rows import ensure_staff_groups
from whatsapp.signature import compute_signature

PHONE_NUMBER_ID = "100000000000001"
CUSTOMER_PHONE = "5511987654321"
APP_SECRET = "test-app-secret"  # config/settings_test.py
PASSWORD = "senha-de-teste-1"

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def fake_graph(fake_graph: FakeGraphAPI, settings: Settings) -> FakeGraphAPI:
    # The live server speaks plain HTTP.
    settings.SESSION_COOKIE_SECURE = False
    settings.CSRF_COOKIE_SECURE = False
    return fake_graph


def staff(group: str, username: str) -> User:
    ensure_staff_groups()
    user = User.objects.create_user(username=username, password=PASSWORD, is_staff=True)
    user.groups.add(Group.objects.get(name=group))
    return user


def bot_conversation() -> Session:
    now = timezone.now()
    session = Session.objects.create(
        instance=Instance.objects.create(phone_number_id=PHONE_NUMBER_ID, name="Lab"),
        customer_phone=CUSTOMER_PHONE,
        customer_name="Maria Silva",
        state="QUALIFYING",
        last_inbound_at=now - timedelta(minutes=10),
        last_message_at=now - timedelta(minutes=9),
    )
    Message.objects.create(
        session=session,
        direction=Direction.INBOUND,
        content="Olá, quero analisar a água do meu poço",
        wa_message_id="wamid.IN01",
        processed_at=now - timedelta(minutes=9),
        created_at=now - timedelta(minutes=10),
    )
    Message.objects.create(
        session=session,
        direction=Direction.OUTBOUND,
        agent="qualificacao",
        content="Claro! Quantas amostras?",
        delivery_status=DeliveryStatus.READ,
        wa_message_id="wamid.OUT00",
        created_at=now - timedelta(minutes=9),
    )
    return session


def log_in(page: Any, base_url: str, username: str, next_url: str) -> None:
    page.goto(f"{base_url}/admin/login/?next={next_url}")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url(f"{base_url}{next_url}*")


def delivered_webhook(base_url: str, wamid: str) -> int:
    status = {
        "id": wamid,
        "status": "delivered",
        "timestamp": str(int(timezone.now().timestamp())),
        "recipient_id": CUSTOMER_PHONE,
    }
    body = json.dumps(
        {
            "object": "whatsapp_business_account",
            "entry": [
                {
                    "id": "200000000000001",
                    "changes": [
                        {
                            "field": "messages",
                            "value": {
                                "messaging_product": "whatsapp",
                                "metadata": {
                                    "display_phone_number": "5511999990000",
                                    "phone_number_id": PHONE_NUMBER_ID,
                                },
                                "statuses": [status],
                            },
                        }
                    ],
                }
            ],
        }
    ).encode()
    response = httpx.post(
        f"{base_url}/webhooks/whatsapp/",
        content=body,
        headers={
            "Content-Type": "application/json",
            "X-Hub-Signature-256": compute_signature(body=body, secret=APP_SECRET),
        },
    )
    return response.status_code


def test_support_takes_over_replies_gives_back_and_closes(
    live_server: Any, browser: Any, fake_graph: FakeGraphAPI, screenshots_dir: Path
) -> None:
    session = bot_conversation()
    staff("Support", "ana")
    path = f"/admin/conversations/session/{session.pk}/change/"
    page = browser.new_page(viewport={"width": 1366, "height": 900}, locale="pt-BR")

    log_in(page, live_server.url, "ana", path)
    page.screenshot(path=screenshots_dir / "support-1-bot-conversation.png", full_page=True)
    assert page.locator("#action-reply").count() == 0

    page.click("#action-take-over")
    page.wait_for_selector("#reply-form")
    assert page.locator("ul.messagelist li.success").inner_text() == "Você assumiu a conversa."
    assert page.locator("#assigned-to").inner_text() == "Atribuída a ana"
    assert page.locator("#window-state").inner_text().startswith("janela aberta até ")

    page.fill("#reply-text", "Olá, Maria! Sou a Ana, da equipe. Vou te ajudar.")
    page.click("#action-reply")
    page.wait_for_selector("li.bubble.staff")
    [send] = fake_graph.sends
    assert send.json["to"] == CUSTOMER_PHONE
    assert send.json["text"] == {"body": "Olá, Maria! Sou a Ana, da equipe. Vou te ajudar."}
    bubble = page.locator("li.bubble.staff")
    assert bubble.locator(".who").inner_text() == "Equipe · ana"
    assert "enviada" in bubble.locator(".delivery").inner_text()

    assert delivered_webhook(live_server.url, "wamid.FAKE0001") == 200
    page.reload()
    assert page.locator("li.bubble.staff .delivery").inner_text().startswith("entregue")
    page.screenshot(path=screenshots_dir / "support-2-replied-and-delivered.png", full_page=True)

    assert page.locator("#give-back-state").input_value() == "QUALIFYING"
    page.click("#action-give-back")
    assert page.locator("#confirm-text").inner_text() == (
        "Devolver a conversa ao robô (Qualificação)? O motivo e o resumo da transferência "
        "continuam no histórico."
    )
    page.click("#confirm-ok")
    page.wait_for_selector("#action-take-over")
    assert (
        page.locator("ul.messagelist li.success").inner_text()
        == "Devolveu a conversa ao robô (Qualificação)."
    )
    assert (
        "Ana devolveu a conversa ao robô (Qualificação)."
        in page.locator("#transcript").inner_text()
    )

    page.click("#action-close")
    page.click("#confirm-ok")
    page.wait_for_selector("ul.messagelist li.success")
    assert page.locator("ul.messagelist li.success").inner_text() == "Conversa encerrada."
    assert page.locator("#staff-actions button").count() == 0
    page.screenshot(path=screenshots_dir / "support-3-closed.png", full_page=True)

    session.refresh_from_db()
    assert (session.state, session.assigned_to_id) == ("CLOSED", None)
    reply = Message.objects.get(
        session=session, direction=Direction.OUTBOUND, staff_user__username="ana"
    )
    assert (reply.delivery_status, reply.wa_message_id) == (
        DeliveryStatus.DELIVERED,
        "wamid.FAKE0001",
    )


def test_a_prompt_editor_sees_no_action_buttons(
    live_server: Any, browser: Any, fake_graph: FakeGraphAPI, screenshots_dir: Path
) -> None:
    session = bot_conversation()
    staff("Prompt editors", "carla")
    path = f"/admin/conversations/session/{session.pk}/change/"
    page = browser.new_page(viewport={"width": 1366, "height": 900}, locale="pt-BR")

    log_in(page, live_server.url, "carla", path)

    assert page.locator("#transcript li.bubble").count() == 2
    assert page.locator("#staff-actions").count() == 0
    assert page.locator("form[action*='/take-over/']").count() == 0
    page.screenshot(path=screenshots_dir / "prompt-editor-conversation.png", full_page=True)
