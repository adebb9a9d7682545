"""What `make test` runs on: scripts/with_test_services.py picks PostgreSQL when it answers (and
says so in one line), SQLite otherwise, and never overrides an explicit DATABASE_URL; the worker
tests share one Redis without touching each other's keys (tests.helpers.broker)."""

import hashlib
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit
from uuid import uuid4

import psycopg
import pytest
from django.conf import settings
from kombu import Exchange, Queue

from tests.helpers.broker import SETTINGS_MODULE, IsolatedBroker
from tests.helpers.processes import free_port

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "with_test_services.py"
# The child prints what it was given.
SHOW_ENV = (
    "import os; print('DATABASE_URL=' + repr(os.environ.get('DATABASE_URL'))); "
    "print('CELERY_BROKER_URL=' + repr(os.environ.get('CELERY_BROKER_URL')))"
)
CHOSEN_BY_THE_SCRIPT = {
    "DATABASE_URL",
    "CELERY_BROKER_URL",
    "TEST_PG_HOST",
    "TEST_PG_PORT",
    "TEST_PG_USER",
    "TEST_DB_NAME",
    "TEST_REDIS",
    "TEST_REDIS_HOST",
    "TEST_REDIS_PORT",
    "TEST_REDIS_DB",
}


def run_script(**env: str) -> list[str]:
    """The script's lines, then the child's two lines."""
    base = {k: v for k, v in os.environ.items() if k not in CHOSEN_BY_THE_SCRIPT}
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--", sys.executable, "-c", SHOW_ENV],
        cwd=ROOT,
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert result.stderr == ""
    return result.stdout.splitlines()


@pytest.fixture
def not_postgres() -> Iterator[int]:
    """A port that accepts connections and closes them at once, as no PostgreSQL does."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    stopping = threading.Event()

    def serve() -> None:
        while not stopping.is_set():
            try:
                connection, _ = server.accept()
            except TimeoutError:
                continue
            connection.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stopping.set()
    thread.join(timeout=5)
    server.close()


NO_BROKER = (
    "make test: broker none, eager Celery (the Redis worker tests are skipped; "
    "TEST_REDIS=auto uses Redis on 127.0.0.1:6379 when it answers)"
)


def test_nothing_on_the_port_runs_on_sqlite_and_says_so() -> None:
    port = free_port()

    lines = run_script(TEST_PG_PORT=str(port))

    assert lines == [
        f"make test: database SQLite (no PostgreSQL on 127.0.0.1:{port})",
        NO_BROKER,
        "DATABASE_URL=None",
        "CELERY_BROKER_URL=None",
    ]


def test_a_server_that_is_not_postgres_runs_on_sqlite_with_the_reason(not_postgres: int) -> None:
    first, *rest = run_script(TEST_PG_PORT=str(not_postgres))

    assert first.startswith(f"make test: database SQLite (127.0.0.1:{not_postgres} answered, but: ")
    assert rest == [NO_BROKER, "DATABASE_URL=None", "CELERY_BROKER_URL=None"]


def test_an_explicit_database_url_wins_over_a_postgres_that_answers() -> None:
    lines = run_script(DATABASE_URL="sqlite:////tmp/explicit.sqlite3", TEST_DB_NAME="never_made")

    assert lines == [
        "make test: database sqlite:////tmp/explicit.sqlite3 (DATABASE_URL from the environment)",
        NO_BROKER,
        "DATABASE_URL='sqlite:////tmp/explicit.sqlite3'",
        "CELERY_BROKER_URL=None",
    ]


def test_an_empty_database_url_forces_sqlite() -> None:
    lines = run_script(DATABASE_URL="", TEST_DB_NAME="never_made")

    assert lines[0] == "make test: database SQLite (DATABASE_URL is set and empty)"
    assert lines[2] == "DATABASE_URL=''"


def test_the_default_database_is_one_per_checkout() -> None:
    checkout = hashlib.sha1(str(ROOT).encode(), usedforsecurity=False).hexdigest()[:8]
    code = (
        "import runpy; print(runpy.run_path("
        f"{str(SCRIPT)!r}, run_name='probe')['default_database_name']())"
    )

    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=30
    )

    assert result.stdout.strip() == f"lab_attendance_test_{checkout}"


@pytest.mark.postgres
def test_a_postgres_that_answers_gets_its_database_created_once_and_used() -> None:
    db = settings.DATABASES["default"]
    host, port, user = db["HOST"] or "127.0.0.1", int(db["PORT"] or 5432), db["USER"]
    name = f"lab_attendance_test_probe_{uuid4().hex[:8]}"
    env = {"TEST_PG_HOST": host, "TEST_PG_PORT": str(port), "TEST_PG_USER": user}
    if db["PASSWORD"]:  # libpq reads it, for the script as for Django
        env["PGPASSWORD"] = db["PASSWORD"]
    url = f"postgres://{user}@{host}:{port}/{name}"
    expected = [
        f"make test: database {url} (PostgreSQL answered on {host}:{port})",
        NO_BROKER,
        f"DATABASE_URL={url!r}",
        "CELERY_BROKER_URL=None",
    ]
    try:
        first = run_script(**env, TEST_DB_NAME=name)
        again = run_script(**env, TEST_DB_NAME=name)  # the database exists now
        with psycopg.connect(
            host=host, port=port, user=user, password=db["PASSWORD"], dbname="postgres"
        ) as connection:
            found = connection.execute(
                "SELECT count(*) FROM pg_database WHERE datname = %s", [name]
            ).fetchone()
    finally:
        with psycopg.connect(
            host=host,
            port=port,
            user=user,
            password=db["PASSWORD"],
            dbname="postgres",
            autocommit=True,
        ) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}"')

    assert first == expected
    assert again == expected
    assert found == (1,)


def test_redis_is_used_only_when_asked_and_when_it_answers() -> None:
    port = free_port()

    asked = run_script(DATABASE_URL="", TEST_REDIS="auto", TEST_REDIS_PORT=str(port))
    explicit = run_script(DATABASE_URL="", TEST_REDIS="auto", CELERY_BROKER_URL="redis://x:1/3")

    assert asked[1:] == [
        f"make test: broker none, eager Celery (no Redis on 127.0.0.1:{port})",
        "DATABASE_URL=''",
        "CELERY_BROKER_URL=None",
    ]
    assert explicit[1:] == [
        "make test: broker redis://x:1/3 (CELERY_BROKER_URL from the environment)",
        "DATABASE_URL=''",
        "CELERY_BROKER_URL='redis://x:1/3'",
    ]


@pytest.mark.redis
def test_redis_that_answers_is_used_when_asked() -> None:
    redis_url = urlsplit(settings.CELERY_INTEGRATION_BROKER_URL)
    host, port = redis_url.hostname or "127.0.0.1", redis_url.port or 6379
    env = {"TEST_REDIS_HOST": host, "TEST_REDIS_PORT": str(port), "TEST_REDIS_DB": "11"}

    lines = run_script(DATABASE_URL="", TEST_REDIS="auto", **env)

    assert lines[1:] == [
        f"make test: broker redis://{host}:{port}/11 (Redis answered on {host}:{port})",
        "DATABASE_URL=''",
        f"CELERY_BROKER_URL='redis://{host}:{port}/11'",
    ]


# --- One Redis, many runs ------------------------------------------------------------------------


def _publish(broker: IsolatedBroker, body: str) -> None:
    queue = Queue("celery", Exchange("celery", type="direct"), routing_key="celery")
    with broker.connection() as connection, connection.Producer() as producer:
        producer.publish(body, exchange=queue.exchange, routing_key="celery", declare=[queue])


def _drain(broker: IsolatedBroker) -> list[str]:
    with broker.connection() as connection, connection.SimpleQueue("celery") as queue:
        received: list[str] = []
        while True:
            try:
                message = queue.get(timeout=0.2)
            except queue.Empty:
                return received
            received.append(message.payload)
            message.ack()


@pytest.mark.redis
def test_two_runs_on_one_redis_database_neither_take_nor_delete_each_other_s_tasks() -> None:
    ours, theirs = IsolatedBroker.new("ours"), IsolatedBroker.new("theirs")
    # A key of someone else's on the same database (a developer's worker, say), outside both.
    outsider = f"outsider-{uuid4().hex}"
    client = ours.client()
    client.rpush(outsider, "their task")
    try:
        _publish(ours, "our task")
        _publish(theirs, "their queued task")

        received = _drain(ours)
        ours.clean()

        assert received == ["our task"]
        assert ours.keys() == []
        assert theirs.keys() == [
            "_kombu.binding.celery",
            "_kombu.binding_permanent.celery",
            "celery",
        ]
        assert _drain(theirs) == ["their queued task"]
        assert client.lrange(outsider, 0, -1) == [b"their task"]
    finally:
        theirs.clean()
        client.delete(outsider)


def test_a_subprocess_gets_the_project_settings_with_the_test_s_key_prefix() -> None:
    broker = IsolatedBroker(url="redis://127.0.0.1:6379/0", prefix="test:probe:abc:")
    code = (
        "import django; django.setup(); from django.conf import settings; "
        "from config.celery import app; "
        "print(settings.CELERY_BROKER_TRANSPORT_OPTIONS == app.conf.broker_transport_options); "
        "print(sorted(app.conf.broker_transport_options.items())); "
        "print(settings.CELERY_BROKER_TRANSPORT, settings.DEBUG)"
    )
    env = {
        **{k: v for k, v in os.environ.items() if k not in CHOSEN_BY_THE_SCRIPT},
        "ENV_FILE": "/nonexistent/.env",
        "DEBUG": "False",
        "SECRET_KEY": "subprocess-test-secret-key",
        "WHATSAPP_APP_SECRET": "subprocess-test-app-secret",
        "FIELD_ENCRYPTION_KEYS": "dGVzdC1maWVsZC1lbmNyeXB0aW9uLWtleS0zMmJ5dGU=",
        "DATABASE_URL": "sqlite:////nonexistent/never-opened.db",
        **broker.subprocess_env(),
    }

    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )

    assert env["DJANGO_SETTINGS_MODULE"] == SETTINGS_MODULE
    visibility = settings.CELERY_TASK_TIME_LIMIT * 4
    assert result.stdout.splitlines() == [
        "True",
        f"[('global_keyprefix', 'test:probe:abc:'), ('visibility_timeout', {visibility})]",
        "config.redis_transport:Transport False",
    ]
