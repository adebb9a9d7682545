"""The alert and the CRM delivery with a REAL Celery worker on Redis and PostgreSQL: the signed
alert carries the summary's next action, a lead refused with a 503 is delivered by the
worker's retry (its countdown, not an eager re-run), and a receiver that drips its answer a
byte a second is cut off at the POST's deadline and retried, not left to the soft time limit."""

import hashlib
import hmac
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from uuid import uuid4

import pytest
from django.utils import timezone
from model_bakery import baker

from conversations.models import CrmStatus, HandoffSummary, Instance, Lead, Message, Session
from tests.fakes.webhook_receiver import (  # noqa: F401
    OK_ANSWER,
    SlowReceiver,
    WebhookReceiver,
    receiver,
    slow_receiver,
)
from tests.helpers.broker import BrokerClient, IsolatedBroker
from tests.helpers.processes import celery_worker_command, project_env, start, stop, wait_for

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.redis,
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
]
SECRET = "worker-secret"


@pytest.fixture
def worker(
    receiver: WebhookReceiver,  # noqa: F811
    tmp_path: Path,
    isolated_broker: IsolatedBroker,
) -> Iterator[BrokerClient]:
    env = project_env(
        broker=isolated_broker,
        SITE_URL="https://atendimento.example.com.br",
        HANDOFF_WEBHOOK_URL=receiver.url,
        HANDOFF_WEBHOOK_SECRET=SECRET,
        CRM_WEBHOOK_URL=receiver.url,
        CRM_WEBHOOK_SECRET=SECRET,
    )
    process = start(
        celery_worker_command(f"delivery-test-{uuid4().hex[:8]}@localhost"),
        env=env,
        log=tmp_path / "worker.log",
    )
    try:
        yield BrokerClient(isolated_broker)
    finally:
        stop(process)


@pytest.fixture
def slow_worker(
    slow_receiver: SlowReceiver,  # noqa: F811
    tmp_path: Path,
    isolated_broker: IsolatedBroker,
) -> Iterator[BrokerClient]:
    """A worker whose alert and CRM receiver is `slow_receiver`; each POST's deadline: 2 s."""
    env = project_env(
        broker=isolated_broker,
        SITE_URL="https://atendimento.example.com.br",
        HANDOFF_WEBHOOK_URL=slow_receiver.url,
        HANDOFF_WEBHOOK_SECRET=SECRET,
        CRM_WEBHOOK_URL=slow_receiver.url,
        CRM_WEBHOOK_SECRET=SECRET,
        SIGNED_POST_TIMEOUT_SECONDS="2",
    )
    process = start(
        celery_worker_command(f"slow-delivery-test-{uuid4().hex[:8]}@localhost"),
        env=env,
        log=tmp_path / "worker.log",
    )
    try:
        yield BrokerClient(isolated_broker)
    finally:
        stop(process)


# An answer dripped a byte a second: some 14 minutes in all, and every read well within any
# per-read timeout (here 2 s; 10 s by default), so only a deadline for the whole POST ends it.
ENDLESS_ANSWER = b"HTTP/1.1 200 OK\r\nX-Slow: " + b"z" * 800 + b"\r\n\r\n"
DRIP_SECONDS = 1.0


def make_session() -> Session:
    instance = baker.make(Instance, phone_number_id="100000000000001", name="Lab Central")
    return Session.objects.create(
        instance=instance,
        state="HUMAN",
        handoff_reason="llm_timeout",
        handed_off_at=timezone.now(),
        customer_name="Maria Souza",
        customer_phone="5511988887777",
    )


def test_a_real_worker_sends_the_signed_alert_with_the_summary_s_next_action(
    worker: BrokerClient,
    receiver: WebhookReceiver,  # noqa: F811
) -> None:
    session = make_session()

    worker.send("conversations.notify_handoff", session.pk)
    HandoffSummary.objects.create(session=session, next_action="Ligar para a cliente")

    [post] = wait_for(lambda: receiver.received, timeout=60, what="the alert")
    assert (post.json["summary_ready"], post.json["next_action"]) == (
        True,
        "Ligar para a cliente",
    )
    digest = hmac.new(SECRET.encode(), post.body, hashlib.sha256).hexdigest()
    assert post.headers["X-Signature-256"] == f"sha256={digest}"


def test_a_lead_refused_with_a_503_is_delivered_by_the_worker_s_retry(
    worker: BrokerClient,
    receiver: WebhookReceiver,  # noqa: F811
) -> None:
    lead = Lead.objects.create(session=make_session(), data={"servico": "X"})
    receiver.respond(503)

    worker.send("conversations.deliver_lead", lead.pk)

    def sent() -> bool:
        lead.refresh_from_db()
        return lead.crm_status == CrmStatus.SENT

    wait_for(sent, timeout=60, what="the lead sent")
    assert (lead.crm_attempts, lead.crm_error, len(receiver.received)) == (2, "", 2)


def test_a_real_worker_cuts_a_dripping_crm_off_at_the_deadline_and_its_retry_sends_the_lead(
    slow_worker: BrokerClient,
    slow_receiver: SlowReceiver,  # noqa: F811
) -> None:
    lead = Lead.objects.create(session=make_session(), data={"servico": "X"})
    slow_receiver.respond(ENDLESS_ANSWER, drip=DRIP_SECONDS)

    slow_worker.send("conversations.deliver_lead", lead.pk)

    def sent() -> bool:
        lead.refresh_from_db()
        return lead.crm_status == CrmStatus.SENT

    # The first attempt ends at 2 s; the retry comes after at most 10 s of backoff.
    wait_for(sent, timeout=40, what="the lead sent by the retry")
    assert (lead.crm_attempts, lead.crm_error, len(slow_receiver.received)) == (2, "", 2)


def test_a_real_worker_cuts_a_dripping_alert_receiver_off_and_records_the_retry_s_delivery(
    slow_worker: BrokerClient,
    slow_receiver: SlowReceiver,  # noqa: F811
) -> None:
    session = make_session()
    HandoffSummary.objects.create(session=session, next_action="Ligar para a cliente")
    slow_receiver.respond(ENDLESS_ANSWER, drip=DRIP_SECONDS)

    slow_worker.send("conversations.notify_handoff", session.pk)

    events = wait_for(
        lambda: list(
            Message.objects.filter(session=session, message_type="handoff_alert").values_list(
                "action", "json_part"
            )
        ),
        timeout=40,
        what="the alert's outcome",
    )
    [(action, details)] = events
    assert (action, details["status"], details["attempts"]) == ("webhook_sent", 200, 2)
    assert len(slow_receiver.received) == 2


def test_a_real_worker_s_stale_lead_sweep_makes_one_last_attempt_that_records_the_failure(
    worker: BrokerClient,
    receiver: WebhookReceiver,  # noqa: F811
) -> None:
    """A lead left pending an hour ago after two attempts (its chain lost): the sweep's attempt is
    the chain's last, so a 503 ends it failed at once instead of starting five more retries."""
    lead = Lead.objects.create(
        session=make_session(),
        data={"servico": "X"},
        crm_attempts=2,
        crm_error="sem resposta em 10 s",
        crm_updated_at=timezone.now() - timedelta(hours=1),
    )
    receiver.respond(503)

    worker.send("conversations.retry_stale_leads")

    def failed() -> bool:
        lead.refresh_from_db()
        return lead.crm_status == CrmStatus.FAILED

    wait_for(failed, timeout=40, what="the lead failed by the last attempt")
    assert (lead.crm_attempts, lead.crm_error, len(receiver.received)) == (3, "HTTP 503", 1)
