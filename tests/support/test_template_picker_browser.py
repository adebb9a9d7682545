"""The closed window in a real browser (Debian's chromium, pytest-django's live server, the fake
Graph API on 127.0.0.1): a superuser syncs the approved WhatsApp message templates with the
list's button; Support, on a conversation whose window closed, chooses one, fills in its
parameters, reads the preview and sends it; the fake Graph API receives the right components.
Screenshots go to ``BROWSER_SCREENSHOTS_DIR``."""

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.utils import timezone
from pytest_django import Settings

from agents.states import SessionState
from conversations.models import Direction, Instance, Message, MessageTemplate, Session
from tests.fakes.graph_server import FakeGraphAPI
from tests.helpers.browser import PASSWORD
from tests.helpers.conversation_rows import ensure_staff_groups

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

WABA = "102290129340398"
VIEWPORT = {"width": 1366, "height": 900}


@pytest.fixture
def fake_graph(fake_graph: FakeGraphAPI, settings: Settings) -> FakeGraphAPI:
    # The live server speaks plain HTTP.
    settings.SESSION_COOKIE_SECURE = False
    settings.CSRF_COOKIE_SECURE = False
    fake_graph.set_templates(
        WABA,
        [
            {
                "name": "resultado_pronto",
                "language": "pt_BR",
                "status": "APPROVED",
                "category": "UTILITY",
                "components": [
                    {"type": "HEADER", "format": "TEXT", "text": "Laboratório Central"},
                    {
                        "type": "BODY",
                        "text": "Olá, {{1}}! Seu exame de {{2}} está pronto.",
                        "example": {"body_text": [["Maria", "sangue"]]},
                    },
                    {"type": "FOOTER", "text": "Responda para falar conosco"},
                ],
                "id": "1001",
            },
            {
                "name": "lembrete_coleta",
                "language": "pt_BR",
                "status": "APPROVED",
                "category": "UTILITY",
                "components": [{"type": "BODY", "text": "Sua coleta é amanhã às 8h."}],
                "id": "1002",
            },
            {
                "name": "em_analise",
                "language": "pt_BR",
                "status": "PENDING",
                "category": "MARKETING",
                "components": [{"type": "BODY", "text": "Promoção!"}],
                "id": "1003",
            },
        ],
        page_size=1,
    )
    return fake_graph


def closed_window_conversation(user: User) -> Session:
    now = timezone.now()
    session = Session.objects.create(
        instance=Instance.objects.create(
            phone_number_id="100000000000001", name="Lab Centro", waba_id=WABA
        ),
        customer_phone="5511987654321",
        customer_name="Maria Silva",
        state=SessionState.HUMAN.value,
        assigned_to=user,
        handed_off_at=now - timedelta(days=2),
        last_inbound_at=now - timedelta(days=2),
        last_message_at=now - timedelta(days=2),
    )
    Message.objects.create(
        session=session,
        direction=Direction.INBOUND,
        content="Meu exame já saiu?",
        wa_message_id="wamid.IN01",
        processed_at=now - timedelta(days=2),
        created_at=now - timedelta(days=2),
    )
    return session


def log_in(page: Any, base_url: str, username: str, next_url: str) -> None:
    page.goto(f"{base_url}/admin/login/?next={next_url}")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url(f"{base_url}{next_url}*")


def test_a_closed_window_offers_the_synced_templates_and_sends_one(
    live_server: Any, browser: Any, fake_graph: FakeGraphAPI, screenshots_dir: Path
) -> None:
    User.objects.create_superuser("root", password=PASSWORD)
    ensure_staff_groups()
    ana = User.objects.create_user("ana", password=PASSWORD, is_staff=True)
    ana.groups.add(Group.objects.get(name="Support"))
    session = closed_window_conversation(ana)

    admin = browser.new_context(viewport=VIEWPORT, locale="pt-BR").new_page()
    log_in(admin, live_server.url, "root", "/admin/conversations/messagetemplate/")
    admin.click("#template-sync")
    admin.wait_for_selector("ul.messagelist li.success")
    assert admin.locator("ul.messagelist li.success").inner_text() == (
        "Modelos de mensagem do WhatsApp sincronizados: 2 novos, 0 atualizados, 0 desativados."
    )
    admin.screenshot(path=screenshots_dir / "templates-synced.png", full_page=True)
    assert len(fake_graph.listings) == 3  # one template a page
    assert sorted(MessageTemplate.objects.values_list("name", flat=True)) == [
        "lembrete_coleta",
        "resultado_pronto",
    ]

    page = browser.new_context(viewport=VIEWPORT, locale="pt-BR").new_page()
    path = f"/admin/conversations/session/{session.pk}/change/"
    log_in(page, live_server.url, "ana", path)
    # The composer's text is for an internal note: its reply button cannot send.
    assert page.locator("#action-reply").is_disabled()
    picker = page.locator("#template-picker")
    assert picker.is_visible()
    options = picker.locator("#template-picker-choice option").all_inner_texts()
    assert options == [
        "Escolha um modelo de mensagem do WhatsApp",
        "lembrete_coleta (pt_BR · utilidade)",
        "resultado_pronto (pt_BR · utilidade)",
    ]
    assert page.locator("#template-picker-send").is_disabled()

    template = MessageTemplate.objects.get(name="resultado_pronto")
    page.select_option("#template-picker-choice", str(template.pk))
    fields = page.locator(f'fieldset[data-template="{template.pk}"] input')
    assert fields.count() == 2
    assert page.locator("fieldset.template-picker-parameters:visible").count() == 1
    assert fields.nth(0).get_attribute("placeholder") == "ex.: Maria"
    preview = page.locator("#template-picker-preview-text")
    assert preview.inner_text() == (
        "Laboratório Central\nOlá, {{1}}! Seu exame de {{2}} está pronto.\n"
        "Responda para falar conosco"
    )

    page.click("#template-picker-send")
    assert page.locator("#template-picker-error").is_visible()
    assert fake_graph.sends == []

    fields.nth(0).fill("Maria")
    assert not page.locator("#template-picker-error").is_visible()
    fields.nth(1).fill("hemograma")
    assert preview.inner_text() == (
        "Laboratório Central\nOlá, Maria! Seu exame de hemograma está pronto.\n"
        "Responda para falar conosco"
    )
    page.screenshot(path=screenshots_dir / "template-picker-filled.png", full_page=True)

    page.click("#template-picker-send")
    page.wait_for_selector("ul.messagelist li.success")
    assert page.locator("ul.messagelist li.success").inner_text() == (
        "Modelo de mensagem enviado ao WhatsApp."
    )
    assert (
        "Olá, Maria! Seu exame de hemograma está pronto."
        in page.locator("#transcript").inner_text()
    )
    page.screenshot(path=screenshots_dir / "template-picker-sent.png", full_page=True)

    [send] = fake_graph.sends
    assert send.json["to"] == "5511987654321"
    assert send.json["template"] == {
        "name": "resultado_pronto",
        "language": {"code": "pt_BR"},
        "components": [
            {
                "type": "body",
                "parameters": [
                    {"type": "text", "text": "Maria"},
                    {"type": "text", "text": "hemograma"},
                ],
            }
        ],
    }
