"""The browser tests' Playwright fixtures (registered in tests/conftest.py): Debian's chromium
launched by path (`CHROMIUM_PATH`, default /usr/bin/chromium; Playwright never downloads a
browser), skipped with the reason printed when it is missing, and screenshots saved to
`BROWSER_SCREENSHOTS_DIR` (default: a new temporary directory; `.ci/run` sets and prints it)."""

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.db import connections

CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
VIEWPORT = {"width": 1366, "height": 768}
# The password of the staff members the browser tests log in with through the login form.
PASSWORD = "Senha-de-teste-2026!"


def browser_staff(username: str, *permissions: str) -> User:
    """A staff member who logs in with `PASSWORD`, with `permissions` ("app_label.codename")
    granted to them: a browser test is transactional, which empties the groups the data
    migrations create. An unknown permission raises."""
    user = User.objects.create_user(username, password=PASSWORD, is_staff=True)
    for permission in permissions:
        app_label, codename = permission.split(".")
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label=app_label, codename=codename)
        )
    return user


def browser_log_in(page: Any, base_url: str, username: str, next_path: str) -> None:
    """Logs `username` (password `PASSWORD`) in through the admin's login form, landing on
    `next_path`."""
    page.goto(f"{base_url}/admin/login/?next={next_path}")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url(f"**{next_path}")


@pytest.fixture
def screenshots_dir() -> Path:
    configured = os.environ.get("BROWSER_SCREENSHOTS_DIR")
    path = Path(configured) if configured else Path(tempfile.mkdtemp(prefix="browser-"))
    path.mkdir(parents=True, exist_ok=True)
    print(f"\nbrowser screenshots: {path}")
    return path


@pytest.fixture
def browser(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A headless chromium for the test (pages are opened with `browser_page` or by the test)."""
    if not (shutil.which(CHROMIUM) or Path(CHROMIUM).is_file()):
        reason = f"chromium not found at {CHROMIUM} (apt-get install chromium, or CHROMIUM_PATH)"
        print(reason)
        pytest.skip(reason)
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    # Playwright's sync API runs an event loop in this thread; the test's own ORM calls are
    # synchronous and safe.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=CHROMIUM, args=["--headless=new", "--no-sandbox", "--disable-gpu"]
        )
        try:
            yield launched
        finally:
            # The ORM calls made while Playwright's loop runs use connections of their own
            # (context-local); closed here, or the test database could not be dropped at the end.
            connections.close_all()
            launched.close()


@pytest.fixture
def browser_page(browser: Any) -> Any:
    """A page at 1,366 by 768 pixels, in pt-BR."""
    return browser.new_context(viewport=VIEWPORT, locale="pt-BR").new_page()
