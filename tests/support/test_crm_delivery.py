"""Leads that reach the CRM: created pending (or not_configured), POSTed signed to a real HTTP
receiver on 127.0.0.1 after the commit, retried on timeouts and 5xx, failed for good on a 4xx or
after the last attempt, and sent again by the resend use case."""

import hashlib
import hmac
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from celery.exceptions import SoftTimeLimitExceeded
from django.db import transaction
from django.utils import timezone
from model_bakery import baker
from pytest_django import DjangoCaptureOnCommitCallbacks, Settings

from config import task_deadlines
from conversations.leads import lead_create
from conversations.models import CrmStatus, Instance, Lead, Session
from support.crm import lead_deliver, leads_resend, stale_leads_retry
from support.delivery_threads import delivery_threads
from support.signed_post import RetryableDeliveryError
from support.tasks import (
    DELIVERY_MAX_RETRIES,
    deliver_lead,
    enqueue_lead_delivery,
    retry_stale_leads,
)
from tests.fakes.webhook_receiver import (  # noqa: F401
    OK_ANSWER,
    SlowReceiver,
    WebhookReceiver,
    receiver,
    slow_receiver,
)

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
def slow_crm(settings: Settings, slow_receiver: SlowReceiver) -> SlowReceiver:  # noqa: F811
    """A CRM that drips its answer a byte every 0.2 s (17 s in all); the POST's deadline: 0.5 s."""
    settings.CRM_WEBHOOK_URL = slow_receiver.url
    settings.CRM_WEBHOOK_SECRET = SECRET
    settings.SITE_URL = SITE
    settings.SIGNED_POST_TIMEOUT_SECONDS = 0.5
    return slow_receiver


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
        lead = lead_create(session_id=session.pk, data=DATA)
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
            lead_create(session_id=session.pk, data=DATA)
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

    # Never registered for delivery, with the CRM configured.
    assert hooks == []
    assert state(lead) == ("not_configured", 0, "")
    assert crm.received == []


def test_a_simulated_session_s_lead_is_not_sent_when_delivered_anyway(
    crm: WebhookReceiver, session: Session
) -> None:
    """The delivery's own guard (a lead resent, or registered before the session was marked)."""
    lead = Lead.objects.create(session=session, data={}, crm_status="pending")
    Session.objects.filter(pk=session.pk).update(is_simulated=True)

    assert lead_deliver(lead_id=lead.pk, last_attempt=False) == "not_configured"

    assert state(lead) == ("not_configured", 0, "")
    assert crm.received == []


# --- A receiver that drips its answer ---------------------------------------------------------


def test_a_dripping_crm_times_out_at_the_deadline_and_is_retried_then_sent(
    slow_crm: SlowReceiver, session: Session, worker_retries: None
) -> None:
    lead = pending_lead(session)
    slow_crm.respond(OK_ANSWER, drip=0.2)
    started = time.monotonic()

    assert deliver_lead.apply(args=(lead.pk,)).get() == "sent"

    assert time.monotonic() - started < 2.0  # one deadline (0.5 s), then the retry's answer
    assert (len(slow_crm.received), state(lead)) == (2, ("sent", 2, ""))


def test_a_crm_that_always_drips_fails_the_lead_with_the_reason_after_the_last_retry(
    slow_crm: SlowReceiver, session: Session, worker_retries: None
) -> None:
    lead = pending_lead(session)
    for _ in range(DELIVERY_MAX_RETRIES + 1):
        slow_crm.respond(OK_ANSWER, drip=0.2)

    assert deliver_lead.apply(args=(lead.pk,)).get() == "failed"

    assert (len(slow_crm.received), state(lead)) == (6, ("failed", 6, "sem resposta em 0.5 s"))


@pytest.mark.parametrize(
    ("last_attempt", "expected"),
    [
        (False, ("pending", 1, "tempo limite da tarefa esgotado")),
        (True, ("failed", 1, "tempo limite da tarefa esgotado")),
    ],
    ids=["retried", "last-attempt"],
)
def test_the_task_s_soft_time_limit_during_the_post_is_a_retryable_failure(
    slow_crm: SlowReceiver,
    session: Session,
    settings: Settings,
    last_attempt: bool,
    expected: tuple[str, int, str],
) -> None:
    """The threads worker's real watchdog raises Celery's soft limit in this thread mid-POST."""
    settings.SIGNED_POST_TIMEOUT_SECONDS = 5.0  # the soft limit (0.3 s) comes first
    lead = pending_lead(session)
    slow_crm.respond(OK_ANSWER, drip=0.2)
    task_deadlines.WATCHDOG.watch("soft-limit-test", 0.3)
    try:
        if last_attempt:
            outcome = lead_deliver(
                lead_id=lead.pk, last_attempt=True, deadline_errors=(SoftTimeLimitExceeded,)
            )
            assert outcome == "failed"
        else:
            with pytest.raises(RetryableDeliveryError):
                lead_deliver(
                    lead_id=lead.pk, last_attempt=False, deadline_errors=(SoftTimeLimitExceeded,)
                )
    finally:
        task_deadlines.WATCHDOG.done()

    assert state(lead) == expected


def test_the_post_tasks_soft_time_limit_exceeds_the_post_s_deadline() -> None:
    """SIGNED_POST_TIMEOUT_SECONDS (10 s by default) ends a slow POST, 30 s before the soft limit
    would: the attempt is then retried, never killed unretried."""
    assert (deliver_lead.soft_time_limit, deliver_lead.time_limit) == (40, 55)


# --- Without a broker: never inside the request -----------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_without_a_broker_a_hung_crm_does_not_hold_the_commit_that_created_the_lead(
    slow_crm: SlowReceiver, session: Session, settings: Settings
) -> None:
    settings.SIGNED_POST_TIMEOUT_SECONDS = 2.0
    slow_crm.respond(OK_ANSWER, drip=0.2)
    slow_crm.respond(OK_ANSWER, drip=0.2)
    slow_crm.respond(OK_ANSWER, drip=0.2)
    started = time.monotonic()

    with transaction.atomic():
        lead = lead_create(session_id=session.pk, data=DATA)

    # Three attempts (2 s each, and 1.5 s of backoff) run on a delivery thread, not in this call.
    assert time.monotonic() - started < 2.0
    assert delivery_threads().wait_idle(timeout=30)
    assert (len(slow_crm.received), state(lead)) == (3, ("failed", 3, "sem resposta em 2 s"))


# --- The stale-leads sweep ----------------------------------------------------------------------

STALE = timedelta(minutes=15)


@pytest.mark.parametrize(
    ("idle", "retried"),
    [
        (STALE - timedelta(microseconds=1), False),
        (STALE, False),
        (STALE + timedelta(microseconds=1), True),
    ],
    ids=["just-under-15-min", "exactly-15-min", "just-over-15-min"],
)
def test_a_pending_lead_idle_for_more_than_15_minutes_gets_a_last_attempt(
    session: Session, idle: timedelta, retried: bool
) -> None:
    now = timezone.now()
    lead = Lead.objects.create(
        session=session, data=DATA, crm_status=CrmStatus.PENDING, crm_updated_at=now - idle
    )
    enqueued: list[int] = []

    assert stale_leads_retry(now=now, enqueue=enqueued.append) == enqueued

    assert enqueued == ([lead.pk] if retried else [])
    lead.refresh_from_db()
    assert lead.crm_updated_at == (now if retried else now - idle)


def test_the_sweep_leaves_sent_failed_and_unconfigured_leads_alone(session: Session) -> None:
    instance = session.instance
    long_ago = timezone.now() - timedelta(days=2)
    for phone, status in (
        ("5511900000011", "sent"),
        ("5511900000012", "failed"),
        ("5511900000013", "not_configured"),
    ):
        Lead.objects.create(
            session=Session.objects.create(instance=instance, customer_phone=phone),
            data=DATA,
            crm_status=status,
            crm_updated_at=long_ago,
        )
    enqueued: list[int] = []

    assert stale_leads_retry(now=timezone.now(), enqueue=enqueued.append) == []

    assert enqueued == []


def test_a_swept_lead_is_not_enqueued_again_by_the_next_sweep(session: Session) -> None:
    now = timezone.now()
    lead = Lead.objects.create(
        session=session, data=DATA, crm_status=CrmStatus.PENDING, crm_updated_at=now - STALE * 2
    )
    enqueued: list[int] = []

    stale_leads_retry(now=now, enqueue=enqueued.append)
    stale_leads_retry(now=now + timedelta(minutes=1), enqueue=enqueued.append)

    assert enqueued == [lead.pk]


@pytest.mark.parametrize(
    ("status", "expected"),
    [(200, ("sent", 3, "")), (503, ("failed", 3, "HTTP 503"))],
    ids=["accepted", "refused-again"],
)
def test_the_sweep_s_last_attempt_ends_the_lead_sent_or_failed_with_one_post(
    crm: WebhookReceiver,
    session: Session,
    worker_retries: None,
    status: int,
    expected: tuple[str, int, str],
) -> None:
    """A chain lost after two attempts (a worker died): the sweep's one attempt is the last."""
    lead = Lead.objects.create(
        session=session,
        data=DATA,
        crm_status=CrmStatus.PENDING,
        crm_attempts=2,
        crm_error="sem resposta em 2 s",
        crm_updated_at=timezone.now() - timedelta(hours=1),
    )
    crm.respond(status)

    assert retry_stale_leads.apply().get() == 1

    assert (len(crm.received), state(lead)) == (1, expected)


def test_a_new_or_resent_lead_starts_its_delivery_clock(
    session: Session,
    settings: Settings,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    settings.CRM_WEBHOOK_URL = "http://127.0.0.1:9/hook"
    before = timezone.now()
    with transaction.atomic():
        lead = lead_create(session_id=session.pk, data=DATA)
    Lead.objects.filter(pk=lead.pk).update(
        crm_status=CrmStatus.FAILED, crm_updated_at=before - STALE
    )

    with django_capture_on_commit_callbacks(execute=False):
        leads_resend(lead_ids=[lead.pk], deliver=lambda _lead_id: None)

    lead.refresh_from_db()
    assert lead.crm_status == "pending"
    assert lead.crm_updated_at >= before
    assert stale_leads_retry(now=timezone.now(), enqueue=lambda _lead_id: None) == []
