"""End to end with a REAL Celery worker on Redis and PostgreSQL: the task is sent through the
broker, the worker runs the pipeline against the fake OpenAI server and sends the answer to the
fake Graph API — and, with a short soft time limit, a model that is too slow ends in a handoff.

The worker gets broker keys of this test's own (tests.helpers.broker: no other test's or run's
worker takes these tasks) and the test database of this run; both fakes are real HTTP servers on
127.0.0.1.
"""

from collections.abc import Iterator
from pathlib import Path
from uuid import uuid4

import pytest
from django.utils import timezone
from model_bakery import baker
from pytest_httpserver import HTTPServer

from conversations.models import Direction, HandoffSummary, Instance, LLMCall, Message, Session
from prompts_admin.models import RuntimeConfig
from tests.fakes.graph_server import FakeGraphAPI
from tests.fakes.openai_server import FakeOpenAIServer
from tests.helpers.broker import BrokerClient, IsolatedBroker
from tests.helpers.processes import (
    celery_worker_command,
    project_env,
    start,
    stop,
    wait_for,
)

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.redis,
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
]
SOFT_TIME_LIMIT = 3
CUSTOMER_PHONE = "5511966665555"


@pytest.fixture
def fake_graph(httpserver: HTTPServer) -> FakeGraphAPI:
    return FakeGraphAPI(httpserver)


@pytest.fixture
def worker(
    fake_openai: FakeOpenAIServer,
    fake_graph: FakeGraphAPI,
    tmp_path: Path,
    isolated_broker: IsolatedBroker,
) -> Iterator[BrokerClient]:
    """A worker of the real app (the default threads pool, where the soft time limit is
    config/task_deadlines.py's); yields a client app."""
    env = project_env(
        broker=isolated_broker,
        OPENAI_BASE_URL=fake_openai.base_url,
        LLM_TIMEOUT_SECONDS="10",
        LLM_RETRY_MAX="0",
        WHATSAPP_API_BASE_URL=fake_graph.base_url,
        WHATSAPP_ACCESS_TOKEN="test-access-token",
        CELERY_TASK_SOFT_TIME_LIMIT=str(SOFT_TIME_LIMIT),
        CELERY_TASK_TIME_LIMIT=str(SOFT_TIME_LIMIT + 5),
    )
    process = start(
        celery_worker_command(f"pipeline-test-{uuid4().hex[:8]}@localhost"),
        env=env,
        log=tmp_path / "worker.log",
    )
    try:
        yield BrokerClient(isolated_broker)
    finally:
        stop(process)


def _session_with_message(text: str) -> tuple[Session, Message]:
    instance = baker.make(
        Instance, phone_number_id="100000000000001", name="Laboratório Demo", access_token=""
    )
    session = Session.objects.create(instance=instance, customer_phone=CUSTOMER_PHONE)
    message = Message.objects.create(
        session=session,
        direction=Direction.INBOUND,
        content=text,
        wa_message_id=f"wamid.IN{uuid4().hex[:12]}",
        wa_timestamp=timezone.now(),
    )
    return session, message


def test_a_real_worker_answers_through_the_model_and_the_graph_api(
    worker: BrokerClient, fake_openai: FakeOpenAIServer, fake_graph: FakeGraphAPI
) -> None:
    session, message = _session_with_message("Oi, bom dia!")
    fake_openai.queue_text('{"s":1}Olá! Sou a **Lia**. Como posso ajudar?')

    worker.send("conversations.process_session", session.pk)

    # The worker may still be starting: the task waits in the queue.
    wait_for(lambda: fake_graph.sends, timeout=60, what="the answer at the Graph API")
    [send] = fake_graph.sends
    callback_data = send.json.pop("biz_opaque_callback_data")
    assert send.json == {
        "messaging_product": "whatsapp",
        "recipient_type": "individual",
        "to": CUSTOMER_PHONE,
        "type": "text",
        "text": {"body": "Olá! Sou a *Lia*. Como posso ajudar?"},
    }
    # The read receipt goes from the worker's background threads, before the model is asked.
    wait_for(lambda: fake_graph.reads, timeout=10, what="the read receipt")
    assert [r.json["message_id"] for r in fake_graph.reads] == [message.wa_message_id]
    assert fake_openai.request_count == 1
    reply = wait_for(
        lambda: Message.objects.filter(
            session=session, direction=Direction.OUTBOUND, delivery_status="sent"
        ).first(),
        timeout=10,
        what="the sent status",
    )
    assert reply.wa_message_id == "wamid.FAKE0001"
    assert callback_data == f"message:{reply.pk}"
    message.refresh_from_db()
    assert message.processed_at is not None
    assert list(LLMCall.objects.values_list("purpose", "outcome")) == [("agent", "ok")]
    session.refresh_from_db()
    assert (session.state, session.lease_token) == ("TRIAGE", None)


def test_the_soft_time_limit_ends_a_slow_turn_in_a_timeout_handoff(
    worker: BrokerClient, fake_openai: FakeOpenAIServer, fake_graph: FakeGraphAPI
) -> None:
    session, message = _session_with_message("Oi")
    # Slower than the soft time limit, faster than the client's read timeout (10 s).
    fake_openai.queue_text('{"s":1}tarde demais', delay=SOFT_TIME_LIMIT + 2)
    fake_openai.queue_text('{"motivo_encerramento":"tempo esgotado","resumo_texto":"Oi."}')

    worker.send("conversations.process_session", session.pk)

    wait_for(lambda: fake_graph.sends, timeout=60, what="the handoff text at the Graph API")
    # The worker sends the handoff text itself, after the commit and before it lets the lease go.
    wait_for(
        lambda: Session.objects.filter(pk=session.pk, lease_token=None).exists(),
        timeout=30,
        what="the lease released",
    )
    session.refresh_from_db()
    assert (session.state, session.handoff_reason, session.handoff_detail) == (
        "HUMAN",
        "llm_timeout",
        "task time limit exceeded",
    )
    assert session.lease_token is None
    config = RuntimeConfig.load()
    # Only the fixed text is sent (in or out of business hours, whenever the test runs).
    assert [s.json["text"]["body"] for s in fake_graph.sends] in (
        [config.handoff_message_open],
        [config.handoff_message_closed],
    )
    message.refresh_from_db()
    assert message.processed_at is not None
    summary = wait_for(
        lambda: HandoffSummary.objects.filter(session=session).first(),
        timeout=20,
        what="the handoff summary",
    )
    assert (summary.closing_reason, summary.summary_text) == ("tempo esgotado", "Oi.")
