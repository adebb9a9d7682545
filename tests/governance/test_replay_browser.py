"""The replay in a real browser: from the override's page an editor opens "Testar o rascunho em
conversas gravadas", sees how many recorded calls match, starts the replay and lands on the run's
page with its results.
The model is the fake OpenAI server; the run executes eagerly after the start's commit, as in
`make run`.

Screenshots of the start page and the run page at 1,366 px go to `BROWSER_SCREENSHOTS_DIR`
(default: a new temporary directory; the path is printed).
"""

from pathlib import Path
from typing import Any

import pytest
from pytest_django.live_server_helper import LiveServer

from conversations.models import Instance
from governance.models import ReplayRun, ReplayStatus
from tests.fakes.openai_server import FakeOpenAIServer
from tests.helpers.browser import VIEWPORT, browser_log_in, browser_staff
from tests.helpers.recorded_calls import GREETING, conversation, draft, record_turn

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


EDITOR = (
    "prompts_admin.view_promptoverride",
    "prompts_admin.change_promptoverride",
    "governance.add_replayrun",
    "governance.change_replayrun",
    "governance.view_replayrun",
    "governance.view_replayresult",
)


def test_an_editor_replays_a_draft_from_its_page_and_reads_the_results(
    live_server: LiveServer,
    browser_page: Any,
    screenshots_dir: Path,
    instance: Instance,
    model: FakeOpenAIServer,
    django_capture_on_commit_callbacks: Any,
) -> None:
    for text in ("Oi, bom dia", "Quero falar com alguém"):
        record_turn(
            conversation(instance),
            text,
            GREETING,
            model=model,
            capture=django_capture_on_commit_callbacks,
        )
    model.reset()
    model.queue_text(GREETING)
    model.queue_text('{"s":98,"motivo":"pedido_cliente"}Vou chamar alguém da equipe.')
    browser_staff("bia", *EDITOR)
    override = draft()
    page = browser_page
    change_url = f"/admin/prompts_admin/promptoverride/{override.pk}/change/"
    browser_log_in(page, live_server.url, "bia", change_url)

    page.click("#replay-this-draft")
    page.wait_for_selector("#replay-matching")
    assert page.locator("#replay-matching").inner_text() == "2 chamadas gravadas correspondem."
    page.screenshot(path=str(screenshots_dir / "replay-start.png"), full_page=True)
    page.click("#replay-start")
    page.wait_for_selector("#replay-results")

    run = ReplayRun.objects.get()
    assert page.url == f"{live_server.url}/admin/governance/replayrun/{run.pk}/change/"
    assert (run.status, run.calls_done, run.code_changed, run.handoff_changed) == (
        ReplayStatus.DONE,
        2,
        1,
        1,
    )
    assert page.locator("#replay-status").inner_text() == "concluído"
    assert page.locator("#total-code-changed").inner_text() == "1"
    rows = page.locator("#replay-results tbody tr")
    assert rows.count() == 2
    changed = page.locator("#replay-results tbody tr.replay-changed")
    assert changed.count() == 1
    assert "1 → 98" in changed.inner_text()
    assert "— → transferida pela assistente" in changed.inner_text()
    assert "- Olá! Como posso ajudar?\n+ Vou chamar alguém da equipe." in changed.inner_text()
    assert page.evaluate("document.documentElement.scrollWidth") <= VIEWPORT["width"]
    page.screenshot(path=str(screenshots_dir / "replay-run.png"), full_page=True)
