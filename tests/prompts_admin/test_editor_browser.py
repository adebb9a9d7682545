"""The prompt editor in a real browser: an editor walks from the admin index's "Governança dos
prompts" to the metrics per prompt version and to a custom prompt's form, whose variables are
folded under "Ver as variáveis disponíveis"; changes the text of an override and previews it
unsaved: the preview opens in a new tab with the text as it is in the form, and nothing is stored;
the help lists the variables of the agent picked in the form only.

Playwright drives Debian's chromium (`CHROMIUM`, launched by path, never downloaded), as in
tests/support/test_queue_browser.py. Screenshots of the form and the preview at 1,366 px go
to `BROWSER_SCREENSHOTS_DIR` (default: a new temporary directory); the path is printed.
"""

from pathlib import Path
from typing import Any

import pytest
from pytest_django.live_server_helper import LiveServer

from prompts_admin.models import PromptOverride
from tests.helpers.browser import PASSWORD, VIEWPORT, browser_staff

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


EDITOR = (
    "prompts_admin.add_promptoverride",
    "prompts_admin.change_promptoverride",
    "prompts_admin.view_promptoverride",
)


def test_an_editor_previews_the_text_in_the_form_without_saving_it(
    live_server: LiveServer, browser_page: Any, screenshots_dir: Path
) -> None:
    browser_staff("bia", *EDITOR)
    override = PromptOverride.objects.create(
        agent="triagem", content="Texto salvo.", is_active=True, note="em uso"
    )
    page = browser_page
    change_url = f"/admin/prompts_admin/promptoverride/{override.pk}/change/"
    page.goto(f"{live_server.url}/admin/login/?next={change_url}")
    page.fill("#id_username", "bia")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url(f"**{change_url}")

    page.fill(
        "#id_content",
        "Olá! Eu sou {{ agent_name }}, da {{ company_name }}.\nNova linha.\nAgora: {{ now }}.",
    )
    page.screenshot(path=str(screenshots_dir / "editor-form.png"), full_page=True)
    with page.expect_popup() as popup_info:
        page.click("#preview-unsaved")
    preview = popup_info.value
    preview.wait_for_load_state()

    assert preview.url == f"{live_server.url}/admin/prompts_admin/promptoverride/preview/"
    prompt = preview.locator("#final-prompt").inner_text()
    assert prompt.startswith("Olá! Eu sou Lia, da Laboratório Exemplo.\nNova linha.\nAgora: ")
    assert preview.locator(".unsaved-note").inner_text() == (
        "Texto do formulário, não salvo: nada foi gravado. "
        "Feche esta aba para voltar ao formulário."
    )
    # {{ now }} changes at every call: the preview says where the prompt cache stops, and why.
    # The browser posts the textarea's line breaks as CRLF: two characters each where the page
    # shows one.
    stable = len("Olá! Eu sou Lia, da Laboratório Exemplo.\r\nNova linha.\r\nAgora: ")
    total = len(prompt) + 2
    assert preview.locator("#cache-share").inner_text() == (
        f"{stable} de {total} caracteres das instruções ({stable * 100 // total}%)"
    )
    assert preview.locator("#cache-breakers").is_visible()
    assert (
        preview.locator("#cache-breakers")
        .inner_text()
        .startswith("Este texto usa {{ now }}, cujo valor muda de uma chamada para outra")
    )
    assert (
        preview.locator("#conversation-context")
        .inner_text()
        .startswith("# Contexto desta conversa (gerado pelo sistema)\n- Agora: ")
    )
    assert preview.evaluate("document.documentElement.scrollWidth") <= VIEWPORT["width"]
    preview.screenshot(path=str(screenshots_dir / "editor-unsaved-preview.png"), full_page=True)

    # "Show" with the synthetic sample posts the same text again.
    preview.click(".preview-picker input[type=submit]")
    preview.wait_for_load_state()
    assert preview.locator("#final-prompt").inner_text().startswith("Olá! Eu sou Lia, da ")

    # Nothing stored, and the form still holds the edited text.
    override.refresh_from_db()
    assert (override.content, override.is_active, override.history.count()) == (
        "Texto salvo.",
        True,
        1,
    )
    assert page.input_value("#id_content") == (
        "Olá! Eu sou {{ agent_name }}, da {{ company_name }}.\nNova linha.\nAgora: {{ now }}."
    )


def test_the_help_follows_the_agent_picked_in_the_form(
    live_server: LiveServer, browser_page: Any, screenshots_dir: Path
) -> None:
    browser_staff("bia", *EDITOR)
    page = browser_page
    page.goto(f"{live_server.url}/admin/login/?next=/admin/prompts_admin/promptoverride/add/")
    page.fill("#id_username", "bia")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url("**/admin/prompts_admin/promptoverride/add/")

    def shown() -> list[str]:
        groups = page.locator("[data-agent-variables]")
        return [
            str(groups.nth(i).get_attribute("data-agent-variables"))
            for i in range(groups.count())
            if groups.nth(i).is_visible()
        ]

    # Folded until the editor asks for them.
    assert shown() == []
    page.click("details.prompt-variables summary")
    assert shown() == ["triagem", "qualificacao", "coleta"]
    page.select_option("#id_agent", "coleta")
    assert shown() == ["coleta"]
    page.select_option("#id_agent", "triagem")
    assert shown() == ["triagem"]
    page.screenshot(path=str(screenshots_dir / "editor-help-one-agent.png"), full_page=True)


def test_an_editor_walks_from_the_index_to_the_metrics_and_opens_the_variables(
    live_server: LiveServer, browser_page: Any, screenshots_dir: Path
) -> None:
    browser_staff("bia", *EDITOR, "governance.view_replayrun", "governance.add_replayrun")
    page = browser_page
    page.goto(f"{live_server.url}/admin/login/?next=/admin/")
    page.fill("#id_username", "bia")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url(f"{live_server.url}/admin/")

    block = page.locator("#prompt-governance-module")
    # text_content: the admin's CSS shows captions in capitals.
    assert block.locator("caption").text_content() == "Governança dos prompts"
    assert block.locator("th").all_inner_texts() == [
        "Prompts personalizados",
        "Métricas por versão do prompt",
        "Testar o rascunho em conversas gravadas",
    ]
    assert page.evaluate("document.documentElement.scrollWidth") <= VIEWPORT["width"]
    page.screenshot(path=str(screenshots_dir / "editor-index.png"), full_page=True)

    page.click("#prompt-metrics-link")
    page.wait_for_url("**/admin/governance/metrics/")
    assert page.locator("h1").inner_text() == "Métricas por versão do prompt"
    assert page.locator(".breadcrumbs").inner_text() == (
        "Início › Prompts e configuração › Prompts personalizados › Métricas por versão do prompt"
    )
    page.screenshot(path=str(screenshots_dir / "editor-metrics.png"), full_page=True)

    page.click(".breadcrumbs a:text-is('Prompts personalizados')")
    page.wait_for_url("**/admin/prompts_admin/promptoverride/")
    page.click("a.button:text-is('Triagem')")
    page.wait_for_url("**/admin/prompts_admin/promptoverride/add/?from_builtin=triagem")
    summary = page.locator("details.prompt-variables summary")
    variables = page.locator('[data-agent-variables="triagem"]')
    assert summary.inner_text() == "Ver as variáveis disponíveis"
    assert not variables.is_visible()

    summary.click()

    assert variables.is_visible()
    assert variables.locator("strong").inner_text() == "Triagem"
    assert page.evaluate("document.documentElement.scrollWidth") <= VIEWPORT["width"]
    page.screenshot(path=str(screenshots_dir / "editor-variables-open.png"), full_page=True)
