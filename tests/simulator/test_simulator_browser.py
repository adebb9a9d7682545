"""The simulator page in a real browser: a prompt editor logs in, sends one message as the simulated
customer and sees the bot's reply with the turn's agent and code; and, while a turn is in flight,
the page polls it and shows the reply once it ended.

Playwright drives Debian's chromium as in `test_queue_browser` (launched by path, never
downloaded); the screenshot goes to `BROWSER_SCREENSHOTS_DIR` (default: a new temporary
directory)."""

from pathlib import Path
from typing import Any

import pytest
from pytest_django.live_server_helper import LiveServer

from conversations.models import Instance, Session
from simulator.admin import simulated_phone
from simulator.simulation import simulated_turn_run, simulated_turn_start
from tests import baker_recipes as recipes
from tests.fakes.graph_server import FakeGraphAPI
from tests.fakes.openai_server import FakeOpenAIServer
from tests.helpers.browser import PASSWORD, VIEWPORT, browser_staff
from tests.helpers.model_requests import history_of

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


def test_the_page_polls_a_turn_in_flight_and_shows_the_reply_once_it_ended(
    live_server: LiveServer,
    browser_page: Any,
    screenshots_dir: Path,
    openai_settings: FakeOpenAIServer,
    fake_graph: FakeGraphAPI,
) -> None:
    """A worker's turn: the page waits (the button disabled), simulator.js polls, and the page
    reloads with the reply when the turn ends — here run by the test, as a worker would."""
    editor = browser_staff("edna", *EDITOR)
    instance: Instance = recipes.instance.make(name="Laboratório Demo")
    openai_settings.queue_text('{"s":1}Olá! Em que posso ajudar?')
    turn = simulated_turn_start(
        user_id=editor.pk,
        instance=instance,
        phone=simulated_phone(editor.pk),
        text="Oi",
        prompt_overrides={},
        enqueue=lambda _turn_id: None,  # no worker yet
    )
    page = browser_page

    page.goto(f"{live_server.url}/admin/login/?next=/admin/conversations/session/simulator/")
    page.fill("#id_username", "edna")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url("**/admin/conversations/session/simulator/")
    waiting = page.locator("#simulator-waiting").inner_text()
    disabled = page.get_by_role("button", name="Enviar").is_disabled()
    page.screenshot(path=str(screenshots_dir / "simulator_waiting.png"), full_page=True)
    simulated_turn_run(turn_id=turn.pk)
    page.locator(".bubble-bot").wait_for(timeout=10_000)

    assert (waiting, disabled) == ("Aguardando a resposta…", True)
    assert page.locator(".bubble").all_inner_texts() == ["Oi", "Olá! Em que posso ajudar?"]
    assert page.get_by_role("button", name="Enviar").is_disabled() is False
    page.screenshot(path=str(screenshots_dir / "simulator_answered.png"), full_page=True)
    assert fake_graph.requests == []


def test_an_editor_clicks_a_reply_button_of_the_bot_and_the_tap_is_answered(
    live_server: LiveServer,
    browser_page: Any,
    screenshots_dir: Path,
    openai_settings: FakeOpenAIServer,
    fake_graph: FakeGraphAPI,
) -> None:
    browser_staff("edna", *EDITOR)
    instance: Instance = recipes.instance.make(name="Laboratório Demo")
    openai_settings.queue_text(
        '{"s":1,"opcoes":["Orçamento","Agendar coleta","Acompanhar pedido"]}'
        "Olá! Sou a Lia. Como posso ajudar?"
    )
    openai_settings.queue_text('{"s":1}Claro! Qual é o tipo de amostra?')
    page = browser_page

    page.goto(f"{live_server.url}/admin/login/?next=/admin/conversations/session/simulator/")
    page.fill("#id_username", "edna")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url("**/admin/conversations/session/simulator/")
    page.fill("#simulator-text", "Oi")
    page.get_by_role("button", name="Enviar").click()
    page.wait_for_url(f"**/simulator/?instance={instance.pk}")
    offered = page.locator(".simulator-option").all_inner_texts()
    page.screenshot(path=str(screenshots_dir / "simulator_options.png"), full_page=True)
    page.get_by_role("button", name="Orçamento").click()
    page.wait_for_url(f"**/simulator/?instance={instance.pk}")

    assert offered == ["Orçamento", "Agendar coleta", "Acompanhar pedido"]
    assert page.locator(".bubble").all_inner_texts() == [
        "Oi",
        "Olá! Sou a Lia. Como posso ajudar?",
        "Orçamento",
        "Claro! Qual é o tipo de amostra?",
    ]
    assert page.locator(".simulator-option-chip").all_inner_texts() == offered
    assert page.locator(".simulator-option").count() == 0
    assert page.evaluate("document.documentElement.scrollWidth") <= VIEWPORT["width"]
    page.screenshot(path=str(screenshots_dir / "simulator_tapped.png"), full_page=True)
    assert history_of(openai_settings.requests[1])[-1]["content"] == "Orçamento"
    assert fake_graph.requests == []
