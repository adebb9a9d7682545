"""Suite-wide fixtures and the rules that skip what this machine cannot run, with the reason."""

import pytest
from django.conf import settings

# The fake OpenAI Responses server (fixtures `fake_openai`, `openai_settings`).
pytest_plugins = ["tests.fakes.openai_server"]


def _is_postgres() -> bool:
    return settings.DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip_pg = pytest.mark.skip(
        reason="needs PostgreSQL: set DATABASE_URL=postgres://... (bash .ci/run does)"
    )
    skip_redis = pytest.mark.skip(
        reason="needs Redis and a real Celery worker: set CELERY_BROKER_URL=redis://... "
        "(bash .ci/run does)"
    )
    for item in items:
        if "postgres" in item.keywords and not _is_postgres():
            item.add_marker(skip_pg)
        if "redis" in item.keywords and not settings.CELERY_INTEGRATION_BROKER_URL.startswith(
            "redis"
        ):
            item.add_marker(skip_redis)
