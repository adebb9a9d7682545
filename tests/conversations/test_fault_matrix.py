"""The fault matrix, black box: gunicorn serving the project and a real Celery worker, on PostgreSQL
and Redis, with one outside dependency failing at a time.

- Redis stopped during traffic: the webhook still answers 200 and stores; once Redis is back the
  stalled-sessions sweep enqueues the lost turns and each runs exactly once.
- PostgreSQL restarted during traffic: 503 only while it is down, nothing half-stored, and the
  same worker answers once it is back.
- The model provider down (5xx and timeouts): each turn hands off with the fixed text, and the
  circuit breaker opens so later turns make no request at all.
- The Graph API down: the reply is retried with backoff and delivered once when it is back; a
  reply still unsent when the 24-hour window closes is marked failed and listed by the admin's
  "failed sends" filter.

The Redis and PostgreSQL that are stopped here are throwaway servers of this module's own
(tests/helpers/throwaway.py) on free ports — never the shared ones. Deliveries are posted one
customer at a time and waited for, so the counts are exact.
"""

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any
from uuid import uuid4

import psycopg
import pytest
from celery import Celery
from django.test import Client
from django.utils import timezone
from kombu import Connection, Exchange, Queue
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from agents.circuit import CircuitState
from conversations.lease import STALLED_PENDING_GRACE, stalled_sessions_requeue
from conversations.models import (
    Direction,
    HandoffSummary,
    LLMCall,
    Message,
    ProviderCircuit,
    Session,
)
from conversations.sweeps import WINDOW_EXPIRED, unsent_messages_requeue
from prompts_admin.models import RuntimeConfig
from tests import baker_recipes as recipes
from tests.fakes.graph_server import FakeGraphAPI, graph_error
from tests.fakes.openai_server import FakeOpenAIServer
from tests.helpers.processes import (
    BASE_DIR,
    celery_worker_command,
    free_port,
    project_env,
    start,
    stop,
    wait_for,
)
from tests.helpers.throwaway import ThrowawayPostgres, ThrowawayRedis
from tests.helpers.webhooks import PHONE_NUMBER_ID, healthy, post_delivery, text_delivery

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]
APP_SECRET = "fault-matrix-app-secret"
HANDOFF_TEXT = "Um especialista vai continuar seu atendimento."


class SwitchableGraph(FakeGraphAPI):
    """The fake Graph API with an outage switch: while `down`, every send gets a 503 (the typing
    indicator still answers, so only the replies are failing). Refused sends are only counted."""

    def __init__(self, httpserver: HTTPServer) -> None:
        self.down = False
        self.refused = 0
        super().__init__(httpserver)

    def _handle(self, request: Request) -> Response:
        if self.down and "type" in json.loads(request.get_data() or b"{}"):
            with self._lock:
                self.refused += 1
            return Response(
                json.dumps(graph_error(2, "Service temporarily unavailable")),
                status=503,
                content_type="application/json",
            )
        return super()._handle(request)

    def delivered_to(self, phone: str) -> int:
        """Sends to `phone` the fake accepted."""
        return sum(1 for send in self.sends if send.json.get("to") == phone)


@dataclass
class Stack:
    """gunicorn and a worker of the real project; `port` is gunicorn's."""

    port: int
    broker: str
    env: dict[str, str]
    logs: Path
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def post(self, phone: str, text: str = "Oi, preciso de uma análise de água") -> int:
        return self.post_body(text_delivery(phone=phone, wamid=f"wamid.F{uuid4().hex}", text=text))

    def post_body(self, body: bytes) -> int:
        return post_delivery(self.port, body, secret=APP_SECRET)

    def send_task(self, name: str, *args: Any) -> None:
        # Celery prefers CELERY_BROKER_URL from the environment to `broker=`: pass a connection.
        with Connection(self.broker) as connection:
            Queue("celery", Exchange("celery", type="direct"), routing_key="celery").bind(
                connection
            ).declare()
            Celery(set_as_current=False).send_task(name, args=list(args), connection=connection)

    def log(self, name: str) -> str:
        return (self.logs / f"{name}.log").read_text()


def start_stack(env: dict[str, str], logs: Path) -> Stack:
    port = free_port()
    stack = Stack(port=port, broker=env["CELERY_BROKER_URL"], env=env, logs=logs)
    commands = {
        "web": [
            str(Path(sys.executable).parent / "gunicorn"),
            "config.wsgi:application",
            f"--bind=127.0.0.1:{port}",
            "--workers=1",
            "--timeout=60",
        ],
        "worker": celery_worker_command(f"faults-{port}@localhost"),
    }
    for name, command in commands.items():
        stack.processes.append(start(command, env=env, log=logs / f"{name}.log"))
    wait_for(lambda: healthy(port), timeout=60, what="gunicorn")
    return stack


def stop_all(processes: list[subprocess.Popen[bytes]]) -> None:
    """Ask every process to stop first, then wait for each: their shutdowns overlap."""
    for process in processes:
        process.terminate()
    for process in processes:
        stop(process)


def stack_env(
    *, broker: str, openai: FakeOpenAIServer, graph: FakeGraphAPI, **overrides: str
) -> dict[str, str]:
    return project_env(
        broker=broker,
        WHATSAPP_APP_SECRET=APP_SECRET,
        ALLOWED_HOSTS="127.0.0.1",
        SECURE_SSL_REDIRECT="False",
        OPENAI_BASE_URL=openai.base_url,
        LLM_RETRY_MAX="0",
        LLM_TIMEOUT_SECONDS="1",
        LLM_CIRCUIT_FAILURES="2",
        WHATSAPP_API_BASE_URL=graph.base_url,
        WHATSAPP_ACCESS_TOKEN="faults-access-token",
        **overrides,
    )


@pytest.fixture
def graph(httpserver: HTTPServer) -> SwitchableGraph:
    return SwitchableGraph(httpserver)


@pytest.fixture
def redis_server() -> Iterator[ThrowawayRedis]:
    server = ThrowawayRedis().start()
    yield server
    server.stop()


@pytest.fixture
def stack(
    transactional_db: None,
    redis_server: ThrowawayRedis,
    fake_openai: FakeOpenAIServer,
    graph: SwitchableGraph,
    tmp_path: Path,
) -> Iterator[Stack]:
    """The project on this run's test database and a throwaway Redis."""
    recipes.instance.make(phone_number_id=PHONE_NUMBER_ID, name="Laboratório")
    config = RuntimeConfig.load()
    config.handoff_message_open = config.handoff_message_closed = HANDOFF_TEXT
    config.save()
    env = stack_env(broker=redis_server.url(), openai=fake_openai, graph=graph)
    running = start_stack(env, tmp_path)
    try:
        yield running
    finally:
        stop_all(running.processes)


def phone(n: int) -> str:
    return f"5511970000{n:03d}"


def summary_written(phone_number: str) -> bool:
    return HandoffSummary.objects.filter(session__customer_phone=phone_number).exists()


def replies_to(phone_number: str) -> list[Message]:
    return list(
        Message.objects.filter(
            session__customer_phone=phone_number, direction=Direction.OUTBOUND
        ).order_by("id")
    )


# --- (a) Redis -----------------------------------------------------------------------------------


def test_redis_stopped_during_traffic_the_webhook_stores_and_each_turn_runs_once_when_it_is_back(
    stack: Stack,
    redis_server: ThrowawayRedis,
    fake_openai: FakeOpenAIServer,
    graph: SwitchableGraph,
) -> None:
    customers = 4
    for n in range(customers + 1):
        fake_openai.queue_text(f'{{"s":1}}Olá, cliente {n}! Qual análise você precisa?')
    assert stack.post(phone(0)) == 200
    wait_for(lambda: graph.delivered_to(phone(0)), timeout=60, what="the first reply")

    redis_server.stop()
    statuses = [stack.post(phone(n)) for n in range(1, customers + 1)]

    assert statuses == [200] * customers
    assert Message.objects.filter(direction=Direction.INBOUND).count() == customers + 1
    assert fake_openai.request_count == 1
    redis_server.start()  # empty: the turns published while it was down are gone
    requeued = stalled_sessions_requeue(
        now=timezone.now() + STALLED_PENDING_GRACE + timedelta(seconds=1),
        grace=STALLED_PENDING_GRACE,
        enqueue=lambda session_id: stack.send_task("conversations.process_session", session_id),
    )
    assert len(requeued) == customers
    wait_for(
        lambda: all(graph.delivered_to(phone(n)) for n in range(customers + 1)),
        timeout=60,
        what="every reply",
    )
    # A second sweep finds nothing left to do, and nobody got a second answer.
    again = stalled_sessions_requeue(
        now=timezone.now() + STALLED_PENDING_GRACE + timedelta(seconds=1),
        grace=STALLED_PENDING_GRACE,
        enqueue=lambda session_id: stack.send_task("conversations.process_session", session_id),
    )
    assert again == []
    assert [graph.delivered_to(phone(n)) for n in range(customers + 1)] == [1] * (customers + 1)
    assert fake_openai.request_count == LLMCall.objects.count() == customers + 1
    assert Message.objects.filter(direction=Direction.INBOUND, processed_at=None).count() == 0


# --- (c) the model provider ------------------------------------------------------------------------


def test_provider_down_each_turn_hands_off_with_the_fixed_text_and_the_circuit_opens(
    stack: Stack, fake_openai: FakeOpenAIServer, graph: SwitchableGraph
) -> None:
    fake_openai.queue_error(500)  # the first turn
    fake_openai.queue_timeout(3)  # its summary: LLM_TIMEOUT_SECONDS is 1
    customers = 4

    for n in range(customers):
        assert stack.post(phone(n)) == 200
        wait_for(partial(graph.delivered_to, phone(n)), timeout=60, what=f"reply {n}")
        wait_for(
            partial(summary_written, phone(n)),
            timeout=60,
            what=f"summary {n}",
        )

    sessions = Session.objects.order_by("id")
    assert [(s.state, s.handoff_reason) for s in sessions] == [
        ("HUMAN", "llm_provider_error")
    ] * customers
    assert [[m.content for m in replies_to(phone(n))] for n in range(customers)] == [
        [HANDOFF_TEXT]
    ] * customers
    assert fake_openai.request_count == 2
    circuit = ProviderCircuit.objects.get()
    assert (circuit.state, circuit.failures) == (CircuitState.OPEN, 2)
    outcomes = list(LLMCall.objects.order_by("id").values_list("purpose", "outcome"))
    assert outcomes[:2] == [("agent", "provider_error"), ("summary", "timeout")]
    assert outcomes[2:] == [("agent", "circuit_open"), ("summary", "circuit_open")] * (
        customers - 1
    )
    assert "llm_circuit_opened" in stack.log("worker")


# --- (d) the Graph API ----------------------------------------------------------------------------


def test_graph_down_the_reply_is_retried_with_backoff_and_delivered_once_when_it_is_back(
    stack: Stack, fake_openai: FakeOpenAIServer, graph: SwitchableGraph
) -> None:
    fake_openai.queue_text('{"s":1}Olá! Qual análise você precisa?')
    graph.down = True

    assert stack.post(phone(0)) == 200
    wait_for(
        lambda: Message.objects.filter(direction=Direction.OUTBOUND, send_attempts__gte=2).exists(),
        timeout=60,
        what="a retried send",
    )
    graph.down = False
    wait_for(lambda: graph.delivered_to(phone(0)), timeout=60, what="the reply")
    # The worker commits the send's outcome just after the Graph API answered it.
    wait_for(
        lambda: replies_to(phone(0))[0].delivery_status == "sent", timeout=10, what="the commit"
    )

    [reply] = replies_to(phone(0))
    assert (reply.delivery_status, reply.wa_message_id) == ("sent", "wamid.FAKE0001")
    assert reply.send_attempts >= 3
    assert graph.delivered_to(phone(0)) == 1


def test_graph_down_past_the_window_the_reply_is_failed_and_listed_as_a_failed_send(
    stack: Stack, fake_openai: FakeOpenAIServer, graph: SwitchableGraph, admin_client: Client
) -> None:
    fake_openai.queue_text('{"s":1}Olá! Qual análise você precisa?')
    graph.down = True
    assert stack.post(phone(0)) == 200
    wait_for(
        lambda: (
            Message.objects.filter(direction=Direction.OUTBOUND, send_attempts__gte=1)
            .exclude(delivery_error_code=None)
            .exists()
        ),
        timeout=60,
        what="a failed attempt",
    )

    # A day later (the worker is still retrying: a send it holds right now is left alone).
    later = timezone.now() + timedelta(hours=24, minutes=1)
    wait_for(
        lambda: unsent_messages_requeue(now=later, enqueue=lambda pk: None).expired,
        timeout=30,
        what="the sweep to expire the reply",
    )

    [reply] = replies_to(phone(0))
    assert (reply.delivery_status, reply.delivery_error_title) == ("failed", WINDOW_EXPIRED)
    page = admin_client.get("/admin/conversations/message/?failed_sends=failed").content.decode()
    assert f"/admin/conversations/message/{reply.pk}/change/" in page
    sessions = admin_client.get("/admin/conversations/session/?failed_sends=failed")
    assert f"/admin/conversations/session/{reply.session_id}/change/" in sessions.content.decode()
    assert graph.delivered_to(phone(0)) == 0


# --- (b) PostgreSQL ------------------------------------------------------------------------------


def test_postgres_restarted_during_traffic_503_only_while_down_and_the_worker_recovers(
    redis_server: ThrowawayRedis,
    fake_openai: FakeOpenAIServer,
    graph: SwitchableGraph,
    tmp_path: Path,
) -> None:
    cluster = ThrowawayPostgres().init()
    cluster.start()
    processes: list[subprocess.Popen[bytes]] = []
    try:
        cluster.create_database("faults")
        url = cluster.url("faults")
        env = stack_env(
            broker=redis_server.url(), openai=fake_openai, graph=graph, DATABASE_URL=url
        )
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
            cwd=BASE_DIR,
            env=env,
            check=True,
        )
        subprocess.run(
            [
                sys.executable,
                "-c",
                "import django; django.setup(); from conversations.models import Instance; "
                f"Instance.objects.create(phone_number_id='{PHONE_NUMBER_ID}', name='Lab')",
            ],
            cwd=BASE_DIR,
            env=env,
            check=True,
        )
        for _ in range(3):
            fake_openai.queue_text('{"s":1}Olá! Qual análise você precisa?')
        stack = start_stack(env, tmp_path)
        processes = stack.processes

        assert stack.post(phone(0)) == 200
        wait_for(lambda: graph.delivered_to(phone(0)), timeout=60, what="the first reply")
        cluster.stop()
        during = text_delivery(phone=phone(1), wamid="wamid.DURING", text="Alguém aí?")
        statuses_while_down = [stack.post_body(during) for _ in range(3)]
        cluster.start()
        # Meta delivers the refused body again; a new customer writes too.
        status_redelivered = stack.post_body(during)
        status_after = stack.post(phone(2))
        wait_for(
            lambda: graph.delivered_to(phone(1)) and graph.delivered_to(phone(2)),
            timeout=60,
            what="the replies after the restart",
        )

        assert statuses_while_down == [503] * 3
        assert (status_redelivered, status_after) == (200, 200)
        with psycopg.connect(url, autocommit=True) as db:
            deliveries = db.execute("SELECT count(*) FROM conversations_webhookdelivery").fetchone()
            inbound = db.execute(
                "SELECT customer_phone, count(*) FROM conversations_message m "
                "JOIN conversations_session s ON s.id = m.session_id "
                "WHERE direction = 'INBOUND' GROUP BY customer_phone ORDER BY customer_phone"
            ).fetchall()
        assert deliveries == (3,)
        assert inbound == [(phone(0), 1), (phone(1), 1), (phone(2), 1)]
        assert [graph.delivered_to(phone(n)) for n in range(3)] == [1, 1, 1]
        assert fake_openai.request_count == 3
    finally:
        stop_all(processes)
        cluster.destroy()
