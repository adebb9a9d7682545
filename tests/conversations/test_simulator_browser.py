"""The simulator page in a real browser (issue 14 §6): a prompt editor logs in, sends one message
as the simulated customer and sees the bot's reply with the turn's agent and code.

Playwright drives Debian's chromium as in `test_queue_browser` (launched by path, never
downloaded); the screenshot goes to `BROWSER_SCREENSHOTS_DIR` (default: a new temporary
directory)."""

from pathlib import Path
from typing import Any

import pytest
from pytest_django.live_server_helper import LiveServer

from conversations.models import Instance, Session
from tests import baker_recipes as recipes
from tests.fakes.graph_server import FakeGraphAPI
from tests.fakes.openai_server import FakeOpenAIServer
from tests.support.browser import PASSWORD, VIEWPORT, browser_staff

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


EDITOR = ("prompts_admin.change_promptoverride",)


def test_an_editor_sends_a_message_and_sees_the_reply(
    live_server: LiveServer,
    browser_page: Any,
    screenshots_dir: Path,
    openai_settings: FakeOpenAIServer,
    fake_graph: FakeGraphAPI,
) -> None:
    browser_staff("edna", *EDITOR)
    instance: Instance = recipes.instance.make(name="Laboratório Demo")
    openai_settings.queue_text('{"s":1}Olá! Sou a Lia. Como posso ajudar?', input_tokens=1000)
    page = browser_page

    page.goto(f"{live_server.url}/admin/login/?next=/admin/conversations/session/simulator/")
    page.fill("#id_username", "edna")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url("**/admin/conversations/session/simulator/")
    page.fill("#simulator-text", "Oi, quero um orçamento")
    page.get_by_role("button", name="Enviar").click()
    page.wait_for_url(f"**/simulator/?instance={instance.pk}")

    bubbles = page.locator(".bubble").all_inner_texts()
    assert bubbles == ["Oi, quero um orçamento", "Olá! Sou a Lia. Como posso ajudar?"]
    assert page.locator(".turn-agents").inner_text() == "triagem"
    assert page.locator(".turn-code").inner_text() == "1"
    assert page.evaluate("document.documentElement.scrollWidth") <= VIEWPORT["width"]
    page.screenshot(path=str(screenshots_dir / "simulator.png"), full_page=True)
    assert (Session.objects.get().is_simulated, fake_graph.requests) == (True, [])
