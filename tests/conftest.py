"""Suite-wide fixtures and the rules that skip what this machine cannot run, with the reason."""

from collections.abc import Iterator

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client
from pytest_django import Settings
from pytest_httpserver import HTTPServer

from tests.fakes.graph_server import FakeGraphAPI
from tests.helpers.broker import IsolatedBroker
from tests.helpers.meta_payloads import Recorder
from tests.helpers.staff import PROMPT_EDITORS, SUPPORT, logged_in, staff_member

# The fake OpenAI Responses server (fixtures `fake_openai`, `openai_settings`).
pytest_plugins = [
    "tests.fakes.openai_server",
    "tests.helpers.browser",
    "tests.helpers.conversation_fixtures",
]


def _is_postgres() -> bool:
    engine: str = settings.DATABASES["default"]["ENGINE"]
    return engine == "django.db.backends.postgresql"


def _has_redis() -> bool:
    url: str = settings.CELERY_INTEGRATION_BROKER_URL
    return url.startswith("redis")


def database_header() -> str:
    """Which database this run uses, for the header (`make test` prints how it chose)."""
    db = settings.DATABASES["default"]
    if not _is_postgres():
        return (
            "database: SQLite; tests marked postgres are skipped "
            "(make test uses PostgreSQL when it answers on 127.0.0.1:5432)"
        )
    where = f"{db['HOST'] or 'local socket'}:{db['PORT'] or 5432}"
    test_name = db.get("TEST", {}).get("NAME") or f"test_{db['NAME']}"
    return f"database: PostgreSQL on {where}, test database {test_name} (from {db['NAME']})"


def broker_header() -> str:
    if not _has_redis():
        return (
            "broker: none, eager Celery; tests marked redis are skipped "
            "(set CELERY_BROKER_URL=redis://..., or TEST_REDIS=auto make test)"
        )
    return (
        f"broker: {settings.CELERY_INTEGRATION_BROKER_URL}, "
        "each worker test under a key prefix of its own"
    )


def pytest_report_header(config: pytest.Config) -> list[str]:
    return [database_header(), broker_header()]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip_pg = pytest.mark.skip(
        reason="needs PostgreSQL: make test uses it when it answers on 127.0.0.1:5432; "
        "or set DATABASE_URL=postgres://... (bash .ci/run does)"
    )
    skip_redis = pytest.mark.skip(
        reason="needs a Redis broker (most start a real Celery worker): TEST_REDIS=auto make "
        "test, or set CELERY_BROKER_URL=redis://... (bash .ci/run does)"
    )
    for item in items:
        if "postgres" in item.keywords and not _is_postgres():
            item.add_marker(skip_pg)
        if "redis" in item.keywords and not _has_redis():
            item.add_marker(skip_redis)


@pytest.fixture
def isolated_broker(request: pytest.FixtureRequest) -> Iterator[IsolatedBroker]:
    """This run's Redis with keys of this test's own (tests.helpers.broker), deleted after."""
    broker = IsolatedBroker.new(request.path.stem)
    yield broker
    broker.clean()


# Staff in the admin (superusers: pytest-django's `admin_user` and `admin_client`).


@pytest.fixture(autouse=True)
def media_downloads(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    """The media downloads the webhook enqueues after its commit, recorded, not run: in eager mode
    they would reach the Graph API of the settings. A test of the download asks for it itself
    (tests/conversations/test_media_download.py)."""
    from conversations import media_tasks

    recorder = Recorder()
    monkeypatch.setattr(media_tasks, "enqueue_media_download", recorder)
    return recorder


@pytest.fixture
def fake_graph(httpserver: HTTPServer, settings: Settings) -> FakeGraphAPI:
    """The fake Graph API, which this process's sends reach with the settings' token (a test
    that starts other processes passes them its base URL itself)."""
    graph = FakeGraphAPI(httpserver)
    settings.WHATSAPP_API_BASE_URL = graph.base_url
    settings.WHATSAPP_ACCESS_TOKEN = "test-access-token"
    return graph


@pytest.fixture
def support_user(db: None) -> User:
    """A member of Support: reads conversations with personal data in the clear, edits nothing."""
    return staff_member(SUPPORT)


@pytest.fixture
def support_client(support_user: User) -> Client:
    return logged_in(support_user)


@pytest.fixture
def prompt_editor_user(db: None) -> User:
    """A prompt editor: edits prompts and the catalog, reads conversations masked."""
    return staff_member(PROMPT_EDITORS)


@pytest.fixture
def prompt_editor_client(prompt_editor_user: User) -> Client:
    return logged_in(prompt_editor_user)
