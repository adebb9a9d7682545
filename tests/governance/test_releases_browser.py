"""A release's approval in a real browser, with PROMPT_APPROVAL_REQUIRED: an editor prepares a
release from the admin index (the form prefilled with what is live), picks her draft for
Triagem and sends it for approval; she sees no approve button on her own release. A second
editor with the approval permission opens it, reads the diff and the replay, and approves; the
first publishes it, then rolls back to the release before in one click. From her release's page
she can also open the simulated customers' start page against it. Before all that, her draft's
own page refuses to activate it: with approval required a prompt goes live only by a release.

Playwright drives Debian's chromium (tests/helpers/browser.py); screenshots of the proposer's
page, the approver's page and the published release go to `BROWSER_SCREENSHOTS_DIR`.
"""

from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone
from model_bakery import baker
from pytest_django import Settings
from pytest_django.live_server_helper import LiveServer

from governance.models import ReplayRun, ReplayStatus
from prompts_admin.models import PromptOverride, Release, ReleaseStatus, prompt_content_hash
from tests.helpers.browser import PASSWORD, VIEWPORT, browser_staff

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

OLD = "Olá! Eu sou {{ agent_name }}.\nComo posso ajudar?"
NEW = "Olá! Eu sou {{ agent_name }}.\nDe qual município você fala?\nComo posso ajudar?"
EDITOR = (
    "prompts_admin.add_release",
    "prompts_admin.change_release",
    "prompts_admin.view_release",
    "prompts_admin.view_promptoverride",
    "prompts_admin.change_promptoverride",
    "governance.add_personarun",
)
APPROVER = ("prompts_admin.approve_release", "prompts_admin.view_release")


def log_in(page: Any, server: LiveServer, username: str, next_url: str) -> None:
    page.goto(f"{server.url}/admin/login/?next={next_url}")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url(f"**{next_url}")


def test_a_second_editor_approves_a_release_and_the_first_publishes_and_rolls_back(
    live_server: LiveServer,
    browser: Any,
    screenshots_dir: Path,
    settings: Settings,
) -> None:
    settings.PROMPT_APPROVAL_REQUIRED = True
    browser_staff("ana", *EDITOR)
    browser_staff("caio", *APPROVER)
    active = PromptOverride.objects.create(agent="triagem", content=OLD, is_active=True)
    draft = PromptOverride.objects.create(agent="triagem", content=NEW, note="município")
    earlier = Release.objects.create(
        name="Fevereiro",
        prompts={"triagem": active.history.latest().history_id},
        status=ReleaseStatus.PUBLISHED,
        published_at=timezone.now(),
    )
    run = baker.make(
        ReplayRun,
        agent="triagem",
        content=NEW,
        content_hash=prompt_content_hash(NEW),
        status=ReplayStatus.DONE,
        calls_selected=30,
        calls_done=30,
        cost_usd=Decimal("0.02"),
    )
    ana = browser.new_context(viewport=VIEWPORT, locale="pt-BR").new_page()
    log_in(ana, live_server, "ana", "/admin/")

    # With approval required, her draft's own page does not put it live.
    ana.goto(f"{live_server.url}/admin/prompts_admin/promptoverride/{draft.pk}/change/")
    ana.check("#id_is_active")
    ana.click("input[name=_save]")
    ana.wait_for_selector(".errornote")
    assert ana.locator("form .errorlist.nonfield li").first.inner_text() == (
        "A aprovação é obrigatória (PROMPT_APPROVAL_REQUIRED): um prompt só chega aos clientes por "
        "um lançamento aprovado. Salve este texto inativo e depois prepare um lançamento com ele."
    )
    ana.screenshot(path=str(screenshots_dir / "release-approval-required.png"), full_page=True)
    draft.refresh_from_db()
    assert draft.is_active is False
    ana.goto(f"{live_server.url}/admin/")

    ana.click("#release-add-link")
    ana.wait_for_url("**/admin/prompts_admin/release/add/")
    assert ana.locator("#id_prompt_triagem option:checked").inner_text() == (
        f"#{active.pk} (ativo) · versão {active.history.latest().history_id}"
    )
    ana.select_option("#id_prompt_triagem", str(draft.history.latest().history_id))
    ana.fill("#id_name", "Março")
    ana.fill("#id_note", "Pergunta o município logo no começo.")
    ana.screenshot(path=str(screenshots_dir / "release-add.png"), full_page=True)
    ana.click("input[name=_continue]")
    ana.wait_for_selector("#release-changes")
    release = Release.objects.exclude(pk=earlier.pk).get()
    assert ana.locator(".release-prompt h3").inner_text() == "Prompt de Triagem"
    assert ana.locator(".release-prompt .diff-added").inner_text() == (
        "+\tDe qual município você fala?"
    )

    ana.click("#release-propose")
    ana.wait_for_selector(".messagelist")
    assert ana.locator(".messagelist").inner_text() == (
        "Enviado para aprovação: outro editor com permissão de aprovar é quem o aprova."
    )
    assert ana.locator("#release-own-proposal").is_visible()
    assert ana.locator("#release-approve").count() == 0
    assert ana.evaluate("document.documentElement.scrollWidth") <= VIEWPORT["width"]
    ana.screenshot(path=str(screenshots_dir / "release-proposed.png"), full_page=True)
    ana.click("#release-simulate")
    ana.wait_for_selector("#persona-target")
    assert (
        f"contra as versões dos prompts e do conhecimento do lançamento #{release.pk} Março."
    ) in ana.locator("#persona-target").inner_text()
    ana.screenshot(path=str(screenshots_dir / "release-simulate.png"), full_page=True)
    ana.go_back()

    caio = browser.new_context(viewport=VIEWPORT, locale="pt-BR").new_page()
    release_url = f"/admin/prompts_admin/release/{release.pk}/change/"
    log_in(caio, live_server, "caio", release_url)
    assert (
        caio.locator(".release-evidence")
        .inner_text()
        .startswith(f"Último teste deste texto em conversas gravadas (#{run.pk}): 30 chamadas")
    )
    caio.screenshot(path=str(screenshots_dir / "release-approval.png"), full_page=True)
    caio.click("#release-approve")
    caio.wait_for_selector(".messagelist")
    assert caio.locator(".messagelist").inner_text() == (
        "Lançamento aprovado: já pode ser publicado."
    )

    ana.reload()
    ana.click("#release-publish")
    ana.wait_for_selector(".messagelist")
    assert ana.locator(".messagelist").inner_text() == (
        "Lançamento no ar: as novas conversas já o usam."
    )
    draft.refresh_from_db()
    assert draft.is_active is True
    ana.screenshot(path=str(screenshots_dir / "release-published.png"), full_page=True)

    ana.fill("#rollback-reason", "Mais transferências que o esperado")
    ana.click("#release-rollback")
    ana.wait_for_url(f"**/admin/prompts_admin/release/{earlier.pk}/change/")
    assert ana.locator(".messagelist").inner_text() == (
        f"De volta ao lançamento #{earlier.pk} Fevereiro: as novas conversas já o usam."
    )
    active.refresh_from_db()
    release.refresh_from_db()
    assert (active.is_active, release.status) == (True, "superseded")
    assert release.approved_by is not None
    assert release.approved_by.username == "caio"
