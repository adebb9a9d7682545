"""Helpers for the tests that run the real thing in subprocesses (gunicorn, a Celery worker)
against this run's PostgreSQL test database and a Redis broker (a test's own: tests.helpers.broker)."""

import functools
import http.client
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from django.db import connection

from tests.helpers.broker import IsolatedBroker

BASE_DIR = Path(__file__).resolve().parents[2]


def database_url() -> str:
    """This run's test database, as a URL a subprocess can use."""
    db = connection.settings_dict
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    host = db["HOST"] or "127.0.0.1"
    return f"postgres://{db['USER']}{password}@{host}:{db['PORT'] or 5432}/{db['NAME']}"


@functools.cache
def collected_static_root() -> str:
    """A STATIC_ROOT filled once per test process by the production `collectstatic` (hashed,
    compressed copies), which the subprocesses' pages need: with DEBUG=False a template's
    ``{% static %}`` names the hashed file the manifest lists."""
    root = tempfile.mkdtemp(prefix="lab-attendance-static-")
    subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput", "--verbosity=0"],
        cwd=BASE_DIR,
        env={**production_env(), "STATIC_ROOT": root},
        check=True,
    )
    return root


def production_env(**overrides: str) -> dict[str, str]:
    """The production settings module (DEBUG=False) with test secrets and no .env (the field
    encryption key is the test settings' own, from this process's environment)."""
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "ENV_FILE": "/nonexistent/.env",
        "DEBUG": "False",
        "SECRET_KEY": "subprocess-test-secret-key",
        "WHATSAPP_APP_SECRET": "subprocess-test-app-secret",
        **overrides,
    }


def project_env(*, broker: str | IsolatedBroker, **overrides: str) -> dict[str, str]:
    """The production settings module with test secrets, this run's database and `broker` (a
    test's isolated broker on the shared Redis, or the URL of a throwaway server)."""
    broker_env = (
        broker.subprocess_env()
        if isinstance(broker, IsolatedBroker)
        else {"CELERY_BROKER_URL": broker}
    )
    return {
        **production_env(),
        "STATIC_ROOT": collected_static_root(),
        "DATABASE_URL": database_url(),
        "DB_CONN_MAX_AGE": "0",
        "OPENAI_API_KEY": "test-openai-key",
        **broker_env,
        **overrides,
    }


def celery_worker_command(hostname: str) -> list[str]:
    """A worker of the real app with the production pool and concurrency (the settings':
    threads; the soft time limit comes from config/task_deadlines.py there)."""
    return [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "config",
        "worker",
        "--without-gossip",
        "--without-mingle",
        "--without-heartbeat",
        "--loglevel=INFO",
        f"--hostname={hostname}",
    ]


def start(command: list[str], *, env: Mapping[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("w") as out:
        return subprocess.Popen(
            command, cwd=BASE_DIR, env=dict(env), stdout=out, stderr=subprocess.STDOUT
        )


def stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=5)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_for(condition: Callable[[], Any], *, timeout: float, what: str) -> Any:
    """Poll `condition` until it returns something truthy; fail the test after `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = condition()
        if result:
            return result
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def web_healthy(port: int) -> bool:
    try:
        web = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
        web.request("GET", "/healthz")
        return web.getresponse().status == 200
    except OSError:
        return False


@contextmanager
def web_and_worker(*, env: Mapping[str, str], logs: Path, name: str) -> Iterator[int]:
    """gunicorn serving the project and a Celery worker, both with `env` (`project_env`), until
    the block ends; yields the web port once /healthz answers. Logs go to `logs`/web.log and
    worker.log."""
    port = free_port()
    commands = {
        "web": [
            str(Path(sys.executable).parent / "gunicorn"),
            "config.wsgi:application",
            f"--bind=127.0.0.1:{port}",
            "--workers=1",
        ],
        "worker": celery_worker_command(f"{name}-{port}@localhost"),
    }
    processes = []
    try:
        for process_name, command in commands.items():
            processes.append(start(command, env=env, log=logs / f"{process_name}.log"))
        wait_for(lambda: web_healthy(port), timeout=30, what="gunicorn")
        yield port
    finally:
        for process in processes:
            stop(process)
