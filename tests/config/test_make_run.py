"""What `make run` does after installing: migrate SQLite, bootstrap, serve the admin."""

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.mark.slow
def test_make_run_steps_serve_the_browser_log_in_page(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in {"DJANGO_SETTINGS_MODULE"}}
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "ENV_FILE": str(ROOT / ".env.example"),
            "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
            "CELERY_BROKER_URL": "",
            "ADMIN_PASSWORD": "local-admin-pass-123",
        }
    )
    manage = [sys.executable, str(ROOT / "manage.py")]
    subprocess.run(
        [*manage, "migrate", "--noinput"], env=env, check=True, capture_output=True, timeout=120
    )
    boot = subprocess.run(
        [*manage, "bootstrap_dev"], env=env, check=True, capture_output=True, text=True, timeout=60
    )
    assert "Created superuser 'admin' with password: from ADMIN_PASSWORD" in boot.stdout
    again = subprocess.run(
        [*manage, "bootstrap_dev"], env=env, check=True, capture_output=True, text=True, timeout=60
    )
    assert "Created superuser" not in again.stdout

    port = free_port()
    server = subprocess.Popen(
        [*manage, "runserver", f"127.0.0.1:{port}", "--noreload"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        body = ""
        status = 0
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(
                    f"http://127.0.0.1:{port}/admin/login/", timeout=2
                ) as resp:
                    status = resp.status
                    body = resp.read().decode()
                break
            except OSError:
                time.sleep(0.2)
        assert status == 200
        assert "<title>Acessar | Atendimento WhatsApp</title>" in body
    finally:
        server.terminate()
        server.wait(timeout=10)
