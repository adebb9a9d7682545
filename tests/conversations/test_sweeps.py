"""The periodic sweeps (conversations.lease.stalled_sessions, conversations.sweeps): a turn or a send
the normal path lost is done once, later, without the customer writing again; a turn that always
raises ends in a handoff; nothing is answered or sent twice."""

import logging
import threading
import time
from datetime import timedelta
from typing import Any
from uuid import uuid4

import pytest
from django.conf import settings
from django.db import connection
from django.utils import timezone
from pytest_django import DjangoCaptureOnCommitCallbacks

from conversations.event_codes import EventCode
from conversations.labels import event_text
from conversations.lease import STALLED_PENDING_GRACE, stalled_sessions, stalled_sessions_requeue
from conversations.models import DeliveryStatus, Direction, Instance, Message, Session
from conversations.sending import outbound_message_send
from conversations.sending.worker import requeue_unsent_messages
from conversations.sweeps import (
    MAX_TURN_FAILURES,
    WINDOW_EXPIRED,
    turn_failure_handle,
    unsent_messages_requeue,
)
from conversations.turns import think
from conversations.turns.run import session_process
from conversations.turns.tasks import process_session, requeue_expired_leases
from prompts_admin.models import RuntimeConfig
from tests import baker_recipes as recipes
from tests.fakes.graph_server import FakeGraphAPI
from tests.fakes.openai_server import FakeOpenAIServer
from tests.helpers.conversation_rows import inbound, reply
from whatsapp.client import SentMessage

pytestmark = pytest.mark.django_db
CUSTOMER_PHONE = "5511977776666"
HANDOFF_TEXT = "Vou chamar alguém da equipe para continuar com você."


@pytest.fixture
def handoff_text(db: None) -> str:
    # The same text in and out of business hours, so the test does not depend on the clock.
    config = RuntimeConfig.load()
    config.handoff_message_open = config.handoff_message_closed = HANDOFF_TEXT
    config.save()
    return HANDOFF_TEXT


def pending(session: Session) -> int:
    return session.messages.filter(direction=Direction.INBOUND, processed_at=None).count()


# --- Stalled sessions: an expired lease, or a turn nobody runs ----------------------------------


def test_a_lost_turn_is_requeued_only_past_the_grace_in_a_bot_state_without_lease(
    instance: Instance,
) -> None:
    now = timezone.now()
    lost = {
        state: recipes.session.make(instance=instance, state=state)
        for state in ("TRIAGE", "QUALIFYING")
    }
    lost |= {
        state: recipes.session.make(instance=instance, state=state)
        for state in ("DATA_COLLECT", "CONFIRM")
    }
    for session in lost.values():
        inbound(session, age=timedelta(seconds=61))
    just_arrived = recipes.session.make(instance=instance)
    inbound(just_arrived, age=timedelta(seconds=59))  # its own task is about to run
    human = recipes.session.make(instance=instance, state="HUMAN")
    inbound(human, age=timedelta(seconds=600))
    closed = recipes.session.make(instance=instance, state="CLOSED")
    inbound(closed, age=timedelta(seconds=600))
    held = recipes.session.make(
        instance=instance, lease_token=uuid4(), lease_expires_at=now + timedelta(minutes=1)
    )
    inbound(held, age=timedelta(seconds=600))
    answered = recipes.session.make(instance=instance)
    inbound(answered, age=timedelta(seconds=600), processed_at=now)
    expired = recipes.session.make(instance=instance, lease_token=uuid4(), lease_expires_at=now)
    inbound(expired, age=timedelta(seconds=1))  # a dead worker's lease: no grace (existing rule)

    found = stalled_sessions(now=now, grace=STALLED_PENDING_GRACE)

    assert found == sorted([*(s.pk for s in lost.values()), expired.pk])


def test_a_simulated_session_is_never_requeued_by_the_sweep(instance: Instance) -> None:
    """The simulator runs its turns and ends a lost one itself: a stranded message or a dead
    worker's lease of a simulated conversation is no customer waiting."""
    now = timezone.now()
    stranded = recipes.session.make(instance=instance, is_simulated=True)
    inbound(stranded, age=timedelta(seconds=600))
    expired = recipes.session.make(
        instance=instance, is_simulated=True, lease_token=uuid4(), lease_expires_at=now
    )
    inbound(expired, age=timedelta(seconds=1))
    real = recipes.session.make(instance=instance)
    inbound(real, age=timedelta(seconds=600))

    assert stalled_sessions(now=now, grace=STALLED_PENDING_GRACE) == [real.pk]


def test_the_sweep_logs_how_many_it_requeued(
    instance: Instance, caplog: pytest.LogCaptureFixture
) -> None:
    sessions = [recipes.session.make(instance=instance) for _ in range(2)]
    for session in sessions:
        inbound(session, age=timedelta(seconds=120))
    enqueued: list[int] = []

    with caplog.at_level(logging.WARNING, logger="conversations.lease"):
        requeued = stalled_sessions_requeue(
            now=timezone.now(), grace=STALLED_PENDING_GRACE, enqueue=enqueued.append
        )

    assert requeued == enqueued == [s.pk for s in sessions]
    [record] = [r for r in caplog.records if r.getMessage() == "stalled_sessions_requeued"]
    assert (vars(record)["count"], vars(record)["session_ids"]) == (
        2,
        f"{sessions[0].pk},{sessions[1].pk}",
    )


def test_the_periodic_task_answers_a_turn_whose_publish_failed_exactly_once(
    instance: Instance,
    openai_settings: FakeOpenAIServer,
    fake_graph: FakeGraphAPI,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    # The webhook committed the message but its on_commit publish of process_session failed.
    session = recipes.session.make(instance=instance, customer_phone=CUSTOMER_PHONE)
    inbound(session, "Oi, alguém aí?", age=timedelta(seconds=90))
    openai_settings.queue_text('{"s":1}Olá! Estou aqui.')

    with django_capture_on_commit_callbacks(execute=True):
        assert requeue_expired_leases.delay().get() == 1
    with django_capture_on_commit_callbacks(execute=True):
        assert requeue_expired_leases.delay().get() == 0

    assert openai_settings.request_count == 1
    assert [(s.json["to"], s.json["text"]["body"]) for s in fake_graph.sends] == [
        (CUSTOMER_PHONE, "Olá! Estou aqui.")
    ]
    assert pending(session) == 0
    session.refresh_from_db()
    assert (session.state, session.lease_token) == ("TRIAGE", None)


def test_pending_messages_of_a_human_session_are_marked_processed_and_never_requeued(
    instance: Instance, openai_settings: FakeOpenAIServer
) -> None:
    session = recipes.session.make(instance=instance, state="HUMAN")
    message = inbound(session, age=timedelta(seconds=600))

    assert stalled_sessions(now=timezone.now(), grace=STALLED_PENDING_GRACE) == []
    # Its turn (had it been enqueued before the handoff) only marks it processed.
    assert process_session.delay(session.pk).get() == "drained"

    message.refresh_from_db()
    assert message.processed_at is not None
    assert openai_settings.request_count == 0
    assert session.messages.filter(direction=Direction.OUTBOUND).count() == 0


# --- A turn that raises ---------------------------------------------------------------------------


class Bug(Exception):
    pass


@pytest.fixture
def buggy_dispatch(monkeypatch: pytest.MonkeyPatch) -> None:
    """A bug after the model answered: every turn raises."""

    def dispatch(*args: Any, **kwargs: Any) -> Any:
        raise Bug("dispatcher bug")

    monkeypatch.setattr(think, "dispatch", dispatch)


def failures(session: Session) -> int:
    return session.messages.filter(
        direction=Direction.SYSTEM, message_type=EventCode.TURN_FAILED
    ).count()


def test_a_turn_that_always_raises_is_retried_by_the_sweep_then_handed_off(
    instance: Instance,
    handoff_text: str,
    buggy_dispatch: None,
    openai_settings: FakeOpenAIServer,
    fake_graph: FakeGraphAPI,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    session = recipes.session.make(instance=instance, customer_phone=CUSTOMER_PHONE)
    message = inbound(session, "Quero um orçamento", age=timedelta(seconds=5))
    for _ in range(MAX_TURN_FAILURES):
        openai_settings.queue_text('{"s":1}Claro!')
    openai_settings.queue_text('{"motivo_encerramento": "erro"}')  # the handoff summary
    requeue: list[int] = []

    def turn_raises() -> bool:
        with django_capture_on_commit_callbacks(execute=True):
            try:
                process_session.delay(session.pk)
            except Bug:
                return True
        return False

    # The webhook's task, then the sweep's retries: each raises, leaves the message pending and
    # the lease free, and is recorded.
    for attempt in range(1, MAX_TURN_FAILURES):
        assert turn_raises()
        session.refresh_from_db()
        assert (session.state, session.lease_token, pending(session)) == ("TRIAGE", None, 1)
        assert failures(session) == attempt
        assert fake_graph.sends == []
        Message.objects.filter(pk=message.pk).update(
            created_at=timezone.now() - timedelta(seconds=61 * attempt)
        )
        assert stalled_sessions_requeue(
            now=timezone.now(), grace=STALLED_PENDING_GRACE, enqueue=requeue.append
        ) == [session.pk]

    assert turn_raises()

    session.refresh_from_db()
    assert (session.state, session.handoff_reason, session.handoff_detail) == (
        "HUMAN",
        "llm_provider_error",
        "o turno falhou 3 vezes seguidas (Bug)",
    )
    assert (session.lease_token, pending(session), failures(session)) == (None, 0, 3)
    # The fixed text, never the model's, sent once; the summary written.
    assert [s.json["text"]["body"] for s in fake_graph.sends] == [handoff_text]
    [sent] = session.messages.filter(direction=Direction.OUTBOUND)
    assert (sent.content, sent.action, sent.delivery_status) == (
        handoff_text,
        "llm_provider_error",
        "sent",
    )
    [handoff] = session.messages.filter(direction=Direction.SYSTEM, message_type="handoff")
    assert handoff.json_part is not None
    assert (handoff.action, handoff.json_part["detail"]) == (
        "llm_provider_error",
        "o turno falhou 3 vezes seguidas (Bug)",
    )
    assert event_text(handoff) == (
        "Transferido para atendimento humano: erro do provedor do modelo. O provedor do modelo "
        "respondeu com erro, ou o turno falhou várias vezes seguidas."
    )
    assert session.summaries.count() == 1
    assert openai_settings.request_count == MAX_TURN_FAILURES + 1
    # Nothing is left for the sweep.
    assert stalled_sessions(now=timezone.now(), grace=STALLED_PENDING_GRACE) == []


def test_failures_count_from_the_oldest_pending_message(
    instance: Instance, handoff_text: str
) -> None:
    session = recipes.session.make(instance=instance)
    old = inbound(session, age=timedelta(seconds=600), processed_at=timezone.now())
    # Two failures of an earlier, since-answered turn do not count against this one.
    for _ in range(2):
        Message.objects.create(
            session=session,
            direction=Direction.SYSTEM,
            message_type=EventCode.TURN_FAILED,
            created_at=old.created_at,
        )
    inbound(session, age=timedelta(seconds=30))
    sent: list[int] = []
    summaries: list[int] = []

    handed_off = turn_failure_handle(
        session_id=session.pk,
        error=Bug("x"),
        now=timezone.now(),
        runtime=lambda: pytest.fail("no handoff, no runtime"),
        send=sent.append,
        enqueue_summary=summaries.append,
    )

    assert (handed_off, sent, summaries, pending(session)) == (False, [], [], 1)
    assert failures(session) == 3


def test_a_turn_failure_is_recorded_without_credentials_or_personal_data(
    instance: Instance,
) -> None:
    session = recipes.session.make(instance=instance)
    inbound(session, age=timedelta(seconds=30))

    turn_failure_handle(
        session_id=session.pk,
        error=Bug("token EAAGSENTINEL0123456789abcdefXYZ refused for 529.982.247-25"),
        now=timezone.now(),
        runtime=lambda: pytest.fail("no handoff, no runtime"),
        send=lambda message_id: None,
        enqueue_summary=lambda session_id: None,
    )

    event = session.messages.get(direction=Direction.SYSTEM, message_type=EventCode.TURN_FAILED)
    assert event.json_part == {
        "error": "Bug('token EAA[redacted] refused for [cpf]')",
        "error_type": "Bug",
    }
    assert event_text(event) == (
        "Erro inesperado ao responder o cliente (Bug); a mensagem será processada de novo."
    )


def test_no_handoff_while_another_worker_holds_the_lease(
    instance: Instance,
    handoff_text: str,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    holder = uuid4()
    session = recipes.session.make(
        instance=instance,
        lease_token=holder,
        lease_expires_at=timezone.now() + timedelta(minutes=3),
    )
    inbound(session, age=timedelta(seconds=30))
    for _ in range(MAX_TURN_FAILURES - 1):
        Message.objects.create(
            session=session, direction=Direction.SYSTEM, message_type=EventCode.TURN_FAILED
        )
    sent: list[int] = []

    with django_capture_on_commit_callbacks(execute=True):
        handed_off = turn_failure_handle(
            session_id=session.pk,
            error=Bug("x"),
            now=timezone.now(),
            runtime=_runtime,
            send=sent.append,
            enqueue_summary=sent.append,
        )

    assert (handed_off, sent, pending(session)) == (False, [], 1)
    session.refresh_from_db()
    assert (session.state, session.lease_token) == ("TRIAGE", holder)


def _runtime() -> Any:
    from prompts_admin.selectors import DatabasePromptSource

    return DatabasePromptSource().runtime()


# --- Unsent OUTBOUND messages --------------------------------------------------------------------


def test_only_lost_sends_are_requeued_first_part_of_a_turn_first(instance: Instance) -> None:
    now = timezone.now()
    session = recipes.session.make(instance=instance)
    untried = reply(session, age=timedelta(seconds=61))
    reply(session, age=timedelta(seconds=59))  # its send task is about to run
    reply(
        session,
        age=timedelta(seconds=600),
        wa_message_id="wamid.OUT1",
        delivery_status=DeliveryStatus.SENT,
    )
    reply(session, age=timedelta(seconds=600), delivery_status=DeliveryStatus.FAILED)
    reply(session, age=timedelta(seconds=600), error="superseded", delivery_status="")
    inbound(session, age=timedelta(seconds=600))
    # Claimed 10 s ago: a worker is sending it now.
    reply(
        session,
        age=timedelta(seconds=1200),
        send_attempts=1,
        delivery_status_at=now - timedelta(seconds=10),
    )
    # Released for a retry 5 minutes into its life: its task's backoff is still running.
    reply(
        session,
        age=timedelta(seconds=300),
        send_attempts=2,
        delivery_status_at=None,
        delivery_error_code=131000,
    )
    # Tried, and its retry chain is surely over: lost.
    lost_retry = reply(
        session, age=timedelta(seconds=16 * 60), send_attempts=2, delivery_status_at=None
    )
    # Claimed two minutes ago by a worker that died before storing the answer.
    dead_claim = reply(
        session,
        age=timedelta(seconds=20 * 60),
        send_attempts=1,
        delivery_status_at=now - timedelta(minutes=2),
    )
    never_enqueued = uuid4()
    first = reply(
        session, "parte 1", age=timedelta(seconds=90), turn_id=never_enqueued, part_index=0
    )
    reply(session, "parte 2", age=timedelta(seconds=90), turn_id=never_enqueued, part_index=1)
    half_sent = uuid4()
    reply(
        session,
        "parte 1",
        age=timedelta(seconds=90),
        turn_id=half_sent,
        part_index=0,
        wa_message_id="wamid.OUT2",
        delivery_status=DeliveryStatus.SENT,
    )
    second = reply(session, "parte 2", age=timedelta(seconds=90), turn_id=half_sent, part_index=1)
    reply(session, "parte 3", age=timedelta(seconds=90), turn_id=half_sent, part_index=2)
    enqueued: list[int] = []

    sweep = unsent_messages_requeue(now=now, enqueue=enqueued.append)

    assert (
        sweep.requeued
        == enqueued
        == [dead_claim.pk, lost_retry.pk, first.pk, second.pk, untried.pk]
    )
    assert sweep.expired == 0


def test_a_message_unsent_past_the_24_hour_window_is_failed_for_staff_not_sent(
    instance: Instance, caplog: pytest.LogCaptureFixture
) -> None:
    now = timezone.now()
    session = recipes.session.make(instance=instance)
    stale = uuid4()
    parts = [
        reply(
            session, f"parte {i}", age=timedelta(seconds=24 * 3600 + 1), turn_id=stale, part_index=i
        )
        for i in range(2)
    ]
    young = reply(session, age=timedelta(seconds=24 * 3600 - 60))
    enqueued: list[int] = []

    with caplog.at_level(logging.WARNING, logger="conversations.sweeps"):
        sweep = unsent_messages_requeue(now=now, enqueue=enqueued.append)

    assert (sweep.requeued, sweep.expired, enqueued) == ([young.pk], 2, [young.pk])
    for part in parts:
        part.refresh_from_db()
        assert (
            part.delivery_status,
            part.delivery_status_at,
            part.delivery_error_code,
            part.delivery_error_title,
            part.send_attempts,
            part.wa_message_id,
        ) == (DeliveryStatus.FAILED, now, None, WINDOW_EXPIRED, 0, None)
    assert WINDOW_EXPIRED == "Não enviada: passou o prazo de 24 horas para responder ao cliente"
    [expired_log] = [r for r in caplog.records if r.getMessage() == "unsent_messages_expired"]
    assert (expired_log.levelname, vars(expired_log)["count"]) == ("ERROR", 2)
    [requeued_log] = [r for r in caplog.records if r.getMessage() == "unsent_messages_requeued"]
    assert (vars(requeued_log)["count"], vars(requeued_log)["message_ids"]) == (1, str(young.pk))
    # A second sweep finds them failed: nothing more to do.
    assert unsent_messages_requeue(now=now, enqueue=enqueued.append).expired == 0


def test_the_periodic_task_sends_a_lost_answer_once_and_in_order(
    instance: Instance, fake_graph: FakeGraphAPI
) -> None:
    session = recipes.session.make(instance=instance, customer_phone=CUSTOMER_PHONE)
    turn = uuid4()
    parts = [
        reply(session, f"parte {i}", age=timedelta(seconds=90), turn_id=turn, part_index=i)
        for i in range(3)
    ]

    assert requeue_unsent_messages.delay().get() == 1
    assert requeue_unsent_messages.delay().get() == 0

    assert [s.json["text"]["body"] for s in fake_graph.sends] == ["parte 0", "parte 1", "parte 2"]
    for part in parts:
        part.refresh_from_db()
    assert [(p.delivery_status, p.send_attempts) for p in parts] == [("sent", 1)] * 3
    assert len({p.wa_message_id for p in parts}) == 3


def test_the_sweeps_are_named_and_scheduled_every_minute() -> None:
    assert requeue_unsent_messages.name == "conversations.requeue_unsent_messages"
    assert settings.CELERY_BEAT_SCHEDULE == {
        "requeue-expired-leases": {
            "task": "conversations.requeue_expired_leases",
            "schedule": 60.0,
        },
        "requeue-unsent-messages": {
            "task": "conversations.requeue_unsent_messages",
            "schedule": 60.0,
        },
        "requeue-received-deliveries": {
            "task": "conversations.requeue_received_deliveries",
            "schedule": 60.0,
        },
        # Leads whose delivery chain was lost (tests/support/test_crm_delivery.py).
        "retry-stale-leads": {"task": "conversations.retry_stale_leads", "schedule": 60.0},
        # Prompt replays whose worker died or that never started, and the queued ones a free
        # slot waits for (tests/governance/test_replay_queue.py).
        "fail-abandoned-replays": {
            "task": "governance.fail_abandoned_replays",
            "schedule": 60.0,
        },
        # Gradual releases whose candidate is worse, every 5 minutes
        # (tests/governance/test_rollout_pause.py).
        "check-rollout-pauses": {"task": "governance.check_rollout_pauses", "schedule": 300.0},
        # LGPD retention, daily (tests/conversations/privacy/test_retention.py).
        "apply-retention": {"task": "conversations.apply_retention", "schedule": 86400.0},
        # Approved WhatsApp message templates from Meta, daily
        # (tests/conversations/test_message_templates_sync.py).
        "sync-message-templates": {
            "task": "conversations.sync_message_templates",
            "schedule": 86400.0,
        },
    }


# --- Concurrency, on PostgreSQL ------------------------------------------------------------------


class SlowSender:
    """A Graph API client that takes a while to accept each message and remembers them."""

    def __init__(self) -> None:
        self.sent: list[str] = []
        self._lock = threading.Lock()

    def send_text(self, *, body: str, **kwargs: Any) -> SentMessage:
        time.sleep(0.05)
        with self._lock:
            self.sent.append(body)
            return SentMessage(wamid=f"wamid.SLOW{len(self.sent)}")

    def mark_read(self, **kwargs: Any) -> None:
        return None

    def send_template(self, **kwargs: Any) -> SentMessage:
        raise AssertionError("the sweeps resend text parts only")

    def send_interactive(self, **kwargs: Any) -> SentMessage:
        raise AssertionError("the sweeps resend text parts only")

    def media_upload(self, **kwargs: Any) -> str:
        raise AssertionError("the sweeps resend text parts only")

    def send_media(self, **kwargs: Any) -> SentMessage:
        raise AssertionError("the sweeps resend text parts only")


def run_concurrently(work: Any, workers: int) -> None:
    barrier = threading.Barrier(workers)
    errors: list[BaseException] = []

    def run() -> None:
        try:
            barrier.wait()
            work()
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run) for _ in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_overlapping_sweeps_and_send_tasks_send_each_lost_part_once_in_order(
    instance: Instance, fake_graph: FakeGraphAPI
) -> None:
    # `fake_graph` configures an access token: without one the dry-run sender would send.
    session = recipes.session.make(instance=instance, customer_phone=CUSTOMER_PHONE)
    turn = uuid4()
    for i in range(3):
        reply(session, f"parte {i}", age=timedelta(seconds=90), turn_id=turn, part_index=i)
    single = reply(session, "avulsa", age=timedelta(seconds=90))
    client = SlowSender()

    def sweep_and_send() -> None:
        # A late beat run overlapping the next one, each send task run right away.
        unsent_messages_requeue(
            now=timezone.now(),
            enqueue=lambda message_id: outbound_message_send(message_id=message_id, client=client),
        )

    run_concurrently(sweep_and_send, workers=4)

    assert sorted(client.sent) == ["avulsa", "parte 0", "parte 1", "parte 2"]
    assert [b for b in client.sent if b.startswith("parte")] == ["parte 0", "parte 1", "parte 2"]
    unsent = Message.objects.filter(direction=Direction.OUTBOUND, wa_message_id=None)
    assert list(unsent) == []
    single.refresh_from_db()
    assert (single.delivery_status, single.send_attempts) == ("sent", 1)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_overlapping_stalled_session_sweeps_answer_a_lost_turn_once(
    instance: Instance, handoff_text: str
) -> None:
    from tests.helpers.fake_collaborators import FakeLLM
    from tests.helpers.pipeline import Pipeline

    session = recipes.session.make(instance=instance, customer_phone=CUSTOMER_PHONE)
    inbound(session, "Oi, alguém aí?", age=timedelta(seconds=90))
    run = Pipeline(llm=FakeLLM('{"s":1}Olá! Estou aqui.'), clock=timezone.now)
    deps = run.deps()

    def sweep() -> None:
        stalled_sessions_requeue(
            now=timezone.now(),
            grace=STALLED_PENDING_GRACE,
            enqueue=lambda session_id: session_process(
                session_id=session_id, deps=deps, config=run.config
            ),
        )

    run_concurrently(sweep, workers=4)

    assert len(run.llm.calls) == 1
    replies = list(session.messages.filter(direction=Direction.OUTBOUND))
    assert [m.content for m in replies] == ["Olá! Estou aqui."]
    assert run.sent == [m.pk for m in replies]
    assert pending(session) == 0
