"""End to end, black box: a signed webhook POST to gunicorn -> the turn enqueued on Redis by the
view (``process_session.delay``) -> a real Celery worker -> the fake OpenAI server -> the reply
POSTed to the fake Graph API, with the exact body Meta would receive.

Both servers are subprocesses of the real project (``config.settings``) on this run's test
database; the worker's Redis database is its own, so no other test's worker takes these tasks.
"""

import http.client
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from django.conf import settings
from django.db import connection
from model_bakery import baker

from conversations.models import Direction, Instance, Message, Session
from conversations.whatsapp.signature import compute_signature
from tests.conversations.whatsapp.conftest import (
    CUSTOMER_PHONE,
    PHONE_NUMBER_ID,
    WEBHOOK_URL,
    fixture_bytes,
)
from tests.fakes.graph_server import FakeGraphAPI
from tests.fakes.openai_server import FakeOpenAIServer

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.redis,
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
]
BASE_DIR = Path(__file__).resolve().parents[3]
REDIS_DB = 12  # this module's own broker database
APP_SECRET = "e2e-app-secret"


def _broker_url() -> str:
    base = settings.CELERY_INTEGRATION_BROKER_URL.rstrip("/")
    root, _, last = base.rpartition("/")
    return f"{root if last.isdigit() else base}/{REDIS_DB}"


def _database_url() -> str:
    db = connection.settings_dict
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    host = db["HOST"] or "127.0.0.1"
    return f"postgres://{db['USER']}{password}@{host}:{db['PORT'] or 5432}/{db['NAME']}"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _wait_for(condition: Callable[[], Any], *, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = condition()
        if result:
            return result
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def _stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=5)


@pytest.fixture
def fake_graph(httpserver) -> FakeGraphAPI:
    return FakeGraphAPI(httpserver)


@pytest.fixture
def servers(
    fake_openai: FakeOpenAIServer, fake_graph: FakeGraphAPI, tmp_path: Path
) -> Iterator[int]:
    """gunicorn serving the project and a Celery worker, on one broker; yields the web port."""
    broker = _broker_url()
    redis.Redis.from_url(broker).flushdb()
    port = _free_port()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "ENV_FILE": "/nonexistent/.env",
        "DEBUG": "False",
        "SECRET_KEY": "e2e-secret-key",
        "WHATSAPP_APP_SECRET": APP_SECRET,
        "ALLOWED_HOSTS": "127.0.0.1",
        "SECURE_SSL_REDIRECT": "False",
        "DATABASE_URL": _database_url(),
        "DB_CONN_MAX_AGE": "0",
        "CELERY_BROKER_URL": broker,
        "OPENAI_BASE_URL": fake_openai.base_url,
        "OPENAI_API_KEY": "test-openai-key",
        "LLM_RETRY_MAX": "0",
        "WHATSAPP_API_BASE_URL": fake_graph.base_url,
        "WHATSAPP_ACCESS_TOKEN": "e2e-access-token",
    }
    bin_dir = Path(sys.executable).parent
    commands = {
        "web": [
            str(bin_dir / "gunicorn"),
            "config.wsgi:application",
            f"--bind=127.0.0.1:{port}",
            "--workers=1",
        ],
        "worker": [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "config",
            "worker",
            "--concurrency=1",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
            f"--hostname=whatsapp-e2e-{port}@localhost",
        ],
    }
    processes = []
    try:
        for name, command in commands.items():
            with (tmp_path / f"{name}.log").open("w") as log:
                processes.append(
                    subprocess.Popen(
                        command, cwd=BASE_DIR, env=env, stdout=log, stderr=subprocess.STDOUT
                    )
                )
        _wait_for(lambda: _healthy(port), timeout=30, what="gunicorn")
        yield port
    finally:
        for process in processes:
            _stop(process)
        redis.Redis.from_url(broker).flushdb()


def _healthy(port: int) -> bool:
    try:
        web = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
        web.request("GET", "/healthz")
        return web.getresponse().status == 200
    except OSError:
        return False


def test_a_signed_webhook_is_answered_by_a_real_worker_through_the_graph_api(
    servers: int, fake_openai: FakeOpenAIServer, fake_graph: FakeGraphAPI
) -> None:
    baker.make(Instance, phone_number_id=PHONE_NUMBER_ID, name="Laboratório Demo")
    fake_openai.queue_text('{"s":1}Olá, Maria! Sou a **Lia**. Qual análise você precisa?')
    body = fixture_bytes("text")

    web = http.client.HTTPConnection("127.0.0.1", servers, timeout=10)
    web.request(
        "POST",
        WEBHOOK_URL,
        body=body,
        headers={
            "Content-Type": "application/json",
            "X-Hub-Signature-256": compute_signature(body=body, secret=APP_SECRET),
        },
    )
    response = web.getresponse()

    assert (response.status, response.read()) == (200, b"ok")
    _wait_for(lambda: fake_graph.sends, timeout=60, what="the reply at the Graph API")
    [send] = fake_graph.sends
    assert send.path == f"/v23.0/{PHONE_NUMBER_ID}/messages"
    assert send.headers["Authorization"] == "Bearer e2e-access-token"
    assert send.json == {
        "messaging_product": "whatsapp",
        "recipient_type": "individual",
        "to": CUSTOMER_PHONE,
        "type": "text",
        "text": {"body": "Olá, Maria! Sou a *Lia*. Qual análise você precisa?"},
    }
    assert [read.json for read in fake_graph.reads] == [
        {
            "messaging_product": "whatsapp",
            "status": "read",
            "message_id": "wamid.TEXT01",
            "typing_indicator": {"type": "text"},
        }
    ]
    session = Session.objects.get()
    reply = _wait_for(
        lambda: session.messages.filter(
            direction=Direction.OUTBOUND, delivery_status="sent"
        ).first(),
        timeout=10,
        what="the stored wamid",
    )
    assert reply.wa_message_id == "wamid.FAKE0001"
    inbound = Message.objects.get(direction=Direction.INBOUND)
    assert inbound.processed_at is not None
