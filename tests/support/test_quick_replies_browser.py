"""Quick replies and labels in a real browser: in the conversation page's reply box, "/" and a few letters
list the matching replies; Enter inserts the chosen one with the customer's and the staff
member's first names filled in, to be edited before sending; a click inserts one too, and
Escape closes the list. A label is added from the labels box and removed by its chip's button.
Playwright drives Debian's chromium (`tests.helpers.browser`); a
screenshot of the open list goes to `BROWSER_SCREENSHOTS_DIR`.
"""

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone
from model_bakery import baker
from pytest_django.live_server_helper import LiveServer

from conversations.models import Instance, Session
from support.models import Label, QuickReply, SessionLabel
from tests.helpers.browser import PASSWORD, VIEWPORT, browser_staff

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
# Playwright's assertions wait for the page (a string evaluated in the page would break its CSP).
expect = pytest.importorskip("playwright.sync_api", reason="playwright is not installed").expect

SUPPORT_PERMISSIONS = (
    "conversations.view_session",
    "conversations.view_personal_data",
    "conversations.attend_session",
)


def open_conversation(browser: Any, base_url: str, username: str, session: Session) -> Any:
    page = browser.new_context(viewport=VIEWPORT, locale="pt-BR").new_page()
    change_url = f"/admin/conversations/session/{session.pk}/change/"
    page.goto(f"{base_url}/admin/login/?next={change_url}")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url(f"**{change_url}")
    return page


def test_slash_and_letters_list_the_reply_and_enter_inserts_it_with_the_names(
    live_server: LiveServer, browser: Any, screenshots_dir: Path
) -> None:
    ana = browser_staff("ana", *SUPPORT_PERMISSIONS)
    ana.first_name = "Ana"
    ana.save()
    at = timezone.now() - timedelta(minutes=5)
    session = baker.make(
        Session,
        instance=baker.make(Instance, name="Vale Analítico"),
        state="HUMAN",
        customer_name="Maria Souza",
        customer_phone="5511912345678",
        assigned_to=ana,
        handed_off_at=at,
        last_inbound_at=at,
    )
    QuickReply.objects.create(
        shortcut="boas-vindas",
        title="Boas-vindas",
        text="Olá, {{primeiro_nome}}! Sou {{atendente}}, da equipe.",
    )
    QuickReply.objects.create(
        shortcut="prazo", title="Prazo do laudo", text="O laudo sai em 5 dias."
    )
    QuickReply.objects.create(
        shortcut="boleto", title="Segunda via", text="Segue o boleto.", owner=ana
    )
    page = open_conversation(browser, live_server.url, "ana", session)
    box = page.locator("#reply-text")

    box.click()
    box.type("Bom dia! /boa")
    items = page.locator("#quick-replies-list li.quick-reply")
    # The answer for "/boa" itself (one reply), not one for "/b" still on screen.
    expect(items).to_have_count(1)
    assert items.first.inner_text().startswith("/boas-vindas")
    page.screenshot(path=screenshots_dir / "quick-replies-list.png", full_page=False)

    box.press("Enter")

    assert box.input_value() == "Bom dia! Olá, Maria! Sou Ana, da equipe."
    assert page.locator("#quick-replies-list").is_hidden()

    box.fill("")
    box.type("/bo")
    expect(items).to_have_count(2)
    assert (
        page.locator("#quick-replies-list li.quick-reply")
        .all_inner_texts()[0]
        .startswith("/boas-vindas")
    )
    page.locator("#quick-replies-list li.quick-reply", has_text="/boleto").click()
    assert box.input_value() == "Segue o boleto."

    box.fill("")
    box.type("/pra")
    expect(items.first).to_have_attribute("data-shortcut", "prazo")
    box.press("Escape")
    assert page.locator("#quick-replies-list").is_hidden()
    box.press("Enter")
    assert box.input_value() == "/pra\n"


def test_a_label_is_added_and_removed_from_the_labels_box(
    live_server: LiveServer, browser: Any, screenshots_dir: Path
) -> None:
    ana = browser_staff("ana", *SUPPORT_PERMISSIONS)
    session = baker.make(
        Session,
        instance=baker.make(Instance, name="Vale Analítico"),
        state="HUMAN",
        customer_name="Maria Souza",
        assigned_to=ana,
        last_inbound_at=timezone.now() - timedelta(minutes=5),
    )
    urgent = Label.objects.create(name="urgente", colour="red")
    Label.objects.create(name="orçamento", colour="blue")
    page = open_conversation(browser, live_server.url, "ana", session)
    page.fill("#reply-text", "Rascunho da resposta")
    status = page.locator("#session-labels-status")

    page.select_option("#session-label-add", str(urgent.pk))
    page.click("#action-label-add")

    expect(status).to_have_text("Etiqueta “urgente” adicionada.")
    expect(page.locator("#session-label-chips li.label-red")).to_have_text("urgente×")
    assert page.locator("#session-label-add option").all_inner_texts() == ["—", "orçamento"]
    # No reload: the reply being written stays, and the event comes with the live updates.
    assert page.locator("#reply-text").input_value() == "Rascunho da resposta"
    expect(page.locator("#transcript")).to_contain_text("Ana adicionou a etiqueta “urgente”.")
    page.locator("#session-labels").screenshot(path=screenshots_dir / "labels-box.png")

    page.click(f"#session-label-chips button[value='{urgent.pk}']")
    expect(status).to_have_text("Etiqueta “urgente” removida.")
    expect(page.locator("#session-label-chips li.label-none")).to_be_visible()
    assert not SessionLabel.objects.filter(session=session).exists()
    assert page.locator("#session-label-add option").all_inner_texts() == [
        "—",
        "orçamento",
        "urgente",
    ]

    # A refusal is said in the box, and nothing changes.
    Label.objects.filter(pk=urgent.pk).delete()
    page.select_option("#session-label-add", str(urgent.pk))
    page.click("#action-label-add")
    expect(status).to_have_text(
        f"A etiqueta #{urgent.pk} não existe; recarregue a página para ver as etiquetas atuais."
    )
