"""The CSAT page in a real browser: Support opens it from the admin index, picks the period and
reads the tables. Playwright drives Debian's chromium (tests/helpers/browser.py); the screenshot
goes to `BROWSER_SCREENSHOTS_DIR`."""

from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from pytest_django.live_server_helper import LiveServer

from tests.helpers.browser import PASSWORD, VIEWPORT, browser_staff
from tests.support.test_csat_page import period_data

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_support_reads_the_csat_of_a_period(
    live_server: LiveServer, browser_page: Any, screenshots_dir: Path
) -> None:
    ana = browser_staff("ana", "conversations.view_satisfactionsurvey")
    User.objects.filter(pk=ana.pk).update(first_name="Ana", last_name="Lima")
    ana.refresh_from_db()
    period_data(ana, bruno=browser_staff("bruno"))
    page = browser_page

    page.goto(f"{live_server.url}/admin/login/?next=/admin/")
    page.fill("#id_username", "ana")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    # A screenshot taken while the login's redirect is loading can fail under load.
    page.wait_for_url("**/admin/")
    page.wait_for_load_state()
    page.screenshot(path=str(screenshots_dir / "csat_index.png"))
    page.get_by_role("link", name="Satisfação dos clientes (CSAT)").click()
    page.wait_for_url("**/admin/conversations/satisfactionsurvey/csat/")
    page.fill("#id_date_from", "2026-11-16")
    page.fill("#id_date_to", "2026-11-29")
    page.get_by_role("button", name="Mostrar").click()
    page.wait_for_url("**/satisfactionsurvey/csat/?*date_to=2026-11-29*")

    weeks = page.locator("#satisfaction-weeks tbody th").all_inner_texts()
    csat = page.locator("#satisfaction-staff tbody td:last-child").all_inner_texts()
    assert weeks == ["semana de 16/11/2026", "semana de 23/11/2026"]
    assert csat == ["50,0 %", "0,0 %", "100,0 %"]
    assert page.locator("#satisfaction-reasons tfoot td").last.inner_text() == "50,0 %"
    assert page.evaluate("document.documentElement.scrollWidth") <= VIEWPORT["width"]
    page.screenshot(path=str(screenshots_dir / "csat_page.png"), full_page=True)
