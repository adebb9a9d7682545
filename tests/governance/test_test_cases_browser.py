"""Prompt test cases in a real browser: from a model call's page an editor saves the call as a test
case (prefilled from the recorded answer, masked: the editor may not read personal data), runs
the agent's cases from a draft's page, reads the failure in the runs list, and is refused the
activation with the failing case named. The model is the fake OpenAI server; the run executes
eagerly after the request, as in `make run`.

Screenshots of the case form and of the refusal at 1,366 px go to `BROWSER_SCREENSHOTS_DIR`
(default: a new temporary directory; the path is printed).
"""

from pathlib import Path
from typing import Any

import pytest
from pytest_django.live_server_helper import LiveServer

from conversations.models import Instance
from governance.models import PromptTestCase, PromptTestRun
from tests.fakes.openai_server import FakeOpenAIServer
from tests.helpers.browser import PASSWORD, VIEWPORT, browser_staff
from tests.helpers.recorded_calls import GREETING, conversation, draft, record_turn

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

EDITOR = (
    "conversations.view_llmcall",
    "prompts_admin.view_promptoverride",
    "prompts_admin.change_promptoverride",
    "governance.add_prompttestcase",
    "governance.change_prompttestcase",
    "governance.view_prompttestcase",
    "governance.add_prompttestrun",
    "governance.view_prompttestrun",
)


def test_an_editor_saves_a_case_from_a_call_runs_it_and_is_refused_the_activation(
    live_server: LiveServer,
    browser_page: Any,
    screenshots_dir: Path,
    instance: Instance,
    model: FakeOpenAIServer,
    django_capture_on_commit_callbacks: Any,
) -> None:
    call = record_turn(
        conversation(instance, customer_name="Maria Souza"),
        "Oi, sou a Maria Souza e quero falar com uma pessoa",
        GREETING,
        model=model,
        capture=django_capture_on_commit_callbacks,
    )
    model.reset()
    model.queue_text(GREETING)
    browser_staff("bia", *EDITOR)
    override = draft()
    page = browser_page
    call_url = f"/admin/conversations/llmcall/{call.pk}/change/"
    page.goto(f"{live_server.url}/admin/login/?next={call_url}")
    page.fill("#id_username", "bia")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url(f"**{call_url}")

    page.click("#save-test-case")
    page.wait_for_selector("#case-form")
    assert page.locator("#recorded-reply").inner_text() == "Olá! Como posso ajudar?"
    assert page.locator("#case-masked").is_visible()
    assert page.locator("label[for=id_expected_code]").inner_text() == "Código esperado:"
    assert page.locator("#id_expected_code").input_value() == "1"
    assert page.evaluate("document.documentElement.scrollWidth") <= VIEWPORT["width"]
    page.screenshot(path=str(screenshots_dir / "test-case-from-call.png"), full_page=True)
    page.fill("#id_title", "Pede uma pessoa")
    page.fill("#id_expected_code", "98")
    page.select_option("#id_handoff_expected", "yes")
    page.click("#case-save")
    page.wait_for_selector(".messagelist .success")

    case = PromptTestCase.objects.get()
    assert page.url == f"{live_server.url}/admin/governance/prompttestcase/{case.pk}/change/"
    assert (case.title, case.expected_code, case.masked) == ("Pede uma pessoa", 98, True)

    page.goto(f"{live_server.url}/admin/prompts_admin/promptoverride/{override.pk}/change/")
    page.click("#run-test-cases")
    page.wait_for_selector("#active-cases")
    assert page.locator("#active-cases").inner_text() == (
        "O agente triagem tem 1 caso de teste ativo: ele é enviado ao modelo com este texto e a "
        "resposta é conferida."
    )
    page.click("#prompt-tests-run")
    page.wait_for_selector(".messagelist .success")

    run = PromptTestRun.objects.get()
    assert (run.cases, run.passed, run.failed) == (1, 0, 1)
    assert page.locator("#result_list tbody tr").count() == 1

    page.goto(f"{live_server.url}/admin/prompts_admin/promptoverride/{override.pk}/change/")
    page.check("#id_is_active")
    page.click("input[name=_save]")
    page.wait_for_load_state()

    errors = page.locator(".field-confirm_activation .errorlist").inner_text()
    assert errors == (
        "Nenhum teste deste texto em conversas gravadas: ativá-lo coloca diante dos clientes "
        "um prompt que ninguém testou. Teste-o antes, ou marque “Ativar mesmo assim”, escreva "
        "o motivo da alteração e salve de novo. Além disso, os casos de teste do agente não passam com este texto: 1 "
        f"de 1 falharam na execução #{run.pk} (#{case.pk} Pede uma pessoa: código esperado 98, "
        "obtido 1; esperava uma transferência, não houve nenhuma)."
    )
    page.screenshot(path=str(screenshots_dir / "test-cases-gate-refused.png"), full_page=True)
    override.refresh_from_db()
    assert override.is_active is False
