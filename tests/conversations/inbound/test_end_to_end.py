"""End to end, black box: a signed webhook POST to gunicorn -> the turn enqueued on Redis by the
view (``process_session.delay``) -> a real Celery worker -> the fake OpenAI server -> the reply
POSTed to the fake Graph API, with the exact body Meta would receive.

Both servers are subprocesses of the real project (``config.settings``) on this run's test
database; the broker keys are this test's own (tests.helpers.broker), so no other test's or
run's worker takes these tasks.
"""

import http.client
from collections.abc import Iterator
from pathlib import Path

import pytest
from pytest_httpserver import HTTPServer

from conversations.models import Direction, Message, Session
from tests import baker_recipes as recipes
from tests.fakes.graph_server import FakeGraphAPI
from tests.fakes.openai_server import FakeOpenAIServer
from tests.helpers.broker import IsolatedBroker
from tests.helpers.meta_payloads import (
    CUSTOMER_PHONE,
    PHONE_NUMBER_ID,
    WEBHOOK_URL,
    fixture_bytes,
)
from tests.helpers.processes import project_env, wait_for, web_and_worker
from whatsapp.signature import compute_signature

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.redis,
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
]
APP_SECRET = "e2e-app-secret"


@pytest.fixture
def fake_graph(httpserver: HTTPServer) -> FakeGraphAPI:
    return FakeGraphAPI(httpserver)


@pytest.fixture
def servers(
    fake_openai: FakeOpenAIServer,
    fake_graph: FakeGraphAPI,
    tmp_path: Path,
    isolated_broker: IsolatedBroker,
) -> Iterator[int]:
    """gunicorn serving the project and a Celery worker, on one broker; yields the web port."""
    env = project_env(
        broker=isolated_broker,
        WHATSAPP_APP_SECRET=APP_SECRET,
        ALLOWED_HOSTS="127.0.0.1",
        SECURE_SSL_REDIRECT="False",
        OPENAI_BASE_URL=fake_openai.base_url,
        LLM_RETRY_MAX="0",
        WHATSAPP_API_BASE_URL=fake_graph.base_url,
        WHATSAPP_ACCESS_TOKEN="e2e-access-token",
    )
    with web_and_worker(env=env, logs=tmp_path, name="whatsapp-e2e") as port:
        yield port


def test_a_signed_webhook_is_answered_by_a_real_worker_through_the_graph_api(
    servers: int, fake_openai: FakeOpenAIServer, fake_graph: FakeGraphAPI
) -> None:
    recipes.instance.make()
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
    wait_for(lambda: fake_graph.sends, timeout=60, what="the reply at the Graph API")
    [send] = fake_graph.sends
    assert send.path == f"/v23.0/{PHONE_NUMBER_ID}/messages"
    assert send.headers["Authorization"] == "Bearer e2e-access-token"
    callback_data = send.json.pop("biz_opaque_callback_data")
    assert send.json == {
        "messaging_product": "whatsapp",
        "recipient_type": "individual",
        "to": CUSTOMER_PHONE,
        "type": "text",
        "text": {"body": "Olá, Maria! Sou a *Lia*. Qual análise você precisa?"},
    }
    wait_for(lambda: fake_graph.reads, timeout=10, what="the read receipt")
    assert [read.json for read in fake_graph.reads] == [
        {
            "messaging_product": "whatsapp",
            "status": "read",
            "message_id": "wamid.TEXT01",
            "typing_indicator": {"type": "text"},
        }
    ]
    session = Session.objects.get()
    reply = wait_for(
        lambda: session.messages.filter(
            direction=Direction.OUTBOUND, delivery_status="sent"
        ).first(),
        timeout=10,
        what="the stored wamid",
    )
    assert reply.wa_message_id == "wamid.FAKE0001"
    assert callback_data == f"message:{reply.pk}"
    inbound = Message.objects.get(direction=Direction.INBOUND)
    assert inbound.processed_at is not None
