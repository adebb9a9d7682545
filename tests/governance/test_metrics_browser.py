"""The metrics page in a real browser: a prompt editor opens it from the prompt overrides' list,
filters the period and reads the table and the chart. Playwright drives Debian's chromium
(tests/helpers/browser.py); the screenshot goes to `BROWSER_SCREENSHOTS_DIR`."""

from pathlib import Path
from typing import Any

import pytest
from pytest_django.live_server_helper import LiveServer

from tests.governance import metrics_data
from tests.helpers.browser import PASSWORD, VIEWPORT, browser_staff

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


EDITOR = ("prompts_admin.view_promptoverride",)


def test_an_editor_compares_two_versions(
    live_server: LiveServer, browser_page: Any, screenshots_dir: Path
) -> None:
    browser_staff("edna", *EDITOR)
    data = metrics_data.build()
    page = browser_page

    page.goto(f"{live_server.url}/admin/login/?next=/admin/prompts_admin/promptoverride/")
    page.fill("#id_username", "edna")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.get_by_role("link", name="Métricas por versão do prompt").click()
    page.wait_for_url("**/admin/governance/metrics/")
    page.fill("#id_date_from", "2026-11-01")
    page.fill("#id_date_to", "2026-11-10")
    page.get_by_role("button", name="Mostrar").click()
    page.wait_for_url("**/admin/governance/metrics/?*date_to=2026-11-10*")

    rates = page.locator("#version-metrics tbody .handoff-rate").all_inner_texts()
    changes = page.locator("#version-metrics tbody .handoff-change").all_inner_texts()
    assert (rates, changes) == (["33,3 %", "50,0 %"], ["−16,7 p.p.", "—"])
    assert (
        page.locator(f'tr[data-version="{data.override_version}"] .handoff-change.down').count()
        == 1
    )
    chart = page.get_by_role(
        "img", name="Taxa de transferência das versões do prompt do agente triagem, por dia"
    )
    assert chart.locator("g.series").count() == 2
    assert page.evaluate("document.documentElement.scrollWidth") <= VIEWPORT["width"]
    page.screenshot(path=str(screenshots_dir / "prompt_metrics.png"), full_page=True)
