"""Leads that reach the CRM (issue 13 §4): created pending (or not_configured), POSTed signed to a
real HTTP receiver on 127.0.0.1 after the commit, retried on timeouts and 5xx, failed for good on
a 4xx or after the last attempt, and sent again by the resend use case."""

import hashlib
import hmac
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import transaction
from model_bakery import baker
from pytest_django import DjangoCaptureOnCommitCallbacks, Settings

from conversations.delivery_tasks import (
    DELIVERY_MAX_RETRIES,
    deliver_lead,
    enqueue_lead_delivery,
)
from conversations.leads import lead_create, lead_deliver, leads_resend
from conversations.models import CrmStatus, Instance, Lead, Session
from conversations.signed_post import RetryableDeliveryError
from tests.fakes.webhook_receiver import WebhookReceiver, receiver  # noqa: F401

pytestmark = pytest.mark.django_db

SECRET = "crm-secret-77b1"
SITE = "https://atendimento.example.com.br"
DATA = {
    "nome_cliente": "Ana Lima",
    "telefone": "5511988887777",
    "segmento": "AMBIENTAL",
    "intencao": "ORCAMENTO",
    "servico": "AGUA_POTABILIDADE",
    "qualification_data": {"tipo_amostra": "poço", "quantidade_amostras": 2},
    "cadastro": {
        "nome": "Ana Lima",
        "email": "ana@example.com",
        "documento": "52998224725",
        "cidade": "Campinas",
        "uf": "SP",
    },
}


@pytest.fixture
def crm(settings: Settings, receiver: WebhookReceiver) -> WebhookReceiver:  # noqa: F811
    settings.CRM_WEBHOOK_URL = receiver.url
    settings.CRM_WEBHOOK_SECRET = SECRET
    settings.SITE_URL = SITE
    settings.SIGNED_POST_TIMEOUT_SECONDS = 2.0
    return receiver


@pytest.fixture
def session(db: None) -> Session:
    instance = baker.make(Instance, phone_number_id="100000000000001", name="Lab Central")
    return Session.objects.create(instance=instance, state="HUMAN", customer_name="Ana Lima")


@pytest.fixture
def worker_retries() -> Iterator[None]:
    """Let eager tasks retry as a worker would (with propagation a retry raises instead)."""
    conf = deliver_lead.app.conf
    before = conf.task_eager_propagates
    conf.task_eager_propagates = False
    yield
    conf.task_eager_propagates = before


def create(session: Session, capture: Any) -> tuple[Lead, list[str]]:
    with capture(execute=True) as callbacks, transaction.atomic():
        lead = lead_create(session_id=session.pk, data=DATA, deliver=enqueue_lead_delivery)
    lead.refresh_from_db()
    return lead, [c.__qualname__ for c in callbacks]


def pending_lead(session: Session) -> Lead:
    return Lead.objects.create(session=session, data=DATA, crm_status=CrmStatus.PENDING)


def state(lead: Lead) -> tuple[str, int, str]:
    lead.refresh_from_db()
    return (lead.crm_status, lead.crm_attempts, lead.crm_error)


def test_a_new_lead_is_posted_signed_after_the_commit_and_marked_sent(
    crm: WebhookReceiver,
    session: Session,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    lead, hooks = create(session, django_capture_on_commit_callbacks)

    assert hooks == [f"enqueue_lead_delivery({lead.pk})"]
    assert state(lead) == ("sent", 1, "")
    assert lead.crm_sent_at is not None
    [post] = crm.received
    assert post.json == {
        "event": "lead.created",
        "lead_id": lead.pk,
        "session_id": session.pk,
        "created_at": lead.created_at.isoformat(),
        "conversation_url": f"{SITE}/admin/conversations/session/{session.pk}/change/",
        "instance": {"name": "Lab Central", "phone_number_id": "100000000000001"},
        **DATA,
    }
    digest = hmac.new(SECRET.encode(), post.body, hashlib.sha256).hexdigest()
    assert post.headers["X-Signature-256"] == f"sha256={digest}"


def test_without_a_crm_url_the_lead_is_not_configured_and_nothing_is_enqueued(
    session: Session, django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks
) -> None:
    lead, hooks = create(session, django_capture_on_commit_callbacks)

    assert hooks == []
    assert state(lead) == ("not_configured", 0, "")


def test_a_lead_rolled_back_is_not_sent(
    crm: WebhookReceiver,
    session: Session,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    def fails_after_the_lead() -> None:
        with transaction.atomic():
            lead_create(session_id=session.pk, data=DATA, deliver=enqueue_lead_delivery)
            raise RuntimeError("the turn's transaction fails")

    with (
        django_capture_on_commit_callbacks(execute=True) as callbacks,
        pytest.raises(RuntimeError, match="the turn's transaction fails"),
    ):
        fails_after_the_lead()

    assert (callbacks, crm.received, Lead.objects.count()) == ([], [], 0)


def test_server_errors_are_retried_then_the_lead_is_sent(
    crm: WebhookReceiver, session: Session, worker_retries: None
) -> None:
    lead = pending_lead(session)
    crm.respond(500)
    crm.respond(503)

    assert deliver_lead.apply(args=(lead.pk,)).get() == "sent"

    assert len(crm.received) == 3
    assert state(lead) == ("sent", 3, "")


def test_a_timeout_is_retried_then_the_lead_is_sent(
    crm: WebhookReceiver, session: Session, settings: Settings, worker_retries: None
) -> None:
    settings.SIGNED_POST_TIMEOUT_SECONDS = 0.3
    lead = pending_lead(session)
    crm.respond(200, delay=1.0)

    assert deliver_lead.apply(args=(lead.pk,)).get() == "sent"

    assert len(crm.received) == 2
    assert state(lead) == ("sent", 2, "")


def test_a_4xx_fails_at_once_with_the_answer(
    crm: WebhookReceiver, session: Session, worker_retries: None, caplog: pytest.LogCaptureFixture
) -> None:
    lead = pending_lead(session)
    crm.respond(422, body='{"erro": "campo cnpj obrigatório"}')

    assert deliver_lead.apply(args=(lead.pk,)).get() == "failed"

    assert len(crm.received) == 1
    assert state(lead) == ("failed", 1, 'HTTP 422: {"erro": "campo cnpj obrigatório"}')
    assert lead.crm_sent_at is None
    [record] = [r for r in caplog.records if r.message == "crm_lead_failed"]
    assert (vars(record)["lead_id"], vars(record)["session_id"], vars(record)["host"]) == (
        lead.pk,
        session.pk,
        "127.0.0.1",
    )
    logged = " ".join(f"{r.getMessage()} {r.__dict__}" for r in caplog.records)
    assert SECRET not in logged
    assert crm.url not in logged


def test_retries_are_bounded_and_the_last_failure_is_recorded_with_the_attempts(
    crm: WebhookReceiver, session: Session, worker_retries: None
) -> None:
    lead = pending_lead(session)
    for _ in range(DELIVERY_MAX_RETRIES + 1):
        crm.respond(503)

    assert deliver_lead.apply(args=(lead.pk,)).get() == "failed"

    assert len(crm.received) == 6
    assert state(lead) == ("failed", 6, "HTTP 503")


def test_while_retrying_the_lead_stays_pending_with_the_last_error(
    crm: WebhookReceiver, session: Session, settings: Settings
) -> None:
    """A worker between two attempts: the error is shown, the status is still pending."""
    lead = pending_lead(session)
    crm.respond(500)

    with pytest.raises(RetryableDeliveryError):
        lead_deliver(lead_id=lead.pk, last_attempt=False)

    assert state(lead) == ("pending", 1, "HTTP 500")


def test_run_without_a_broker_the_post_is_retried_in_process(
    crm: WebhookReceiver, session: Session
) -> None:
    lead = pending_lead(session)
    crm.respond(500)

    assert deliver_lead.apply(args=(lead.pk,)).get() == "sent"

    assert state(lead) == ("sent", 2, "")


def test_a_lead_already_sent_is_not_posted_again(crm: WebhookReceiver, session: Session) -> None:
    lead = Lead.objects.create(session=session, data=DATA, crm_status=CrmStatus.SENT)

    assert deliver_lead.apply(args=(lead.pk,)).get() == "sent"

    assert crm.received == []


def test_resend_puts_failed_leads_back_and_delivers_them_skipping_sent_ones(
    crm: WebhookReceiver, django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks
) -> None:
    instance = baker.make(Instance, phone_number_id="100000000000002", name="Lab")
    failed, sent = (
        Lead.objects.create(
            session=Session.objects.create(instance=instance, customer_phone=phone),
            data=DATA,
            crm_status=status,
            crm_attempts=6,
            crm_error="HTTP 503" if status == CrmStatus.FAILED else "",
        )
        for phone, status in (("5511900000001", CrmStatus.FAILED), ("5511900000002", "sent"))
    )

    with django_capture_on_commit_callbacks(execute=True):
        ids = leads_resend(lead_ids=[failed.pk, sent.pk], deliver=enqueue_lead_delivery)

    assert ids == [failed.pk]
    assert state(failed) == ("sent", 7, "")
    assert state(sent) == ("sent", 6, "")
    assert [r.json["lead_id"] for r in crm.received] == [failed.pk]


def test_a_simulated_session_s_lead_never_reaches_the_crm(
    crm: WebhookReceiver,
    session: Session,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    Session.objects.filter(pk=session.pk).update(is_simulated=True)

    lead, hooks = create(session, django_capture_on_commit_callbacks)

    assert hooks == [f"enqueue_lead_delivery({lead.pk})"]
    assert state(lead) == ("not_configured", 0, "")
    assert crm.received == []
