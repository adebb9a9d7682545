"""The pipeline's Celery tasks, run eagerly with the real clients against the HTTP fakes (the fake
OpenAI Responses server and the fake Graph API), and the beat schedule."""

import json
from datetime import timedelta
from uuid import uuid4

import pytest
from django.conf import settings
from django.utils import timezone
from model_bakery import baker
from pytest_django import DjangoCaptureOnCommitCallbacks

from conversations.lease import STALLED_PENDING_GRACE, stalled_sessions_requeue
from conversations.models import Direction, HandoffSummary, Instance, LLMCall, Session
from conversations.turns.tasks import (
    generate_handoff_summary,
    process_session,
    requeue_expired_leases,
)
from tests.fakes.graph_server import FakeGraphAPI
from tests.fakes.openai_server import FakeOpenAIServer
from tests.helpers.conversation_rows import inbound
from tests.helpers.model_requests import history_of

pytestmark = pytest.mark.django_db
CUSTOMER_PHONE = "5511977776666"
PHONE_NUMBER_ID = "100000000000001"
SUMMARY = {
    "motivo_encerramento": "Cliente pediu um atendente",
    "servico_identificado": "",
    "segmento": "AMBIENTAL",
    "pontos_chave": ["Quer falar com uma pessoa"],
    "dados_coletados": {},
    "proxima_acao": "Retornar o contato",
    "resumo_texto": "Cliente pediu atendimento humano logo no início.",
}


@pytest.fixture
def session(db: None) -> Session:
    instance = baker.make(Instance, phone_number_id=PHONE_NUMBER_ID, name="Lab", access_token="")
    return Session.objects.create(instance=instance, customer_phone=CUSTOMER_PHONE)


def test_the_tasks_have_their_names() -> None:
    assert (
        process_session.name,
        generate_handoff_summary.name,
        requeue_expired_leases.name,
    ) == (
        "conversations.process_session",
        "conversations.generate_handoff_summary",
        "conversations.requeue_expired_leases",
    )


def test_process_session_has_the_soft_time_limit_below_the_hard_one() -> None:
    assert (process_session.soft_time_limit, process_session.time_limit) == (
        settings.CELERY_TASK_SOFT_TIME_LIMIT,
        settings.CELERY_TASK_TIME_LIMIT,
    )
    assert process_session.soft_time_limit is not None
    assert process_session.time_limit is not None
    assert process_session.soft_time_limit < process_session.time_limit


def test_beat_requeues_expired_leases_every_minute() -> None:
    assert settings.CELERY_BEAT_SCHEDULE["requeue-expired-leases"] == {
        "task": "conversations.requeue_expired_leases",
        "schedule": 60.0,
    }


def test_process_session_answers_through_the_model_and_the_graph_api(
    session: Session,
    openai_settings: FakeOpenAIServer,
    fake_graph: FakeGraphAPI,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    message = inbound(session, "Oi, bom dia")
    openai_settings.queue_text('{"s":1}Olá! Como posso **ajudar**?', input_tokens=900)

    with django_capture_on_commit_callbacks(execute=True):
        outcome = process_session.delay(session.pk).get()

    assert outcome == "drained"
    assert openai_settings.request_count == 1
    assert history_of(openai_settings.requests[0])[-1] == {"role": "user", "content": "Oi, bom dia"}
    [read] = fake_graph.reads
    assert read.json["message_id"] == message.wa_message_id
    [send] = fake_graph.sends
    assert send.json["to"] == CUSTOMER_PHONE
    assert send.json["text"] == {"body": "Olá! Como posso *ajudar*?"}
    reply = session.messages.get(direction=Direction.OUTBOUND)
    assert (reply.wa_message_id, reply.delivery_status) == ("wamid.FAKE0001", "sent")
    call = LLMCall.objects.get()
    assert (call.purpose, call.tokens_input, call.message_id) == ("agent", 900, message.pk)


def test_a_handoff_enqueues_the_summary_that_is_stored(
    session: Session,
    openai_settings: FakeOpenAIServer,
    fake_graph: FakeGraphAPI,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    inbound(session, "Quero falar com uma pessoa")
    openai_settings.queue_text('{"s":98,"motivo":"pedido_cliente"}')
    openai_settings.queue_text(f"```json\n{json.dumps(SUMMARY, ensure_ascii=False)}\n```")

    with django_capture_on_commit_callbacks(execute=True):
        process_session.delay(session.pk)

    assert [r["model"] for r in openai_settings.requests] == [
        settings.OPENAI_MODEL_TRIAGE,
        settings.OPENAI_MODEL_SUMMARY,
    ]
    summary = HandoffSummary.objects.get(session=session)
    assert (summary.closing_reason, summary.segment, summary.key_points, summary.error) == (
        "Cliente pediu um atendente",
        "AMBIENTAL",
        ["Quer falar com uma pessoa"],
        "",
    )
    assert summary.summary_text == "Cliente pediu atendimento humano logo no início."
    assert list(LLMCall.objects.order_by("id").values_list("purpose", "agent")) == [
        ("agent", "triagem"),
        ("summary", "summary"),
    ]
    session.refresh_from_db()
    assert session.handoff_reason == "model_requested"
    assert len(fake_graph.sends) == 1


@pytest.fixture
def handed_off(session: Session) -> Session:
    Session.objects.filter(pk=session.pk).update(
        state="HUMAN",
        handoff_reason="llm_timeout",
        handoff_detail="triagem: read timed out",
        segment="AMBIENTAL",
        service="AGUA_POTABILIDADE",
        technical_data={"tipo_amostra": "poço"},
        registration_data={"nome": "Ana"},
    )
    inbound(session, "Quero analisar água de poço")
    session.refresh_from_db()
    return session


def test_a_summary_call_failure_stores_the_minimal_summary_and_keeps_the_handoff(
    handed_off: Session, openai_settings: FakeOpenAIServer
) -> None:
    openai_settings.queue_error(500)
    openai_settings.queue_error(503)

    summary_id = generate_handoff_summary.delay(handed_off.pk).get()

    summary = HandoffSummary.objects.get(pk=summary_id)
    assert (summary.closing_reason, summary.identified_service, summary.segment) == (
        "llm_timeout — triagem: read timed out",
        "AGUA_POTABILIDADE",
        "AMBIENTAL",
    )
    assert summary.collected_data == {"tipo_amostra": "poço", "nome": "Ana"}
    assert summary.error.startswith("provider_error: ")
    assert (summary.raw_json, summary.model) == ("", settings.OPENAI_MODEL_SUMMARY)
    call = LLMCall.objects.get()
    assert (call.purpose, call.outcome, call.attempts) == ("summary", "provider_error", 2)
    handed_off.refresh_from_db()
    assert (handed_off.state, handed_off.handoff_reason) == ("HUMAN", "llm_timeout")


def test_a_garbage_summary_is_stored_with_the_error_and_the_raw_answer(
    handed_off: Session, openai_settings: FakeOpenAIServer
) -> None:
    openai_settings.queue_text("Não consigo resumir esta conversa.")

    summary = HandoffSummary.objects.get(pk=generate_handoff_summary.delay(handed_off.pk).get())

    assert summary.error == "invalid summary: no JSON object in the answer"
    assert summary.raw_json == "Não consigo resumir esta conversa."
    assert summary.identified_service == "AGUA_POTABILIDADE"
    request = openai_settings.requests[0]
    assert "cliente: Quero analisar água de poço" in history_of(request)[0]["content"]


def test_the_summary_model_is_not_told_the_strategic_companys_name(
    session: Session, openai_settings: FakeOpenAIServer
) -> None:
    Session.objects.filter(pk=session.pk).update(
        state="HUMAN",
        handoff_reason="strategic_company",
        handoff_detail="Metalúrgica Sigilosa Ltda",
    )
    inbound(session, "Bom dia, preciso de um orçamento")
    openai_settings.queue_text(json.dumps(SUMMARY, ensure_ascii=False))

    generate_handoff_summary.delay(session.pk).get()

    sent = json.dumps(openai_settings.requests[0], ensure_ascii=False)
    assert "Sigilosa" not in sent
    assert "strategic_company" in sent
    assert "cliente: Bom dia, preciso de um orçamento" in sent


# --- Expired leases ------------------------------------------------------------------------------


def test_only_expired_leases_with_pending_messages_are_requeued(session: Session) -> None:
    now = timezone.now()
    instance = session.instance
    expired_pending = session
    Session.objects.filter(pk=session.pk).update(
        lease_token=uuid4(), lease_expires_at=now - timedelta(seconds=1)
    )
    inbound(expired_pending, "Oi")
    expired_idle = Session.objects.create(
        instance=instance,
        customer_phone="5511900000001",
        lease_token=uuid4(),
        lease_expires_at=now - timedelta(minutes=5),
    )
    held = Session.objects.create(
        instance=instance,
        customer_phone="5511900000002",
        lease_token=uuid4(),
        lease_expires_at=now + timedelta(minutes=1),
    )
    inbound(held, "Oi")
    free = Session.objects.create(instance=instance, customer_phone="5511900000003")
    inbound(free, "Oi")
    enqueued: list[int] = []

    requeued = stalled_sessions_requeue(
        now=now, grace=STALLED_PENDING_GRACE, enqueue=enqueued.append
    )

    assert requeued == enqueued == [expired_pending.pk]
    assert expired_idle.pk not in enqueued


def test_the_periodic_task_answers_a_dead_workers_turn_exactly_once(
    session: Session,
    openai_settings: FakeOpenAIServer,
    fake_graph: FakeGraphAPI,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    dead_worker = uuid4()
    Session.objects.filter(pk=session.pk).update(
        lease_token=dead_worker, lease_expires_at=timezone.now() - timedelta(seconds=5)
    )
    inbound(session, "Oi, alguém aí?")
    openai_settings.queue_text('{"s":1}Olá! Estou aqui.')

    with django_capture_on_commit_callbacks(execute=True):
        assert requeue_expired_leases.delay().get() == 1
    with django_capture_on_commit_callbacks(execute=True):
        assert requeue_expired_leases.delay().get() == 0

    assert openai_settings.request_count == 1
    assert [s.json["text"]["body"] for s in fake_graph.sends] == ["Olá! Estou aqui."]
    session.refresh_from_db()
    assert (session.lease_token, session.lease_expires_at) == (None, None)
