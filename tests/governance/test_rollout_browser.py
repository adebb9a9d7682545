"""A gradual release that pauses itself, in a real browser: an editor releases a draft to 50%
of the new conversations on its page; the conversations come (made in the database), the check
pauses the release and e-mails the editor; the index shows the notice, the override's page the
pause and its reason, and the metrics page the candidate and the current version side by side.

Playwright drives Debian's chromium (tests/helpers/browser.py). Screenshots at 1,366 px go to
`BROWSER_SCREENSHOTS_DIR` (default: a new temporary directory); the path is printed.
"""

from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core import mail
from pytest_django.live_server_helper import LiveServer

from conversations.models import Instance
from governance.rollout_pause import rollout_pauses_check
from prompts_admin.models import PromptOverride
from tests import baker_recipes as recipes
from tests.helpers.browser import VIEWPORT, browser_log_in, browser_staff

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

EDITOR = (
    "prompts_admin.add_promptoverride",
    "prompts_admin.change_promptoverride",
    "prompts_admin.view_promptoverride",
)
REASON = (
    "Liberação aos poucos pausada automaticamente: transferências 30% (110 conversas) "
    "contra 10% (90 conversas), margem de 5 pontos"
)


def conversations(instance: Instance, candidate: PromptOverride) -> None:
    """110 conversations of the candidate (33 handed off), 90 of the built-in (9)."""
    version = f"override:{candidate.history.latest().history_id}"
    for n in range(200):
        mine = n < 110
        handed_off = n < 33 if mine else n < 110 + 9
        recipes.session.make(
            instance=instance,
            prompt_versions={"triagem": version if mine else "builtin"},
            handoff_reason="model_requested" if handed_off else "",
        )


def test_a_release_pauses_itself_and_the_editor_sees_it_everywhere(
    live_server: LiveServer, browser_page: Any, screenshots_dir: Path
) -> None:
    editor: User = browser_staff("bia", *EDITOR)
    User.objects.filter(pk=editor.pk).update(email="bia@lab.example")
    draft = PromptOverride.objects.create(agent="triagem", content="Olá! Como posso ajudar?")
    page = browser_page
    change_url = f"/admin/prompts_admin/promptoverride/{draft.pk}/change/"
    browser_log_in(page, live_server.url, "bia", change_url)

    # 50% without a replay of this text: the gate asks for "Ativar mesmo assim" and a reason.
    page.fill("#id_rollout_percent", "50")
    page.click("input[name=_save]")
    page.wait_for_load_state()
    page.check("#id_confirm_activation")
    page.fill("#id_change_reason", "Experimentar a saudação nova")
    page.click("input[name=_save]")
    page.wait_for_url("**/admin/prompts_admin/promptoverride/")
    draft.refresh_from_db()
    assert (draft.rollout_percent, draft.rollout_paused_at) == (50, None)

    conversations(recipes.instance.make(), draft)
    assert rollout_pauses_check() == [draft.pk]
    # No transaction around the check here: its commit hook ran at once.
    [email] = mail.outbox
    assert (email.to, email.subject) == (
        ["bia@lab.example"],
        f"Liberação aos poucos pausada: prompt do agente triagem "
        f"(prompt personalizado #{draft.pk})",
    )
    assert f"Motivo: {REASON}\n" in email.body
    assert f"/admin/prompts_admin/promptoverride/{draft.pk}/change/\n" in email.body

    page.goto(f"{live_server.url}/admin/")
    notice = page.locator("#rollout-paused-module")
    assert notice.locator("caption").text_content() == (
        "Liberações aos poucos pausadas automaticamente"
    )
    assert notice.locator("th a").inner_text() == f"Triagem · prompt personalizado #{draft.pk}"
    assert notice.locator(".rollout-paused-reason").inner_text() == REASON
    assert notice.locator(".rollout-paused-since").inner_text().startswith("Pausada desde ")
    assert page.evaluate("document.documentElement.scrollWidth") <= VIEWPORT["width"]
    page.screenshot(path=str(screenshots_dir / "rollout-paused-index.png"), full_page=True)

    notice.locator("th a").click()
    page.wait_for_url(f"**{change_url}")
    assert page.locator(".field-rollout_pause_reason .readonly").inner_text() == REASON
    assert page.locator(".field-rollout_paused_at .readonly").inner_text() != "-"
    assert page.locator("#id_rollout_percent").input_value() == "50"
    page.locator(".field-rollout_pause_reason").scroll_into_view_if_needed()
    page.screenshot(path=str(screenshots_dir / "rollout-paused-override.png"), full_page=True)

    page.goto(f"{live_server.url}/admin/governance/metrics/?agent=triagem")
    section = page.locator("#release-comparison")
    assert section.locator("h2").inner_text() == (
        "Liberação aos poucos do prompt do agente triagem"
    )
    assert section.locator(".release-status").inner_text().endswith(REASON)
    rows = section.locator("#release-sides tbody tr")
    assert [rows.nth(i).inner_text().split("\t") for i in range(rows.count())] == [
        ["Porcentagem das novas conversas", "50 % (pausada)", "50 %"],
        ["Conversas", "110", "90"],
        ["Taxa de transferência", "30,0 %", "10,0 %"],
        ["Erros de contrato por conversa", "0,0 %", "0,0 %"],
    ]
    assert page.evaluate("document.documentElement.scrollWidth") <= VIEWPORT["width"]
    page.screenshot(path=str(screenshots_dir / "rollout-paused-metrics.png"), full_page=True)
