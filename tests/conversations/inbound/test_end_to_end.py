"""End to end, black box: a signed webhook POST to gunicorn -> the turn enqueued on Redis by the
view (``process_session.delay``) -> a real Celery worker -> the fake OpenAI server -> the reply
POSTed to the fake Graph API, with the exact body Meta would receive.

Both servers are subprocesses of the real project (``config.settings``) on this run's test
database; the broker keys are this test's own (tests.helpers.broker), so no other test's or
run's worker takes these tasks.
"""

import http.client
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.utils import timezone
from pytest_httpserver import HTTPServer

from conversations.models import Direction, Lead, LLMCall, Message, MessageMedia, Session
from knowledge_base.models import Intent, Segment, Service
from tests import baker_recipes as recipes
from tests.fakes.graph_server import FakeGraphAPI
from tests.fakes.openai_server import FakeOpenAIServer
from tests.helpers.broker import IsolatedBroker
from tests.helpers.meta_payloads import (
    CUSTOMER_PHONE,
    PHONE_NUMBER_ID,
    WEBHOOK_URL,
    encode,
    fixture_bytes,
    load_fixture,
)
from tests.helpers.model_requests import history_of
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
        TRANSCRIBE_AUDIO="True",
        MEDIA_ROOT=str(tmp_path / "media"),
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


# A voice note of about ten seconds: what the transcription and the agent's model take.
TRANSCRIPTION_DELAY = 0.8
AGENT_DELAY = 1.0


def test_a_voice_note_is_downloaded_transcribed_and_answered_by_a_real_worker(
    servers: int, fake_openai: FakeOpenAIServer, fake_graph: FakeGraphAPI
) -> None:
    recipes.instance.make()
    voice = b"OggS\x00\x02" + b"v" * 4_000
    document = load_fixture("audio")
    audio = document["entry"][0]["changes"][0]["value"]["messages"][0]["audio"]
    audio["sha256"] = fake_graph.set_media(audio["id"], voice, "audio/ogg; codecs=opus")
    # The customer's first message warms the processes up (imports, connections), as a live
    # server is; the voice note comes second.
    fake_openai.queue_text('{"s":1}Olá, Maria! Qual análise você precisa?')
    fake_openai.queue_transcript(
        "Quero um orçamento de potabilidade", input_tokens=80, delay=TRANSCRIPTION_DELAY
    )
    fake_openai.queue_text('{"s":1}Claro! Quantas amostras?', delay=AGENT_DELAY)
    web = http.client.HTTPConnection("127.0.0.1", servers, timeout=10)

    def deliver(body: bytes) -> None:
        signature = compute_signature(body=body, secret=APP_SECRET)
        web.request(
            "POST",
            WEBHOOK_URL,
            body=body,
            headers={"Content-Type": "application/json", "X-Hub-Signature-256": signature},
        )
        response = web.getresponse()
        assert (response.status, response.read()) == (200, b"ok")

    deliver(fixture_bytes("text"))
    wait_for(lambda: len(fake_graph.sends) == 1, timeout=60, what="the first reply")
    started = time.monotonic()
    deliver(encode(document))
    wait_for(lambda: len(fake_graph.sends) == 2, timeout=60, what="the voice note's reply")
    elapsed_ms = (time.monotonic() - started) * 1000

    assert fake_graph.sends[1].json["text"] == {"body": "Claro! Quantas amostras?"}
    [transcription] = fake_openai.transcriptions
    assert (transcription.content, transcription.language) == (voice, "pt")
    assert history_of(fake_openai.requests[1])[-1] == {
        "role": "user",
        "content": "Quero um orçamento de potabilidade",
    }
    media = MessageMedia.objects.get()
    assert (media.status, media.reading_status) == ("downloaded", "done")
    transcribed = LLMCall.objects.get(purpose="transcription")
    # The figures of the closing note: webhook to reply, and the transcription's share of it.
    print(
        f"\nvoice note: webhook -> reply {elapsed_ms:.0f} ms; transcription "
        f"{transcribed.latency_ms} ms ({transcribed.latency_ms / elapsed_ms:.0%}); models "
        f"{(TRANSCRIPTION_DELAY + AGENT_DELAY) * 1000:.0f} ms of it"
    )


def signed(port: int, document: dict[str, object]) -> int:
    body = json.dumps(document).encode()
    web = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
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
    response.read()
    return response.status


def test_code_4_s_buttons_reach_the_graph_api_and_a_tap_on_confirmar_makes_the_lead(
    servers: int, fake_openai: FakeOpenAIServer, fake_graph: FakeGraphAPI
) -> None:
    """The real worker: the confirmation goes out as reply buttons; the tap on "Confirmar"
    comes back through the webhook as the customer's text, and code 5 creates the lead."""
    segment = Segment.objects.create(code="AMBIENTAL", label="Ambiental")
    Intent.objects.create(code="ORCAMENTO", label="Orçamento")
    Service.objects.create(code="AGUA_POTABILIDADE", label="Potabilidade", segment=segment)
    session = recipes.known_customer.make(
        instance=recipes.instance.make(access_token=""),
        state="DATA_COLLECT",
        segment="AMBIENTAL",
        intent="ORCAMENTO",
        service="AGUA_POTABILIDADE",
        last_message_at=timezone.now(),
    )
    fake_openai.queue_text(
        '{"s":4,"cadastro":{"nome":"Ana Lima","documento":"52998224725",'
        '"email":"ana@example.com"}}Confere: Ana Lima, ana@example.com. Está tudo certo?'
    )
    fake_openai.queue_text('{"s":5}Perfeito, Ana! Sua solicitação foi registrada.')
    fake_openai.queue_text(json.dumps({"proxima_acao": "Enviar o orçamento"}))
    now = str(int(timezone.now().timestamp()))
    text = load_fixture("text")
    message = text["entry"][0]["changes"][0]["value"]["messages"][0]
    message.update(id="wamid.E2EMAIL", timestamp=now, text={"body": "ana@example.com"})

    assert signed(servers, text) == 200
    wait_for(lambda: fake_graph.sends, timeout=60, what="the confirmation at the Graph API")
    [confirmation] = fake_graph.sends
    assert (confirmation.json["type"], confirmation.json["interactive"]["action"]) == (
        "interactive",
        {
            "buttons": [
                {"type": "reply", "reply": {"id": "confirmar", "title": "Confirmar"}},
                {"type": "reply", "reply": {"id": "corrigir", "title": "Corrigir"}},
            ]
        },
    )
    summary = wait_for(
        lambda: (
            session.messages.filter(direction=Direction.OUTBOUND, delivery_status="sent")
            .exclude(wa_message_id=None)
            .first()
        ),
        timeout=10,
        what="the confirmation's wamid",
    )
    tap = load_fixture("interactive_button_reply")
    message = tap["entry"][0]["changes"][0]["value"]["messages"][0]
    message.update(
        id="wamid.E2ETAP",
        timestamp=str(int(now) + 1),
        interactive={
            "type": "button_reply",
            "button_reply": {"id": "confirmar", "title": "Confirmar"},
        },
        context={"from": "5511999990000", "id": summary.wa_message_id},
    )

    assert signed(servers, tap) == 200
    lead = wait_for(lambda: Lead.objects.filter(session=session).first(), timeout=60, what="lead")
    assert lead.data["cadastro"] == {
        "nome": "Ana Lima",
        "documento": "52998224725",
        "email": "ana@example.com",
    }
    wait_for(lambda: len(fake_graph.sends) == 2, timeout=30, what="the closing text")
    assert fake_graph.sends[1].json["text"] == {
        "body": "Perfeito, Ana! Sua solicitação foi registrada."
    }
    assert history_of(fake_openai.requests[1])[-1] == {"role": "user", "content": "Confirmar"}
    wait_for(lambda: fake_openai.request_count == 3, timeout=30, what="the handoff summary")
