"""The model provider's circuit breaker: the pure state machine and the client wrapper, with an
in-memory store and a fake inner client (no database, no HTTP)."""

import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TypeVar

import pytest

from agents.circuit import (
    CLOSED,
    Admission,
    CircuitBreakerClient,
    CircuitPolicy,
    CircuitSnapshot,
    CircuitState,
    LLMCircuitOpenError,
    circuit_admit,
    circuit_record_failure,
    circuit_record_success,
)
from agents.llm import (
    ChatMessage,
    LLMError,
    LLMProviderError,
    LLMRateLimitError,
    LLMTimeoutError,
)
from tests.helpers.fake_collaborators import FakeLLM

T = TypeVar("T")
T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
POLICY = CircuitPolicy(failures=3, window=timedelta(seconds=60), cooldown=timedelta(seconds=30))


def s(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def fail(snapshot: CircuitSnapshot, at: float) -> CircuitSnapshot:
    return circuit_record_failure(snapshot, now=s(at), policy=POLICY)


def test_failures_in_a_row_within_the_window_open_the_circuit() -> None:
    one = fail(CLOSED, 0)
    two = fail(one, 10)
    three = fail(two, 59)

    assert one == CircuitSnapshot(failures=1, first_failure_at=s(0))
    assert two == CircuitSnapshot(failures=2, first_failure_at=s(0))
    assert three == CircuitSnapshot(
        state=CircuitState.OPEN, failures=3, first_failure_at=s(0), opened_at=s(59)
    )


def test_a_failure_after_the_window_starts_counting_again() -> None:
    two = fail(fail(CLOSED, 0), 10)

    assert fail(two, 61) == CircuitSnapshot(failures=1, first_failure_at=s(61))


@pytest.mark.parametrize(
    ("at", "after"),
    [
        pytest.param(
            59.9,
            CircuitSnapshot(CircuitState.OPEN, 3, first_failure_at=s(0), opened_at=s(59.9)),
            id="59.9 s: inside, opens",
        ),
        pytest.param(
            60,
            CircuitSnapshot(CircuitState.OPEN, 3, first_failure_at=s(0), opened_at=s(60)),
            id="exactly 60 s: inside, opens",
        ),
        pytest.param(
            60.1, CircuitSnapshot(failures=1, first_failure_at=s(60.1)), id="60.1 s: counts again"
        ),
    ],
)
def test_the_third_failure_opens_the_circuit_up_to_exactly_60_seconds_after_the_first(
    at: float, after: CircuitSnapshot
) -> None:
    two = fail(fail(CLOSED, 0), 10)

    assert fail(two, at) == after


def test_a_success_restarts_the_count() -> None:
    two = fail(fail(CLOSED, 0), 10)

    assert circuit_record_success(two) == CLOSED
    assert fail(circuit_record_success(two), 20) == CircuitSnapshot(
        failures=1, first_failure_at=s(20)
    )


OPEN = CircuitSnapshot(state=CircuitState.OPEN, failures=3, first_failure_at=s(0), opened_at=s(0))


@pytest.mark.parametrize(
    ("snapshot", "at", "admission", "state_after"),
    [
        (CLOSED, 0, Admission.ALLOW, CircuitState.CLOSED),
        (OPEN, 1, Admission.REJECT, CircuitState.OPEN),
        (OPEN, 29.9, Admission.REJECT, CircuitState.OPEN),
        (OPEN, 30, Admission.PROBE, CircuitState.HALF_OPEN),
        # A probe under way: everyone else still hands off at once.
        (
            CircuitSnapshot(CircuitState.HALF_OPEN, 3, s(0), s(0), probe_started_at=s(30)),
            45,
            Admission.REJECT,
            CircuitState.HALF_OPEN,
        ),
        # A probe that never reported (its worker died) is replaced after another cool-down.
        (
            CircuitSnapshot(CircuitState.HALF_OPEN, 3, s(0), s(0), probe_started_at=s(30)),
            59.9,
            Admission.REJECT,
            CircuitState.HALF_OPEN,
        ),
        (
            CircuitSnapshot(CircuitState.HALF_OPEN, 3, s(0), s(0), probe_started_at=s(30)),
            60,
            Admission.PROBE,
            CircuitState.HALF_OPEN,
        ),
    ],
)
def test_admission(
    snapshot: CircuitSnapshot, at: float, admission: Admission, state_after: CircuitState
) -> None:
    after, answer = circuit_admit(snapshot, now=s(at), policy=POLICY)

    assert (answer, after.state) == (admission, state_after)


def test_a_failed_probe_opens_the_circuit_for_another_cool_down() -> None:
    probing, _ = circuit_admit(OPEN, now=s(30), policy=POLICY)

    after = fail(probing, 31)

    assert after == CircuitSnapshot(
        state=CircuitState.OPEN, failures=3, first_failure_at=s(0), opened_at=s(31)
    )
    assert circuit_admit(after, now=s(60), policy=POLICY)[1] is Admission.REJECT
    assert circuit_admit(after, now=s(61), policy=POLICY)[1] is Admission.PROBE


def test_a_policy_needs_at_least_one_failure() -> None:
    with pytest.raises(ValueError, match="failures must be >= 1"):
        CircuitPolicy(failures=0, window=timedelta(seconds=1), cooldown=timedelta(seconds=1))


# --- the client wrapper -------------------------------------------------------------------------


class MemoryStore:
    def __init__(self, snapshot: CircuitSnapshot = CLOSED) -> None:
        self.snapshot = snapshot
        self.writes = 0

    def read(self) -> CircuitSnapshot:
        return self.snapshot

    def update(self, change: Callable[[CircuitSnapshot], tuple[CircuitSnapshot, T]]) -> T:
        after, answer = change(self.snapshot)
        if after != self.snapshot:
            self.writes += 1
            self.snapshot = after
        return answer


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


def breaker(llm: FakeLLM, store: MemoryStore, clock: Clock) -> CircuitBreakerClient:
    return CircuitBreakerClient(llm, store=store, policy=POLICY, clock=clock)


def call(client: CircuitBreakerClient) -> str:
    return client.chat(
        model="m", instructions="i", messages=[ChatMessage("user", "oi")], purpose="agent"
    ).raw_response


def transient(message: str = "HTTP 500") -> LLMProviderError:
    error = LLMProviderError(message, attempts=2)
    error.transient = True
    return error


def test_the_wrapper_opens_after_the_failures_and_then_refuses_without_calling(
    caplog: pytest.LogCaptureFixture,
) -> None:
    llm = FakeLLM(transient(), LLMTimeoutError("timed out", attempts=2), transient())
    store, clock = MemoryStore(), Clock()
    client = breaker(llm, store, clock)

    for _ in range(3):
        with pytest.raises(LLMError), caplog.at_level(logging.INFO, logger="agents.circuit"):
            call(client)
    with pytest.raises(LLMCircuitOpenError) as refused:
        call(client)

    assert len(llm.calls) == 3
    assert (store.snapshot.state, store.snapshot.failures) == (CircuitState.OPEN, 3)
    assert (refused.value.outcome, refused.value.attempts) == ("circuit_open", 0)
    assert [r.getMessage() for r in caplog.records] == ["llm_circuit_opened"]
    assert vars(caplog.records[0])["failures"] == 3


def test_after_the_cool_down_one_probe_goes_and_its_success_closes_the_circuit(
    caplog: pytest.LogCaptureFixture,
) -> None:
    llm = FakeLLM('{"s":1}De volta')
    store, clock = MemoryStore(OPEN), Clock()
    client = breaker(llm, store, clock)
    clock.now = s(30)

    with caplog.at_level(logging.INFO, logger="agents.circuit"):
        assert call(client) == '{"s":1}De volta'

    assert store.snapshot == CLOSED
    assert [r.getMessage() for r in caplog.records] == ["llm_circuit_probe", "llm_circuit_closed"]


def test_while_the_probe_is_out_other_calls_are_refused() -> None:
    store, clock = MemoryStore(OPEN), Clock()
    clock.now = s(30)
    probing, _ = circuit_admit(OPEN, now=clock.now, policy=POLICY)
    store.snapshot = probing
    llm = FakeLLM()

    with pytest.raises(LLMCircuitOpenError):
        call(breaker(llm, store, clock))

    assert llm.calls == []


@pytest.mark.parametrize(
    "answer",
    [
        LLMProviderError("HTTP 400: bad input", attempts=1),
        LLMRateLimitError("HTTP 429", attempts=1),
    ],
)
def test_an_answer_from_the_provider_is_no_provider_failure(answer: LLMError) -> None:
    store = MemoryStore(fail(fail(CLOSED, 0), 1))
    client = breaker(FakeLLM(answer), store, Clock())

    with pytest.raises(type(answer)):
        call(client)

    assert store.snapshot == CLOSED


def test_a_call_refused_before_any_request_changes_nothing() -> None:
    before = fail(CLOSED, 0)
    store = MemoryStore(before)
    client = breaker(
        FakeLLM(LLMProviderError("OPENAI_API_KEY is not set", attempts=0)), store, Clock()
    )

    with pytest.raises(LLMProviderError):
        call(client)

    assert (store.snapshot, store.writes) == (before, 0)


def test_a_healthy_provider_costs_no_write() -> None:
    store = MemoryStore()
    client = breaker(FakeLLM('{"s":1}a', '{"s":1}b'), store, Clock())

    call(client)
    call(client)

    assert (store.snapshot, store.writes) == (CLOSED, 0)
