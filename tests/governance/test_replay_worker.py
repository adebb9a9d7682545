"""Replays never starve customer turns, with a REAL Celery worker (the settings' threads pool,
no -Q: it consumes the replays queue too) on Redis and PostgreSQL.

Eight replays are started at once against a slow model (each replayed call takes a second)
while four customers write. The worker's connection pool is as small as the runs allowed at once
(2): a run that kept its connection while it waits on the model would take the whole pool for
the length of the run, and the customers' turns would wait for it (DB_POOL_TIMEOUT, then no
answer). Every customer's turn is
answered in its normal time; at most REPLAY_MAX_RUNNING runs and REPLAY_CONCURRENCY replay calls
are under way at any moment; the worker's connections (pg_stat_activity, by its
application_name) stay within its pool; every run ends done, none left queued.

The model is a fake OpenAI Responses server of this test's own (a real HTTP server on 127.0.0.1,
through the real SDK in the worker): a replay's request (the draft's text in its instructions)
is answered after a second, a customer's after a tenth, both with a greeting.
"""

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import uuid4

import psycopg
import pytest
from django.utils import timezone
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from conversations.models import Direction, Instance, Message, Session
from governance.models import ReplayRun, ReplayStatus
from governance.replay import ReplayFilters, replay_run_start
from tests import baker_recipes as recipes
from tests.fakes.openai_server import FakeOpenAIServer, responses_object
from tests.helpers.broker import BrokerClient, IsolatedBroker
from tests.helpers.processes import (
    celery_worker_command,
    database_url,
    project_env,
    start,
    stop,
    wait_for,
)
from tests.helpers.recorded_calls import DRAFT_TEXT, GREETING, conversation, draft, record_turn

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.redis,
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
]
RUNS = 8
CALLS_PER_RUN = 5
REPLAY_SECONDS = 1.0
CUSTOMER_SECONDS = 0.1
POOL = 2
MAX_RUNNING = 2
CONCURRENCY = 2
# A turn is a tenth of a second of model and a few tenths of work; the worker shares two cores
# with the replays and this test: well within this, and far from a wait for a connection.
NORMAL_TURN_SECONDS = 2.5
WORKER_APP = "replay-test-worker"


@dataclass
class SlowReplayModel:
    """The fake model: counts the replay requests in flight and their peak."""

    server: HTTPServer
    in_flight: int = 0
    peak: int = 0
    replay_requests: int = 0
    customer_requests: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def handle(self, request: Request) -> Response:
        body = json.loads(request.get_data(as_text=True))
        replay = DRAFT_TEXT in str(body.get("instructions", ""))
        with self.lock:
            if replay:
                self.replay_requests += 1
                self.in_flight += 1
                self.peak = max(self.peak, self.in_flight)
            else:
                self.customer_requests += 1
        try:
            time.sleep(REPLAY_SECONDS if replay else CUSTOMER_SECONDS)
        finally:
            if replay:
                with self.lock:
                    self.in_flight -= 1
        payload = responses_object(GREETING, model=str(body.get("model", "")))
        return Response(json.dumps(payload), status=200, content_type="application/json")


@pytest.fixture
def slow_model() -> Iterator[SlowReplayModel]:
    server = HTTPServer(host="127.0.0.1", port=0, threaded=True)
    server.start()
    model = SlowReplayModel(server)
    server.expect_request("/v1/responses", method="POST").respond_with_handler(model.handle)
    try:
        yield model
    finally:
        server.clear()
        server.stop()


@dataclass
class Sampler:
    """Every 50 ms: the worker's connections and the runs running, their peaks."""

    dsn: str
    connections_peak: int = 0
    running_peak: int = 0
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            while not self.stop.is_set():
                row = conn.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
                    [WORKER_APP],
                ).fetchone()
                running = conn.execute(
                    "SELECT count(*) FROM governance_replayrun WHERE status = 'running'"
                ).fetchone()
                self.connections_peak = max(self.connections_peak, row[0] if row else 0)
                self.running_peak = max(self.running_peak, running[0] if running else 0)
                time.sleep(0.05)


def record_calls(instance: Instance, fake_openai: FakeOpenAIServer, capture: Any) -> None:
    """The recorded calls the replays replay, made by real turns in this process."""
    for number in range(CALLS_PER_RUN):
        record_turn(conversation(instance), f"Oi, número {number}", GREETING,
                    model=fake_openai, capture=capture)  # fmt: skip
    fake_openai.reset()


def customer_writes(instance: Instance, number: int) -> Session:
    session: Session = recipes.session.make(
        instance=instance, customer_phone=f"55119888800{number}"
    )
    Message.objects.create(
        session=session,
        direction=Direction.INBOUND,
        content="Oi, quero um orçamento",
        wa_message_id=f"wamid.IN{uuid4().hex[:12]}",
        wa_timestamp=timezone.now(),
    )
    return session


def answered_after(session: Session, sent_at: float) -> float:
    """Seconds from the task's publish to the answer's commit (the reply row)."""
    wait_for(
        lambda: Message.objects.filter(session=session, direction=Direction.OUTBOUND).exists(),
        timeout=60,
        what=f"the answer to session {session.pk}",
    )
    reply = Message.objects.get(session=session, direction=Direction.OUTBOUND)
    return reply.created_at.timestamp() - sent_at


def test_replays_at_once_never_starve_the_customers_turns(
    openai_settings: FakeOpenAIServer,
    slow_model: SlowReplayModel,
    isolated_broker: IsolatedBroker,
    tmp_path: Path,
    django_capture_on_commit_callbacks: Any,
) -> None:
    instance: Instance = recipes.instance.make(access_token="")
    record_calls(instance, openai_settings, django_capture_on_commit_callbacks)
    runs = [
        replay_run_start(override=draft(), filters=ReplayFilters(), user=None) for _ in range(RUNS)
    ]
    env = project_env(
        broker=isolated_broker,
        DATABASE_URL=f"{database_url()}?application_name={WORKER_APP}",
        OPENAI_BASE_URL=slow_model.server.url_for("/v1"),
        LLM_TIMEOUT_SECONDS="10",
        LLM_RETRY_MAX="0",
        WHATSAPP_ACCESS_TOKEN="",
        DB_POOL_MAX_SIZE=str(POOL),
        DB_POOL_TIMEOUT="5",
        REPLAY_MAX_RUNNING=str(MAX_RUNNING),
        REPLAY_CONCURRENCY=str(CONCURRENCY),
        WORKER_CONFIG_CACHE_SECONDS="0",
    )
    sampler = Sampler(database_url())
    sampling = threading.Thread(target=sampler.run, daemon=True)
    worker = start(
        celery_worker_command(f"replay-test-{uuid4().hex[:8]}@localhost"),
        env=env,
        log=tmp_path / "worker.log",
    )
    client = BrokerClient(isolated_broker)
    latencies: dict[int, float] = {}
    try:
        # The worker is up once it answers a first customer.
        warm_up = customer_writes(instance, 9)
        client.send("conversations.process_session", warm_up.pk)
        wait_for(
            lambda: Message.objects.filter(session=warm_up, direction=Direction.OUTBOUND).exists(),
            timeout=90,
            what="the worker's first answer",
        )
        sampling.start()
        for run in runs:  # ten clicks at once, as it were
            client.send("governance.replay_run", run.pk, queue="replays")
        wait_for(lambda: slow_model.replay_requests >= 1, timeout=30, what="the first replay")
        for number in range(4):
            time.sleep(1.5)
            session = customer_writes(instance, number)
            sent_at = time.time()
            client.send("conversations.process_session", session.pk)
            latencies[session.pk] = answered_after(session, sent_at)
        wait_for(
            lambda: not ReplayRun.objects.exclude(status=ReplayStatus.DONE).exists(),
            timeout=RUNS * CALLS_PER_RUN * REPLAY_SECONDS / CONCURRENCY + 60,
            what="every replay done",
        )
    finally:
        sampler.stop.set()
        stop(worker)
        sampling.join(timeout=5)

    log = (tmp_path / "worker.log").read_text()
    assert "PoolTimeout" not in log
    assert max(latencies.values()) < NORMAL_TURN_SECONDS, latencies
    sessions = Session.objects.filter(pk__in=latencies)
    assert sorted(sessions.values_list("state", "handoff_reason")) == [("TRIAGE", "")] * 4
    assert (
        list(ReplayRun.objects.values_list("status", "calls_done", "detail"))
        == [(ReplayStatus.DONE, CALLS_PER_RUN, "")] * RUNS
    )
    assert slow_model.replay_requests == RUNS * CALLS_PER_RUN
    assert (slow_model.peak, sampler.running_peak) == (CONCURRENCY, MAX_RUNNING)
    assert 1 <= sampler.connections_peak <= POOL
    print(  # the figures for the report (pytest -s)
        f"customer turns {sorted(round(v, 2) for v in latencies.values())} s; "
        f"worker connections peak {sampler.connections_peak} of {POOL}; "
        f"replay calls in flight peak {slow_model.peak}; runs running peak {sampler.running_peak}"
    )
