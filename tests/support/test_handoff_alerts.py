"""Alerts on handoff: a handoff e-mails the team and POSTs a signed alert to a real HTTP receiver on
127.0.0.1, through the real tasks (eager) and the real httpx client; retries, refusals, out-of-hours
marking, the summary's next action, first name only."""

import hashlib
import hmac
import json
import logging
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from celery.exceptions import SoftTimeLimitExceeded
from django.core import mail
from django.db import transaction
from django.test import Client
from model_bakery import baker
from pytest_django import DjangoCaptureOnCommitCallbacks, Settings
from pytest_httpserver import HTTPServer

from agents.states import HandoffMotive, HandoffReason
from config import task_deadlines
from conversations.handoff import HandoffEffects, HandoffRequest, session_handoff
from conversations.labels import event_text
from conversations.models import Direction, HandoffSummary, Instance, Message, Session
from conversations.turns.tasks import process_session
from prompts_admin.models import RuntimeConfig
from prompts_admin.selectors import DatabasePromptSource
from support.alerts import handoff_alert_webhook_post, summary_awaited
from support.delivery_threads import delivery_threads
from support.tasks import (
    DELIVERY_MAX_RETRIES,
    notify_handoff,
    post_handoff_alert,
    retry_stale_leads,
)
from tests import baker_recipes as recipes
from tests.fakes.graph_server import FakeGraphAPI
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.webhook_receiver import (  # noqa: F401
    OK_ANSWER,
    SlowReceiver,
    WebhookReceiver,
    receiver,
    slow_receiver,
)
from tests.helpers.meta_payloads import fixture_bytes
from tests.helpers.meta_payloads import signed_post as meta_post

pytestmark = pytest.mark.django_db

SECRET = "alert-secret-4f9a"
SITE = "https://atendimento.example.com.br"
# A Wednesday, 12:00 in Brasília (open), and the same day at 22:00 (closed).
OPEN = datetime(2026, 3, 11, 15, 0, tzinfo=UTC)
CLOSED = datetime(2026, 3, 12, 1, 0, tzinfo=UTC)
HOURS = {d: [["08:00", "18:00"]] for d in ("mon", "tue", "wed", "thu", "fri")} | {
    "sat": [],
    "sun": [],
}
NEXT_ACTION = "Enviar o orçamento da análise de água"


@pytest.fixture
def configured(settings: Settings, receiver: WebhookReceiver) -> WebhookReceiver:  # noqa: F811
    settings.HANDOFF_NOTIFY_EMAILS = ["equipe@lab.example", "plantao@lab.example"]
    settings.HANDOFF_WEBHOOK_URL = receiver.url
    settings.HANDOFF_WEBHOOK_SECRET = SECRET
    settings.SITE_URL = SITE
    settings.DEFAULT_FROM_EMAIL = "atendimento@lab.example"
    settings.SIGNED_POST_TIMEOUT_SECONDS = 2.0
    config = RuntimeConfig.load()
    config.business_hours = HOURS
    config.save()
    return receiver


@pytest.fixture
def session(db: None) -> Session:
    instance = baker.make(Instance, phone_number_id="100000000000001", name="Lab Central")
    return Session.objects.create(
        instance=instance,
        state="QUALIFYING",
        customer_name="Maria Souza",
        customer_phone="5511988887777",
        customer_document="52998224725",
        registration_data={"nome": "Maria Souza", "email": "maria@example.com"},
    )


@pytest.fixture
def worker_retries(settings: Settings) -> Iterator[None]:
    """Let eager tasks retry as a worker would (with propagation a retry raises instead)."""
    conf = post_handoff_alert.app.conf
    before = conf.task_eager_propagates
    conf.task_eager_propagates = False
    yield
    conf.task_eager_propagates = before


def write_summary(session_id: int) -> None:
    """What the summary task writes (it runs before the alert: its hook is registered first)."""
    HandoffSummary.objects.create(session_id=session_id, next_action=NEXT_ACTION)


def no_summary(session_id: int) -> None:
    return None


def no_send(_message_id: int) -> None:
    return None


def hand_off(
    session: Session,
    capture: Any,
    *,
    reason: HandoffReason = HandoffReason.MODEL_REQUESTED,
    now: datetime = OPEN,
    summary: Any = write_summary,
) -> list[str]:
    """`session_handoff` in a committed transaction; returns the after-commit hooks' names."""
    model = reason is HandoffReason.MODEL_REQUESTED
    with capture(execute=True) as callbacks, transaction.atomic():
        session_handoff(
            HandoffRequest(
                session_id=session.pk,
                reason=reason,
                now=now,
                fixed_text=reason
                not in {HandoffReason.QUALIFIED_LEAD, HandoffReason.STAFF_TAKEOVER},
                motive=HandoffMotive.PEDIDO_CLIENTE if model else None,
                detail="pedido_cliente" if model else "",
            ),
            effects=HandoffEffects(
                runtime=DatabasePromptSource().runtime(), send=no_send, enqueue_summary=summary
            ),
        )
    return [c.__qualname__ for c in callbacks]


def alert_events(session: Session) -> list[tuple[str, str, Any]]:
    """(action, the sentence staff read, parameters) of each alert event; the row stores only
    the parameters (its ``content`` is empty)."""
    events = Message.objects.filter(session=session, message_type="handoff_alert").order_by("id")
    assert [event.content for event in events] == [""] * len(events)
    return [(event.action, event_text(event), event.json_part) for event in events]


def expected_payload(session: Session, **changes: Any) -> dict[str, Any]:
    return {
        "event": "session.handoff",
        "session_id": session.pk,
        "url": f"{SITE}/admin/conversations/session/{session.pk}/change/",
        "instance": "Lab Central",
        "reason": "model_requested",
        "reason_label": "cliente pediu um atendente",
        "customer_first_name": "Maria",
        "handed_off_at": "2026-03-11T15:00:00+00:00",
        "out_of_hours": False,
        "summary_ready": True,
        "next_action": NEXT_ACTION,
        **changes,
    }


def test_a_handoff_e_mails_the_team_and_posts_the_signed_alert(
    configured: WebhookReceiver,
    session: Session,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)

    hooks = hand_off(session, django_capture_on_commit_callbacks)

    assert hooks[-2:] == [f"write_summary({session.pk})", f"enqueue_handoff_alert({session.pk})"]
    [email] = mail.outbox
    assert (email.subject, email.from_email, email.to) == (
        f"Cliente aguardando a equipe: conversa #{session.pk}",
        "atendimento@lab.example",
        ["equipe@lab.example", "plantao@lab.example"],
    )
    assert email.body == (
        "Uma conversa foi transferida para a equipe.\n"
        "\n"
        f"Conversa: #{session.pk} (Lab Central)\n"
        "Cliente: Maria\n"
        "Motivo: cliente pediu um atendente (model_requested)\n"
        f"Próxima ação: {NEXT_ACTION}\n"
        "Transferida em: 11/03/2026 12:00\n"
        "\n"
        f"Abrir: {SITE}/admin/conversations/session/{session.pk}/change/\n"
    )
    [post] = configured.received
    assert post.json == expected_payload(session)
    digest = hmac.new(SECRET.encode(), post.body, hashlib.sha256).hexdigest()
    assert post.headers["X-Signature-256"] == f"sha256={digest}"
    assert post.headers["Content-Type"] == "application/json; charset=utf-8"
    # First name only: no phone, document or e-mail in what leaves.
    for private in ("Souza", "5511988887777", "52998224725", "maria@example.com"):
        assert private not in post.body.decode()
        assert private not in email.body
    assert alert_events(session) == [
        (
            "email_sent",
            "Alerta de transferência enviado por e-mail a 2 destinatário(s).",
            {"channel": "email", "outcome": "sent", "recipients": 2, "out_of_hours": False},
        ),
        (
            "webhook_sent",
            "Alerta de transferência entregue ao webhook (HTTP 200, 1 tentativa(s)).",
            {
                "channel": "webhook",
                "outcome": "sent",
                "status": 200,
                "attempts": 1,
                "out_of_hours": False,
            },
        ),
    ]
    lines = [
        (r.message, vars(r)["session_id"]) for r in caplog.records if r.name == "support.alerts"
    ]
    assert lines == [
        ("handoff_alert_email_sent", session.pk),
        ("handoff_alert_webhook_sent", session.pk),
    ]
    # Neither the secret nor the receiver's path reaches a log record (but the fake's own).
    logged = " ".join(
        f"{r.getMessage()} {r.__dict__}" for r in caplog.records if r.name != "werkzeug"
    )
    assert SECRET not in logged
    assert "/hook" not in logged


def test_out_of_business_hours_the_alert_is_sent_and_marked(
    configured: WebhookReceiver,
    session: Session,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    hand_off(session, django_capture_on_commit_callbacks, now=CLOSED)

    [email] = mail.outbox
    assert email.subject == (
        f"[fora do horário] Cliente aguardando a equipe: conversa #{session.pk}"
    )
    assert "Transferida em: 11/03/2026 22:00 (fora do horário de atendimento)\n" in email.body
    [post] = configured.received
    assert post.json == expected_payload(
        session, out_of_hours=True, handed_off_at="2026-03-12T01:00:00+00:00"
    )


def test_without_a_summary_yet_the_alert_says_it_is_being_prepared(
    configured: WebhookReceiver,
    session: Session,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    hand_off(session, django_capture_on_commit_callbacks, summary=no_summary)

    [email] = mail.outbox
    assert "Próxima ação: resumo em preparo\n" in email.body
    [post] = configured.received
    assert post.json == expected_payload(session, summary_ready=False, next_action=None)


def test_the_alert_waits_for_the_summary_only_while_the_handoff_is_recent(
    session: Session,
) -> None:
    session.handed_off_at = OPEN
    session.save()

    assert summary_awaited(session_id=session.pk, now=OPEN + timedelta(seconds=29))
    assert not summary_awaited(session_id=session.pk, now=OPEN + timedelta(seconds=30))
    assert not summary_awaited(session_id=session.pk, now=OPEN + timedelta(seconds=31))
    write_summary(session.pk)
    assert not summary_awaited(session_id=session.pk, now=OPEN)


def test_a_worker_polls_for_the_summary_then_sends_without_it(
    configured: WebhookReceiver, session: Session, worker_retries: None
) -> None:
    """Celery's eager retry runs at once (no countdown): the polls are used up, then it sends."""
    session.state = "HUMAN"
    session.handoff_reason = "llm_timeout"
    session.handed_off_at = datetime.now(UTC)
    session.save()

    assert notify_handoff.apply(args=(session.pk,)).get() == "sent"

    [post] = configured.received
    assert (post.json["summary_ready"], post.json["next_action"]) == (False, None)
    assert post.json["reason_label"] == "tempo esgotado no modelo"


def test_a_staff_takeover_alerts_nobody(
    configured: WebhookReceiver,
    session: Session,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    hooks = hand_off(
        session, django_capture_on_commit_callbacks, reason=HandoffReason.STAFF_TAKEOVER
    )

    assert hooks == []
    assert (mail.outbox, configured.received, alert_events(session)) == ([], [], [])


def test_without_any_alert_configured_no_hook_is_registered(
    session: Session, django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks
) -> None:
    hooks = hand_off(session, django_capture_on_commit_callbacks)

    assert [h for h in hooks if not h.startswith("no_send")] == [f"write_summary({session.pk})"]
    assert mail.outbox == []


def test_e_mail_only_sends_no_post(
    configured: WebhookReceiver,
    session: Session,
    settings: Settings,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    settings.HANDOFF_WEBHOOK_URL = ""

    hand_off(session, django_capture_on_commit_callbacks)

    assert (len(mail.outbox), configured.received) == (1, [])
    assert [a for a, _c, _j in alert_events(session)] == ["email_sent"]


def test_a_mail_server_that_refuses_is_recorded_and_the_webhook_still_goes(
    configured: WebhookReceiver,
    session: Session,
    settings: Settings,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_TIMEOUT = "127.0.0.1", 9, 2

    hand_off(session, django_capture_on_commit_callbacks)

    assert [(a, c) for a, c, _j in alert_events(session)] == [
        (
            "email_failed",
            "Alerta de transferência por e-mail não enviado: ConnectionRefusedError.",
        ),
        ("webhook_sent", "Alerta de transferência entregue ao webhook (HTTP 200, 1 tentativa(s))."),
    ]


def post_alert(session: Session) -> str:
    session.state, session.handoff_reason, session.handed_off_at = "HUMAN", "llm_timeout", OPEN
    session.save()
    write_summary(session.pk)
    return post_handoff_alert.apply(args=(session.pk,)).get()


def test_server_errors_are_retried_then_the_alert_is_delivered(
    configured: WebhookReceiver, session: Session, worker_retries: None
) -> None:
    configured.respond(500)
    configured.respond(503)

    assert post_alert(session) == "sent"

    assert len(configured.received) == 3
    assert len({r.body for r in configured.received}) == 1  # the same document each time
    assert [c for _a, c, _j in alert_events(session)] == [
        "Alerta de transferência entregue ao webhook (HTTP 200, 3 tentativa(s))."
    ]


def test_a_timeout_is_retried_then_the_alert_is_delivered(
    configured: WebhookReceiver, session: Session, settings: Settings, worker_retries: None
) -> None:
    settings.SIGNED_POST_TIMEOUT_SECONDS = 0.3
    configured.respond(200, delay=1.0)

    assert post_alert(session) == "sent"

    assert len(configured.received) == 2
    assert [j["attempts"] for _a, _c, j in alert_events(session)] == [2]


def test_a_4xx_is_not_retried_and_is_recorded(
    configured: WebhookReceiver,
    session: Session,
    worker_retries: None,
    caplog: pytest.LogCaptureFixture,
) -> None:
    configured.respond(404, body='{"error": "no such hook"}')

    assert post_alert(session) == "failed"

    assert len(configured.received) == 1
    assert alert_events(session) == [
        (
            "webhook_failed",
            'Alerta de transferência não entregue ao webhook: HTTP 404: {"error": "no such hook"} '
            "(1 tentativa(s)).",
            {
                "channel": "webhook",
                "outcome": "failed",
                "error": 'HTTP 404: {"error": "no such hook"}',
                "attempts": 1,
            },
        )
    ]
    [record] = [r for r in caplog.records if r.message == "handoff_alert_webhook_failed"]
    assert (vars(record)["session_id"], vars(record)["host"], vars(record)["attempt"]) == (
        session.pk,
        "127.0.0.1",
        1,
    )


def test_retries_are_bounded_and_the_last_failure_is_recorded(
    configured: WebhookReceiver, session: Session, worker_retries: None
) -> None:
    for _ in range(DELIVERY_MAX_RETRIES + 1):
        configured.respond(502)

    assert post_alert(session) == "failed"

    assert len(configured.received) == DELIVERY_MAX_RETRIES + 1 == 6
    assert [c for _a, c, _j in alert_events(session)] == [
        "Alerta de transferência não entregue ao webhook: HTTP 502 (6 tentativa(s))."
    ]


def test_run_without_a_broker_the_post_is_retried_in_process(
    configured: WebhookReceiver, session: Session
) -> None:
    """The embedded default (eager, propagating): Celery cannot retry, the task does."""
    configured.respond(500)

    assert post_alert(session) == "sent"

    assert len(configured.received) == 2


def test_a_receiver_that_is_down_is_a_connection_error_retried_then_failed(
    session: Session, settings: Settings, worker_retries: None
) -> None:
    settings.HANDOFF_WEBHOOK_URL = "http://127.0.0.1:9/hook"
    settings.HANDOFF_WEBHOOK_SECRET = SECRET

    assert post_alert(session) == "failed"

    [(_a, content, details)] = alert_events(session)
    assert content == (
        "Alerta de transferência não entregue ao webhook: erro de conexão (ConnectError) "
        "(6 tentativa(s))."
    )
    assert details["attempts"] == 6


# --- Through a real turn ----------------------------------------------------------------------


def test_a_turn_s_handoff_alerts_with_the_summary_s_next_action(
    configured: WebhookReceiver,
    session: Session,
    openai_settings: FakeOpenAIServer,
    httpserver: HTTPServer,
    settings: Settings,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    """process_session → code 98 → handoff → the summary task (fake model) → the alert."""
    graph = FakeGraphAPI(httpserver)
    settings.WHATSAPP_API_BASE_URL = graph.base_url
    settings.WHATSAPP_ACCESS_TOKEN = "test-access-token"
    Message.objects.create(
        session=session,
        direction=Direction.INBOUND,
        content="Quero falar com uma pessoa",
        wa_message_id="wamid.IN1",
        wa_timestamp=datetime.now(UTC),
    )
    openai_settings.queue_text('{"s":98,"motivo":"pedido_cliente"}')
    openai_settings.queue_text(json.dumps({"proxima_acao": "Ligar para a cliente"}))

    with django_capture_on_commit_callbacks(execute=True):
        process_session.delay(session.pk)

    [post] = configured.received
    assert (
        post.json["reason"],
        post.json["customer_first_name"],
        post.json["summary_ready"],
        post.json["next_action"],
    ) == ("model_requested", "Maria", True, "Ligar para a cliente")
    [email] = mail.outbox
    assert "Próxima ação: Ligar para a cliente\n" in email.body


def test_a_simulated_session_s_handoff_alerts_nobody(
    configured: WebhookReceiver,
    session: Session,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    Session.objects.filter(pk=session.pk).update(is_simulated=True)

    hooks = hand_off(session, django_capture_on_commit_callbacks)

    assert hooks[-1] == f"enqueue_handoff_alert({session.pk})"
    assert notify_handoff.apply(args=(session.pk,)).get() == "skipped"
    assert (mail.outbox, configured.received, alert_events(session)) == ([], [], [])


# --- A receiver that drips its answer ---------------------------------------------------------


@pytest.fixture
def dripping(
    configured: WebhookReceiver,
    settings: Settings,
    slow_receiver: SlowReceiver,  # noqa: F811
) -> SlowReceiver:
    """The alert's receiver drips its answer a byte every 0.2 s (17 s); the deadline: 0.5 s."""
    settings.HANDOFF_WEBHOOK_URL = slow_receiver.url
    settings.SIGNED_POST_TIMEOUT_SECONDS = 0.5
    return slow_receiver


def test_a_dripping_receiver_times_out_at_the_deadline_and_the_retry_delivers(
    dripping: SlowReceiver, session: Session, worker_retries: None
) -> None:
    dripping.respond(OK_ANSWER, drip=0.2)
    started = time.monotonic()

    assert post_alert(session) == "sent"

    assert time.monotonic() - started < 2.0
    assert len(dripping.received) == 2
    assert [c for _a, c, _j in alert_events(session)] == [
        "Alerta de transferência entregue ao webhook (HTTP 200, 2 tentativa(s))."
    ]


def test_a_receiver_that_always_drips_is_recorded_as_not_delivered_with_the_reason(
    dripping: SlowReceiver, session: Session, worker_retries: None
) -> None:
    for _ in range(DELIVERY_MAX_RETRIES + 1):
        dripping.respond(OK_ANSWER, drip=0.2)

    assert post_alert(session) == "failed"

    assert len(dripping.received) == 6
    assert [c for _a, c, _j in alert_events(session)] == [
        "Alerta de transferência não entregue ao webhook: sem resposta em 0.5 s (6 tentativa(s))."
    ]


def test_the_soft_time_limit_during_the_last_post_is_recorded_as_not_delivered(
    dripping: SlowReceiver, session: Session, settings: Settings
) -> None:
    """The threads worker's real watchdog raises Celery's soft limit in this thread mid-POST."""
    settings.SIGNED_POST_TIMEOUT_SECONDS = 5.0  # the soft limit (0.3 s) comes first
    session.state, session.handoff_reason, session.handed_off_at = "HUMAN", "llm_timeout", OPEN
    session.save()
    dripping.respond(OK_ANSWER, drip=0.2)
    task_deadlines.WATCHDOG.watch("soft-limit-test", 0.3)
    try:
        outcome = handoff_alert_webhook_post(
            session_id=session.pk,
            runtime=DatabasePromptSource().runtime(),
            attempt=6,
            last_attempt=True,
            deadline_errors=(SoftTimeLimitExceeded,),
        )
    finally:
        task_deadlines.WATCHDOG.done()

    assert outcome == "failed"
    assert [c for _a, c, _j in alert_events(session)] == [
        "Alerta de transferência não entregue ao webhook: tempo limite da tarefa esgotado "
        "(6 tentativa(s))."
    ]


def test_the_alert_task_s_soft_time_limit_exceeds_the_post_s_deadline() -> None:
    assert (post_handoff_alert.soft_time_limit, post_handoff_alert.time_limit) == (40, 55)


@pytest.mark.django_db(transaction=True)
def test_without_a_broker_a_hung_alert_receiver_does_not_hold_meta_s_webhook(
    dripping: SlowReceiver,
    openai_settings: FakeOpenAIServer,
    fake_graph: FakeGraphAPI,
    settings: Settings,
) -> None:
    """Meta's POST -> the turn (in the request, eagerly) -> code 98 -> the summary -> the alert,
    whose three attempts (3 s each, and 1.5 s of backoff) run on a delivery thread."""
    settings.SIGNED_POST_TIMEOUT_SECONDS = 3.0
    settings.HANDOFF_NOTIFY_EMAILS = []
    # The fake model answers at once; a loaded CI box must not turn that into a timeout and a
    # second, unqueued, summary request.
    settings.LLM_TIMEOUT_SECONDS = 5.0
    recipes.instance.make()
    openai_settings.queue_text('{"s":98,"motivo":"pedido_cliente"}')
    openai_settings.queue_text(json.dumps({"proxima_acao": "Ligar para a cliente"}))
    for _ in range(3):
        dripping.respond(OK_ANSWER, drip=0.2)
    started = time.monotonic()

    response = meta_post(Client(), fixture_bytes("text"))

    answered_in = time.monotonic() - started
    assert response.status_code == 200
    assert answered_in < 3.0  # less than one attempt's deadline: no attempt ran in the request
    assert delivery_threads().wait_idle(timeout=30)
    session = Session.objects.get()
    assert (session.state, len(dripping.received)) == ("HUMAN", 3)
    assert [c for _a, c, _j in alert_events(session)] == [
        "Alerta de transferência não entregue ao webhook: sem resposta em 3 s (3 tentativa(s))."
    ]
    # The thread left Celery's process-wide join flag as it was: an eager result still reads.
    assert retry_stale_leads.apply().get() == 0
