"""A committed turn's reply reaches the customer, whatever the Graph API or the broker does.

- The embedded default (no broker: eager Celery that propagates errors) retries a send that
  failed transiently in-process, so one Graph 5xx does not lose the reply; a send that keeps
  failing is stored as failed, and the turn stays committed either way.
- The turn's after-commit hooks (summary, each part's send) are each attempted even when the
  broker refuses the publishes; the turn is committed once and reported so, and the unsent parts
  are sent by the unsent-messages sweep once the broker is back.

The real tasks, the real httpx and OpenAI clients, against the fake Graph API and the fake
OpenAI Responses server; the broker outage is a real kombu publish to a closed port.
"""

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone
from model_bakery import baker
from pytest_django import DjangoCaptureOnCommitCallbacks

from config.celery import app as celery_app
from conversations.models import Direction, Instance, Lead, Session
from conversations.sending.worker import EAGER_SEND_BACKOFF, send_message
from conversations.sweeps import UNSENT_GRACE, unsent_messages_requeue
from conversations.turns.tasks import process_session
from tests.fakes.graph_server import FakeGraphAPI
from tests.fakes.openai_server import FakeOpenAIServer
from tests.helpers.conversation_rows import inbound
from tests.helpers.meta_payloads import CUSTOMER_PHONE as WEBHOOK_CUSTOMER
from tests.helpers.meta_payloads import fixture_bytes, signed_post

CUSTOMER_PHONE = "5511977776666"
PHONE_NUMBER_ID = "100000000000001"
# Nothing listens on port 1: kombu's connect is refused, as with Redis stopped.
CLOSED_BROKER = "redis://127.0.0.1:1/0"
REGISTRATION = {"nome": "Ana Lima", "documento": "52998224725", "email": "ana@example.com"}


def make_session(**fields: Any) -> Session:
    instance = baker.make(Instance, phone_number_id=PHONE_NUMBER_ID, name="Lab", access_token="")
    return Session.objects.create(instance=instance, customer_phone=CUSTOMER_PHONE, **fields)


def turn_failures(session: Session) -> int:
    return session.messages.filter(direction=Direction.SYSTEM, message_type="turn_failed").count()


# --- 2. Eager sends ------------------------------------------------------------------------------


def test_the_embedded_default_runs_tasks_eagerly_and_propagates_their_errors() -> None:
    assert (celery_app.conf.task_always_eager, celery_app.conf.task_eager_propagates) == (
        True,
        True,
    )


@pytest.mark.django_db
def test_in_eager_mode_a_reply_refused_once_with_a_500_reaches_the_customer_once(
    openai_settings: FakeOpenAIServer,
    fake_graph: FakeGraphAPI,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    session = make_session()
    message = inbound(session, "Oi, bom dia")
    openai_settings.queue_text('{"s":1}Olá! Como posso ajudar?')
    fake_graph.respond_json(200, {"success": True})  # the mark-read at the turn's start
    fake_graph.respond_error(500, 131000, "Something went wrong")

    with django_capture_on_commit_callbacks(execute=True):
        assert process_session.delay(session.pk).get() == "drained"

    assert [s.json["text"]["body"] for s in fake_graph.sends] == ["Olá! Como posso ajudar?"] * 2
    [reply] = session.messages.filter(direction=Direction.OUTBOUND)
    assert (
        reply.wa_message_id,
        reply.delivery_status,
        reply.send_attempts,
        reply.delivery_error_title,
    ) == ("wamid.FAKE0001", "sent", 2, "")
    message.refresh_from_db()
    assert message.processed_at is not None
    assert turn_failures(session) == 0


@pytest.mark.django_db
def test_in_eager_mode_a_reply_the_graph_api_always_refuses_is_failed_and_the_turn_kept(
    openai_settings: FakeOpenAIServer,
    fake_graph: FakeGraphAPI,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    session = make_session()
    message = inbound(session, "Oi, bom dia")
    openai_settings.queue_text('{"s":1}Olá! Como posso ajudar?')
    fake_graph.respond_json(200, {"success": True})
    attempts = 1 + len(EAGER_SEND_BACKOFF)
    for _ in range(attempts):
        fake_graph.respond_error(500, 131000, "Something went wrong")

    with django_capture_on_commit_callbacks(execute=True):
        assert process_session.delay(session.pk).get() == "drained"

    assert len(fake_graph.sends) == attempts == 3
    [reply] = session.messages.filter(direction=Direction.OUTBOUND)
    assert (
        reply.wa_message_id,
        reply.delivery_status,
        reply.delivery_error_code,
        reply.delivery_error_title,
        reply.send_attempts,
    ) == (None, "failed", 131000, "Something went wrong", attempts)
    message.refresh_from_db()
    session.refresh_from_db()
    assert (message.processed_at is not None, session.state, turn_failures(session)) == (
        True,
        "TRIAGE",
        0,
    )


@pytest.mark.django_db
def test_make_run_s_webhook_to_reply_path_survives_one_graph_503(
    client: Client,
    openai_settings: FakeOpenAIServer,
    fake_graph: FakeGraphAPI,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    baker.make(Instance, phone_number_id=PHONE_NUMBER_ID, name="Lab", access_token="")
    openai_settings.queue_text('{"s":1}Olá, Maria! Qual é o tipo de amostra?')
    fake_graph.respond_json(200, {"success": True})
    fake_graph.respond_error(503, 2, "Service temporarily unavailable")

    # The webhook commits the message; its hook runs the turn in-process, whose hooks send.
    with django_capture_on_commit_callbacks(execute=True):
        response = signed_post(client, fixture_bytes("text"))

    assert response.status_code == 200
    session = Session.objects.get(customer_phone=WEBHOOK_CUSTOMER)
    [reply] = session.messages.filter(direction=Direction.OUTBOUND)
    assert (reply.content, reply.wa_message_id, reply.send_attempts) == (
        "Olá, Maria! Qual é o tipo de amostra?",
        "wamid.FAKE0001",
        2,
    )
    assert len(fake_graph.sends) == 2
    assert session.messages.get(direction=Direction.INBOUND).processed_at is not None


@pytest.mark.django_db
def test_in_eager_mode_a_handoff_s_text_goes_out_before_the_summary_s_model_call(
    openai_settings: FakeOpenAIServer,
    fake_graph: FakeGraphAPI,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    session = make_session()
    inbound(session, "Quero falar com uma pessoa")
    openai_settings.queue_text('{"s":98,"motivo":"pedido_cliente"}')
    openai_settings.queue_text('{"motivo_encerramento": "Cliente pediu um atendente"}')
    model_calls_at_send: list[int] = []
    fake_graph.on_request = lambda request: (
        model_calls_at_send.append(openai_settings.request_count)
        if "type" in request.json
        else None
    )

    with django_capture_on_commit_callbacks(execute=True):
        process_session.delay(session.pk)

    # Only the agent's call had been made when the customer's text was sent.
    assert (model_calls_at_send, openai_settings.request_count) == ([1], 2)


# --- 3. Commit hooks with the broker down --------------------------------------------------------


@contextmanager
def broker_unreachable() -> Iterator[None]:
    """Publishing really goes to the broker, and the broker refuses connections.

    Celery builds its connection and producer pools once from the broker URL and caches them on
    the app, so fresh ones are used for the closed port (closed afterwards, the app's own put
    back); eager mode is off only inside the block.
    """
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(celery_app.conf, "task_always_eager", False)
        patch.setitem(celery_app.conf, "broker_write_url", CLOSED_BROKER)
        patch.setattr(celery_app, "_pool", None)
        patch.setattr(celery_app.amqp, "_producer_pool", None)
        try:
            yield
        finally:
            # celery-types declares neither private pool (the public properties would create one).
            pools = (celery_app.amqp._producer_pool, celery_app._pool)  # type: ignore[attr-defined]
            for pool in pools:
                if pool is not None:
                    pool.force_close_all()


def long_closing_text() -> str:
    """A code-5 message of two WhatsApp parts (over 4,096 characters)."""
    first = "Perfeito, Ana! Sua solicitação foi registrada. " + "Análise de água de poço. " * 130
    second = "Próximos passos: nossa equipe vai falar com você. " + "Frasco estéril. " * 130
    return f"{first.strip()}\n\n{second.strip()}"


@pytest.mark.django_db(transaction=True)
def test_with_the_broker_down_at_commit_the_worker_sends_the_parts_and_only_the_summary_fails(
    openai_settings: FakeOpenAIServer, fake_graph: FakeGraphAPI, caplog: pytest.LogCaptureFixture
) -> None:
    """A worker sends a turn's reply itself after the commit (`reply_send`), so a broker that
    refuses every publish delays only what goes through it: the summary's hook fails and is
    logged, and nothing is left for the unsent-messages sweep."""
    session = make_session(
        state="CONFIRM",
        customer_name="Ana Lima",
        registration_data=REGISTRATION,
        confirmation_data=REGISTRATION,
    )
    message = inbound(session, "Sim, está tudo certo")
    openai_settings.queue_text('{"s":5}' + long_closing_text())

    with broker_unreachable():
        # Run here, as a worker would; its publishes (the summary) are refused. The read receipt
        # and the reply need no broker: they went to the Graph API from the process itself.
        assert process_session.apply(args=(session.pk,)).get() == "drained"

    parts = list(session.messages.filter(direction=Direction.OUTBOUND).order_by("part_index"))
    assert len(parts) == 2
    failed_hooks = [
        vars(r)["hook"] for r in caplog.records if r.getMessage() == "commit_hook_failed"
    ]
    assert failed_hooks == [f"_enqueue_summary({session.pk})"]
    # Committed once, and reported committed: HUMAN with the lead, both parts sent in order.
    session.refresh_from_db()
    message.refresh_from_db()
    assert (session.state, session.handoff_reason) == ("HUMAN", "qualified_lead")
    assert Lead.objects.filter(session=session).count() == 1
    assert message.processed_at is not None
    assert turn_failures(session) == 0
    assert [r.json.get("status", "text") for r in fake_graph.requests] == ["read", "text", "text"]
    assert [s.json["text"]["body"] for s in fake_graph.sends] == [p.content for p in parts]
    assert [(p.wa_message_id, p.delivery_status, p.send_attempts) for p in parts] == [
        ("wamid.FAKE0001", "sent", 1),
        ("wamid.FAKE0002", "sent", 1),
    ]

    # The broker is back (eager here): the beat sweep finds nothing left to send.
    later = timezone.now() + UNSENT_GRACE + timedelta(seconds=1)
    assert unsent_messages_requeue(now=later, enqueue=send_message.delay).requeued == []
    assert len(fake_graph.sends) == 2
