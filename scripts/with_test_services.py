"""Run a command (``make test`` runs pytest) with the database, and optionally the broker, that
this machine offers, and say in one line each which ones it got.

Without ``DATABASE_URL`` in the environment: when PostgreSQL answers on 127.0.0.1:5432 (user
``postgres``, no password, as on the project's dev and CI machines), the database
``lab_attendance_test_<checkout>`` is created there if missing and ``DATABASE_URL`` points at it,
so the PostgreSQL-only tests (the webhook's one-statement SQL against the ORM path, row locks,
prepared statements) run in the everyday loop; otherwise the suite runs on SQLite and pytest
lists what it skipped and why. An explicit ``DATABASE_URL`` always wins (``.ci/run`` sets one;
``DATABASE_URL=`` forces SQLite).

The database name ends in a hash of the checkout's path: two checkouts (worktrees) tested at the
same time would otherwise drop and recreate each other's ``test_…`` database under pytest-django.

The broker is left alone unless ``TEST_REDIS=auto``: the Redis tests start real Celery workers,
gunicorn and throwaway servers, the slowest part of the suite (docs/development.md, "make test").

Where to look (environment, for a machine laid out differently): ``TEST_PG_HOST``,
``TEST_PG_PORT``, ``TEST_PG_USER``, ``TEST_DB_NAME``, ``TEST_REDIS_HOST``, ``TEST_REDIS_PORT``,
``TEST_REDIS_DB``. Only the standard library and psycopg (a dependency of the project).
"""

import contextlib
import hashlib
import os
import socket
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROBE_TIMEOUT = 1.0  # seconds: a local server answers in milliseconds


def default_database_name() -> str:
    checkout = hashlib.sha1(str(ROOT).encode(), usedforsecurity=False).hexdigest()[:8]
    return f"lab_attendance_test_{checkout}"


def answers(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=PROBE_TIMEOUT):
            return True
    except OSError:
        return False


def ensure_database(*, host: str, port: int, user: str, name: str) -> str | None:
    """Create `name` unless it exists; None when done, else why PostgreSQL cannot be used."""
    try:
        import psycopg
        from psycopg import sql
    except ImportError:
        return "psycopg is not installed"
    try:
        with psycopg.connect(
            host=host,
            port=port,
            user=user,
            dbname="postgres",
            connect_timeout=3,
            autocommit=True,
        ) as connection:
            exists = connection.execute(
                "SELECT 1 FROM pg_database WHERE datname = %s", [name]
            ).fetchone()
            if exists is None:
                # A concurrent run of this checkout may create it first.
                with contextlib.suppress(psycopg.errors.DuplicateDatabase):
                    connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    except psycopg.Error as error:
        reason = str(error).strip().splitlines()[-1] if str(error).strip() else type(error).__name__
        return reason
    return None


def choose_database(env: dict[str, str]) -> tuple[str | None, str]:
    """(DATABASE_URL to set or None to leave the environment as it is, the line to print)."""
    if "DATABASE_URL" in env:
        url = env["DATABASE_URL"]
        if not url:
            return None, "make test: database SQLite (DATABASE_URL is set and empty)"
        return None, f"make test: database {url} (DATABASE_URL from the environment)"
    host = env.get("TEST_PG_HOST") or "127.0.0.1"
    port = int(env.get("TEST_PG_PORT") or 5432)
    user = env.get("TEST_PG_USER") or "postgres"
    name = env.get("TEST_DB_NAME") or default_database_name()
    if not answers(host, port):
        return None, f"make test: database SQLite (no PostgreSQL on {host}:{port})"
    refused = ensure_database(host=host, port=port, user=user, name=name)
    if refused is not None:
        return None, f"make test: database SQLite ({host}:{port} answered, but: {refused})"
    url = f"postgres://{user}@{host}:{port}/{name}"
    return url, f"make test: database {url} (PostgreSQL answered on {host}:{port})"


def choose_broker(env: dict[str, str]) -> tuple[str | None, str]:
    """(CELERY_BROKER_URL to set or None, the line to print)."""
    if "CELERY_BROKER_URL" in env:
        url = env["CELERY_BROKER_URL"]
        if not url:
            return None, "make test: broker none, eager Celery (CELERY_BROKER_URL is set and empty)"
        return None, f"make test: broker {url} (CELERY_BROKER_URL from the environment)"
    if env.get("TEST_REDIS", "").lower() != "auto":
        return None, (
            "make test: broker none, eager Celery (the Redis worker tests are skipped; "
            "TEST_REDIS=auto uses Redis on 127.0.0.1:6379 when it answers)"
        )
    host = env.get("TEST_REDIS_HOST") or "127.0.0.1"
    port = int(env.get("TEST_REDIS_PORT") or 6379)
    if not answers(host, port):
        return None, f"make test: broker none, eager Celery (no Redis on {host}:{port})"
    url = f"redis://{host}:{port}/{int(env.get('TEST_REDIS_DB') or 0)}"
    return url, f"make test: broker {url} (Redis answered on {host}:{port})"


def main(argv: list[str]) -> int:
    command = argv[1:]
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        print("usage: with_test_services.py [--] command [args...]", file=sys.stderr)
        return 2
    env = dict(os.environ)
    for variable, choose in (
        ("DATABASE_URL", choose_database),
        ("CELERY_BROKER_URL", choose_broker),
    ):
        value, line = choose(env)
        print(line, flush=True)
        if value is not None:
            env[variable] = value
    os.execvpe(command[0], command, env)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
