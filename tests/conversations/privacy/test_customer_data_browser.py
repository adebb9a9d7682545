"""The LGPD requests page in a real browser: a staff member with the erasure permission opens it
from a conversation, finds the customer (listed by conversation id, never by name), is stopped
once for the missing confirmation, then erases; the conversation's page no longer shows the
customer. Screenshots go to `BROWSER_SCREENSHOTS_DIR`."""

from pathlib import Path
from typing import Any

import pytest
from pytest_django.live_server_helper import LiveServer

from conversations.models import Instance, Session
from tests import baker_recipes as recipes
from tests.helpers.browser import PASSWORD, VIEWPORT, browser_staff

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

PHONE = "5511987650123"
NAME = "Joana Erasmo"


def test_a_staff_member_finds_a_customer_and_erases_them_after_confirming(
    live_server: LiveServer, browser_page: Any, screenshots_dir: Path
) -> None:
    browser_staff("dora", "conversations.erase_customer_data", "conversations.view_session")
    instance: Instance = recipes.instance.make(name="Laboratório Demo")
    joana: Session = recipes.session.make(
        instance=instance, customer_phone=PHONE, customer_name=NAME
    )
    page = browser_page
    change_url = f"/admin/conversations/session/{joana.pk}/change/"

    page.goto(f"{live_server.url}/admin/login/?next={change_url}")
    page.fill("#id_username", "dora")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url(f"**{change_url}")
    page.click("#customer-data-link")
    page.wait_for_url("**/personal-data/?session=*")
    page.get_by_role("button", name="Procurar").click()
    page.wait_for_load_state()

    assert page.locator("#customer-data-found").inner_text() == (
        "1 conversa · 0 corpo de webhook que menciona o cliente"
    )
    assert page.locator("#customer-data-sessions tbody td a").all_inner_texts() == [
        f"Conversa #{joana.pk}"
    ]
    assert NAME not in page.content()
    assert page.evaluate("document.documentElement.scrollWidth") <= VIEWPORT["width"]
    page.screenshot(path=str(screenshots_dir / "customer-data-found.png"), full_page=True)

    page.get_by_role("button", name="Apagar os dados pessoais").click()
    page.wait_for_load_state()
    joana.refresh_from_db()
    assert joana.anonymised_at is None
    assert page.locator(".errornote").all_inner_texts() == ["Marque a confirmação para apagar."]

    page.check("#id_confirm")
    page.get_by_role("button", name="Apagar os dados pessoais").click()
    page.wait_for_load_state()
    page.screenshot(path=str(screenshots_dir / "customer-data-erased.png"), full_page=True)

    assert page.locator(".messagelist .success").inner_text() == (
        "Dados pessoais apagados: 1 conversa(s) anonimizada(s), o cliente removido de 0 "
        "corpo(s) de webhook."
    )
    joana.refresh_from_db()
    assert (joana.anonymised_at is not None, joana.customer_name, joana.customer_phone) == (
        True,
        "",
        "",
    )
