"""Simulated customers in a real browser: an editor opens the simulated customers from the admin
index, goes to a draft's page, starts its simulated customers, reads the report (one outcome
reached, one missed) and opens a conversation.
The model is the fake OpenAI server answering with the script of tests/simulator/
personas_script.py; the run plays eagerly after the start's commit, as in `make run`.

Screenshots of the list, the start page, the report and the conversation at 1,366 px go to
`BROWSER_SCREENSHOTS_DIR` (default: a new temporary directory; the path is printed).
"""

from pathlib import Path
from typing import Any

import pytest
from pytest_django import Settings
from pytest_django.live_server_helper import LiveServer

from governance.models import Persona, PersonaGoal, PersonaResult, PersonaRun, ReplayStatus
from prompts_admin.models import PromptOverride
from tests.fakes.openai_server import FakeOpenAIServer
from tests.helpers.browser import VIEWPORT, browser_log_in, browser_staff
from tests.simulator import personas_script as script

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


EDITOR = (
    "prompts_admin.view_promptoverride",
    "prompts_admin.change_promptoverride",
    "governance.view_persona",
    "governance.add_personarun",
    "governance.view_personarun",
    "governance.view_personaresult",
)


def test_an_editor_simulates_customers_against_a_draft_and_reads_a_conversation(
    live_server: LiveServer,
    browser_page: Any,
    screenshots_dir: Path,
    settings: Settings,
    openai_settings: FakeOpenAIServer,
) -> None:
    script.world_prepare(settings, openai_settings)
    Persona.objects.create(
        title="Produtor rural",
        description=script.FARMER,
        goal=PersonaGoal.LEAD,
        expected_service="AGUA_POTABILIDADE",
        required_fields=["cadastro.documento"],
    )
    # Expects a confirmed request, asks for a person at once: its outcome is missed.
    Persona.objects.create(
        title="Cliente apressado", description=script.WANTS_HUMAN, goal=PersonaGoal.LEAD
    )
    override = PromptOverride.objects.create(agent="coleta", content=script.GOOD_DRAFT)
    browser_staff("bia", *EDITOR)
    page = browser_page
    browser_log_in(page, live_server.url, "bia", "/admin/")

    page.click("#personas-link")
    page.wait_for_selector("#result_list")
    assert page.locator("#result_list tbody tr").count() == 2
    assert page.locator("#result_list thead th.column-turn_limit").inner_text() == (
        "LIMITE DE MENSAGENS"
    )
    # At 1,366 px the list fits beside its filter, with no horizontal scroll bar.
    assert page.evaluate(
        "(r => r.scrollWidth <= r.clientWidth)(document.querySelector('#changelist .results'))"
    )
    page.screenshot(path=str(screenshots_dir / "personas-list.png"), full_page=True)

    page.goto(f"{live_server.url}/admin/prompts_admin/promptoverride/{override.pk}/change/")
    page.click("#simulate-customers")
    page.wait_for_selector("#persona-run-start")
    assert (
        page.locator("#persona-target")
        .inner_text()
        .startswith("Cada cliente simulado conversa com o bot")
    )
    assert page.locator("input[name=personas]:checked").count() == 2
    page.screenshot(path=str(screenshots_dir / "personas-start.png"), full_page=True)
    page.click("#persona-run-start")
    page.wait_for_selector("#persona-results")

    run = PersonaRun.objects.get()
    assert page.url == f"{live_server.url}/admin/governance/personarun/{run.pk}/change/"
    assert (run.status, run.personas_done, run.reached, run.failed) == (ReplayStatus.DONE, 2, 1, 1)
    assert page.locator("#replay-status").inner_text() == "concluído"
    assert page.locator("#total-reached").inner_text() == "1"
    assert page.locator("#total-failed").inner_text() == "1"
    rows = page.locator("#persona-results tbody tr")
    assert [rows.nth(i).locator("td").nth(1).inner_text() for i in range(2)] == ["não", "sim"]
    assert "Cliente apressado" in rows.nth(0).inner_text()
    assert page.evaluate("document.documentElement.scrollWidth") <= VIEWPORT["width"]
    page.screenshot(path=str(screenshots_dir / "personas-report.png"), full_page=True)

    page.click("#persona-results >> text=Produtor rural")
    page.wait_for_selector("#persona-transcript")
    reached = PersonaResult.objects.get(reached=True)
    assert page.url == f"{live_server.url}/admin/governance/personaresult/{reached.pk}/change/"
    assert (
        page.locator("#persona-outcome")
        .inner_text()
        .startswith("Objetivo alcançado: pedido confirmado")
    )
    bubbles = page.locator("#persona-transcript li")
    assert bubbles.count() == 8
    assert bubbles.nth(0).inner_text() == f"Cliente\n{script.FIRST}"
    assert bubbles.nth(1).inner_text() == f"Bot · qualificação · código 1\n{script.ASK_SAMPLES}"
    # The editor may not view personal data: the customer's CPF and e-mail are masked.
    assert "529.982.247-25" not in page.locator("#persona-transcript").inner_text()
    assert page.evaluate("document.documentElement.scrollWidth") <= VIEWPORT["width"]
    page.screenshot(path=str(screenshots_dir / "personas-transcript.png"), full_page=True)
