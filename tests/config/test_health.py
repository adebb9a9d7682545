"""/healthz (the process answers) and /readyz (database, migrations, broker), with their 503."""

import json
from collections.abc import Iterator

import pytest
from django.db import connection
from django.db.migrations.recorder import MigrationRecorder
from django.test import Client
from pytest_django import Settings

from config import health

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fresh_migration_check(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(health, "_migrations_applied", False)


def readyz(client: Client) -> tuple[int, dict[str, object]]:
    response = client.get("/readyz")
    assert response["Content-Type"] == "application/json"
    assert "no-cache" in response["Cache-Control"]
    return response.status_code, json.loads(response.content)


def test_healthz_answers_without_checking_anything(client: Client) -> None:
    response = client.get("/healthz")

    assert (response.status_code, response.content) == (200, b"ok")
    assert client.post("/healthz").status_code == 405


def test_readyz_is_ready_in_the_embedded_default(client: Client) -> None:
    assert readyz(client) == (
        200,
        {
            "status": "ready",
            "checks": {"database": "ok", "migrations": "ok", "broker": "eager (no broker)"},
        },
    )
    assert client.post("/readyz").status_code == 405


def test_readyz_names_a_broker_that_does_not_answer(
    client: Client, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.CELERY_TASK_ALWAYS_EAGER = False
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"  # nothing listens on port 1

    assert readyz(client) == (
        503,
        {
            "status": "unavailable",
            "checks": {"database": "ok", "migrations": "ok", "broker": "failed: OperationalError"},
        },
    )


@pytest.mark.redis
def test_readyz_is_ready_with_a_broker_that_answers(
    client: Client, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.CELERY_TASK_ALWAYS_EAGER = False
    settings.CELERY_BROKER_URL = settings.CELERY_INTEGRATION_BROKER_URL

    assert readyz(client) == (
        200,
        {"status": "ready", "checks": {"database": "ok", "migrations": "ok", "broker": "ok"}},
    )


@pytest.fixture
def unapplied_migration() -> Iterator[None]:
    """The latest conversations migration recorded as not applied (put back afterwards)."""
    recorder = MigrationRecorder(connection)
    latest = recorder.migration_qs.filter(app="conversations").order_by("-name").first()
    assert latest is not None
    name, applied = latest.name, latest.applied
    latest.delete()
    yield
    recorder.migration_qs.create(app="conversations", name=name, applied=applied)


@pytest.mark.usefixtures("unapplied_migration")
def test_readyz_says_how_many_migrations_are_not_applied(client: Client) -> None:
    assert readyz(client) == (
        503,
        {
            "status": "unavailable",
            "checks": {
                "database": "ok",
                "migrations": "1 not applied",
                "broker": "eager (no broker)",
            },
        },
    )


def test_a_check_that_raises_makes_the_process_unavailable_and_names_the_exception(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def database_down() -> str:
        raise ConnectionRefusedError("connection to 10.0.0.5:5432 refused, password=secret")

    monkeypatch.setitem(health.CHECKS, "database", database_down)

    assert health.run_checks() == (
        False,
        {
            "database": "failed: ConnectionRefusedError",
            "migrations": "ok",
            "broker": "eager (no broker)",
        },
    )
