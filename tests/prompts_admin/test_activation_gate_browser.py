"""The activation gate in a real browser: an editor activates a draft that has no replay: the save
is refused with the message, the "Activate anyway" box and the reason field appear; ticked, with a
reason, the save goes through and the history shows the reason.

Playwright drives Debian's chromium (tests/helpers/browser.py). Screenshots of the refusal and
of the history at 1,366 px go to `BROWSER_SCREENSHOTS_DIR` (default: a new temporary
directory); the path is printed.
"""

from pathlib import Path
from typing import Any

import pytest
from pytest_django.live_server_helper import LiveServer

from prompts_admin.models import PromptOverride
from tests.helpers.browser import PASSWORD, VIEWPORT, browser_staff

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

REASON = "Correção urgente do horário de atendimento"


EDITOR = (
    "prompts_admin.add_promptoverride",
    "prompts_admin.change_promptoverride",
    "prompts_admin.view_promptoverride",
)


def test_an_editor_activates_a_draft_without_a_replay_after_confirming_with_a_reason(
    live_server: LiveServer, browser_page: Any, screenshots_dir: Path
) -> None:
    browser_staff("bia", *EDITOR)
    draft = PromptOverride.objects.create(
        agent="triagem", content="Olá! Eu sou {{ agent_name }}.\nComo posso ajudar?", note="v2"
    )
    page = browser_page
    change_url = f"/admin/prompts_admin/promptoverride/{draft.pk}/change/"
    page.goto(f"{live_server.url}/admin/login/?next={change_url}")
    page.fill("#id_username", "bia")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url(f"**{change_url}")

    # The evidence (none) is under the "active" box before ticking it.
    assert page.locator("#id_is_active_helptext").inner_text() == (
        "No máximo um prompt personalizado ativo por agente. As regras fixas são sempre anexadas.\n"
        "Nenhum teste deste texto em conversas gravadas."
    )
    assert not page.locator("#id_confirm_activation").is_visible()
    # The change reason is always offered; only the gate makes it required.
    assert page.locator("label[for=id_change_reason]").inner_text() == "Motivo da alteração:"

    page.check("#id_is_active")
    page.click("input[name=_save]")
    page.wait_for_load_state()

    errors = page.locator(".field-confirm_activation .errorlist").inner_text()
    assert errors == (
        "Nenhum teste deste texto em conversas gravadas: ativá-lo coloca diante dos clientes um "
        "prompt que ninguém testou. Teste-o antes, ou marque “Ativar mesmo assim”, escreva o "
        "motivo da alteração e salve de novo."
    )
    assert page.locator("label[for=id_confirm_activation]").inner_text() == "Ativar mesmo assim"
    assert page.locator("#id_change_reason").is_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= VIEWPORT["width"]
    page.screenshot(path=str(screenshots_dir / "activation-gate-refused.png"), full_page=True)
    draft.refresh_from_db()
    assert (draft.is_active, draft.history.count()) == (False, 1)

    page.check("#id_confirm_activation")
    page.fill("#id_change_reason", REASON)
    page.click("input[name=_save]")
    page.wait_for_url("**/admin/prompts_admin/promptoverride/")

    assert (
        page.locator(".messagelist .warning").inner_text()
        == "Nenhum teste deste texto em conversas gravadas."
    )
    draft.refresh_from_db()
    latest = draft.history.latest()
    assert (draft.is_active, latest.history_change_reason, latest.history_user.username) == (
        True,
        f"Ativado sem teste em conversas gravadas: {REASON}",
        "bia",
    )

    page.goto(f"{live_server.url}/admin/prompts_admin/promptoverride/{draft.pk}/history/")
    assert page.locator("td.history-change-reason").first.inner_text() == (
        f"Ativado sem teste em conversas gravadas: {REASON}"
    )
    page.screenshot(path=str(screenshots_dir / "activation-gate-history.png"), full_page=True)
