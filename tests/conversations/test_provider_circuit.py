"""The model provider's circuit breaker as a task runs it: the real OpenAI client against the fake
Responses server, the state in the `ProviderCircuit` row, turns run by `process_session`."""

import threading
import time
from datetime import timedelta

import pytest
from django.db import connection
from django.db.models import F
from django.test import Client
from django.utils import timezone
from pytest_django import Settings

from agents.circuit import (
    Admission,
    CircuitPolicy,
    CircuitSnapshot,
    CircuitState,
    circuit_admit,
)
from conversations.models import Direction, Instance, LLMCall, ProviderCircuit, Session
from conversations.provider_circuit import PROVIDER, DatabaseCircuitStore
from conversations.turns.tasks import process_session
from prompts_admin.models import RuntimeConfig
from tests import baker_recipes as recipes
from tests.fakes.graph_server import FakeGraphAPI
from tests.fakes.openai_server import FakeOpenAIServer
from tests.helpers.conversation_rows import inbound

pytestmark = pytest.mark.django_db
COOLDOWN = 30


@pytest.fixture
def circuit(settings: Settings, openai_settings: FakeOpenAIServer) -> FakeOpenAIServer:
    """Two provider failures in a row open the circuit; no retries, so one request per turn."""
    settings.LLM_RETRY_MAX = 0
    settings.LLM_CIRCUIT_FAILURES = 2
    settings.LLM_CIRCUIT_WINDOW_SECONDS = 60
    settings.LLM_CIRCUIT_COOLDOWN_SECONDS = COOLDOWN
    return openai_settings


HANDOFF_TEXT = "Vou chamar uma pessoa da equipe para continuar."


@pytest.fixture
def instance(instance: Instance, fake_graph: FakeGraphAPI) -> Instance:
    """The shared instance, with the Graph API (the typing indicator) answering, so only the model
    is failing, and one handoff text in and out of business hours."""
    config = RuntimeConfig.load()
    config.handoff_message_open = config.handoff_message_closed = HANDOFF_TEXT
    config.save()
    return instance


def turn(instance: Instance) -> Session:
    """A new customer's first message, answered by the task (on-commit hooks are not run)."""
    session = recipes.session.make(instance=instance)
    inbound(session, "Oi, preciso de uma análise")
    process_session.delay(session.pk).get()
    session.refresh_from_db()
    return session


def reply_of(session: Session) -> str:
    return session.messages.get(direction=Direction.OUTBOUND).content


def circuit_row() -> tuple[str, int]:
    row = ProviderCircuit.objects.get(pk=PROVIDER)
    return row.state, row.failures


def cool_down_passes() -> None:
    ProviderCircuit.objects.update(opened_at=F("opened_at") - timedelta(seconds=COOLDOWN + 1))


@pytest.mark.parametrize(
    ("failure", "reason"), [("http_500", "llm_provider_error"), ("timeout", "llm_timeout")]
)
def test_provider_failures_open_the_circuit_and_the_next_turn_hands_off_without_a_request(
    circuit: FakeOpenAIServer, instance: Instance, failure: str, reason: str
) -> None:
    for _ in range(2):
        if failure == "http_500":
            circuit.queue_error(500)
        else:
            circuit.queue_timeout(2.0)  # LLM_TIMEOUT_SECONDS is 0.5 here
        handed_off = turn(instance)
        assert (handed_off.state, handed_off.handoff_reason) == ("HUMAN", reason)
    assert circuit_row() == (CircuitState.OPEN, 2)
    requests = circuit.request_count

    refused = turn(instance)

    assert circuit.request_count == requests == 2
    assert (refused.state, refused.handoff_reason) == ("HUMAN", "llm_provider_error")
    assert "circuit_open" in refused.handoff_detail
    assert reply_of(refused) == HANDOFF_TEXT
    call = LLMCall.objects.get(session=refused)
    assert (call.outcome, call.attempts) == ("circuit_open", 0)


def test_after_the_cool_down_one_probe_is_sent_and_its_success_closes_the_circuit(
    circuit: FakeOpenAIServer, instance: Instance
) -> None:
    circuit.queue_error(502)
    circuit.queue_error(503)
    turn(instance)
    turn(instance)
    cool_down_passes()
    circuit.queue_text('{"s":1}Olá! Qual análise você precisa?')

    answered = turn(instance)

    assert circuit.request_count == 3
    assert (answered.state, reply_of(answered)) == ("TRIAGE", "Olá! Qual análise você precisa?")
    assert circuit_row() == (CircuitState.CLOSED, 0)
    assert DatabaseCircuitStore().read().opened_at is None


def test_a_failed_probe_opens_the_circuit_for_another_cool_down(
    circuit: FakeOpenAIServer, instance: Instance
) -> None:
    circuit.queue_error(500)
    circuit.queue_error(500)
    turn(instance)
    turn(instance)
    cool_down_passes()
    circuit.queue_error(500)

    probe = turn(instance)
    refused = turn(instance)

    assert circuit.request_count == 3
    assert probe.handoff_reason == refused.handoff_reason == "llm_provider_error"
    assert "circuit_open" not in probe.handoff_detail
    assert "circuit_open" in refused.handoff_detail
    assert circuit_row() == (CircuitState.OPEN, 2)


def test_contract_errors_of_the_provider_do_not_open_it(
    circuit: FakeOpenAIServer, instance: Instance
) -> None:
    circuit.queue_error(400)
    circuit.queue_error(400)
    circuit.queue_error(400)

    for _ in range(3):
        assert turn(instance).handoff_reason == "llm_provider_error"

    assert circuit.request_count == 3
    assert ProviderCircuit.objects.filter(state=CircuitState.OPEN).count() == 0


def test_the_circuit_is_read_only_in_the_admin(
    circuit: FakeOpenAIServer, instance: Instance, admin_client: Client
) -> None:
    circuit.queue_error(500)
    circuit.queue_error(500)
    turn(instance)
    turn(instance)

    listing = admin_client.get("/admin/conversations/providercircuit/")
    page = admin_client.get(f"/admin/conversations/providercircuit/{PROVIDER}/change/")
    post = admin_client.post(
        f"/admin/conversations/providercircuit/{PROVIDER}/change/", {"state": "closed"}
    )

    assert listing.status_code == page.status_code == 200
    assert "aberto (os turnos vão direto para a equipe)" in listing.content.decode()
    assert post.status_code == 403
    assert circuit_row() == (CircuitState.OPEN, 2)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_after_the_cool_down_concurrent_workers_let_exactly_one_probe_through() -> None:
    """The half-open race: many workers see the cool-down over at once; the row lock lets one
    of them probe and refuses the others."""
    opened = timezone.now() - timedelta(seconds=COOLDOWN + 1)
    ProviderCircuit.objects.create(
        pk=PROVIDER, state=CircuitState.OPEN, failures=5, first_failure_at=opened, opened_at=opened
    )
    policy = CircuitPolicy(
        failures=5, window=timedelta(seconds=60), cooldown=timedelta(seconds=COOLDOWN)
    )
    workers = 6
    start = threading.Barrier(workers)
    answers: list[Admission] = []

    def admit(snapshot: CircuitSnapshot) -> tuple[CircuitSnapshot, Admission]:
        after, answer = circuit_admit(snapshot, now=timezone.now(), policy=policy)
        time.sleep(0.05)  # hold the row lock while the others arrive
        return after, answer

    def worker() -> None:
        try:
            start.wait()
            answers.append(DatabaseCircuitStore().update(admit))
        finally:
            connection.close()

    threads = [threading.Thread(target=worker) for _ in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(answers) == sorted([Admission.PROBE] + [Admission.REJECT] * (workers - 1))
    assert ProviderCircuit.objects.get().state == CircuitState.HALF_OPEN


@pytest.mark.django_db
def test_the_store_reads_the_row_and_a_missing_row_as_closed() -> None:
    store = DatabaseCircuitStore()
    assert store.read() == CircuitSnapshot()
    opened = timezone.now() - timedelta(seconds=5)
    ProviderCircuit.objects.create(
        pk=PROVIDER,
        state=CircuitState.OPEN.value,
        failures=5,
        first_failure_at=opened - timedelta(seconds=30),
        opened_at=opened,
    )

    snapshot = store.read()

    assert snapshot == CircuitSnapshot(
        state=CircuitState.OPEN,
        failures=5,
        first_failure_at=opened - timedelta(seconds=30),
        opened_at=opened,
        probe_started_at=None,
    )
    assert DatabaseCircuitStore("another").read() == CircuitSnapshot()
