"""A circuit breaker for the model provider: when the provider is down, turns hand off at once
instead of each waiting for its timeouts and retries.

The state machine is pure (`circuit_admit`, `circuit_record_success`, `circuit_record_failure`
take a snapshot and a time and return the next snapshot); `CircuitBreakerClient` wraps any
`LLMClient` and keeps the state in a `CircuitStore` shared by every worker process (the
conversations app stores it in one database row, `ProviderCircuit`).

- **closed**: calls go through. A *provider failure* — a timeout, a connection error or a 5xx
  after the client's own retries (`LLMError.transient`) — counts; `failures` of them in a row,
  the first no older than `window` when the last arrives, open the circuit.
- **open**: every call fails at once with `LLMCircuitOpenError` (no HTTP request), which the
  pipeline hands off as ``llm_provider_error`` like any provider error, for `cooldown`.
- **half-open**: after the cool-down the next call is let through as the one probe; other calls
  still fail at once. The probe's success closes the circuit; a provider failure opens it for
  another cool-down. A probe that never reports (its worker died) is replaced by another one
  after a further `cooldown`.

Any answer from the provider counts as a success, a 4xx or a rate limit included: the provider is
reachable, and those fail fast anyway, so there is no waiting to save. A call refused without a
request (`attempts == 0`, e.g. no API key) says nothing of the provider and changes nothing.
"""

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Protocol, TypeVar

from agents.llm import (
    CallPurpose,
    ChatMessage,
    LLMCallResult,
    LLMClient,
    LLMError,
    LLMProviderError,
)

logger = logging.getLogger(__name__)

T = TypeVar("T")


class CircuitState(StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


class Admission(StrEnum):
    ALLOW = "allow"
    PROBE = "probe"
    REJECT = "reject"


@dataclass(frozen=True, slots=True)
class CircuitPolicy:
    failures: int
    window: timedelta
    cooldown: timedelta

    def __post_init__(self) -> None:
        if self.failures < 1:
            raise ValueError("failures must be >= 1")


@dataclass(frozen=True, slots=True)
class CircuitSnapshot:
    state: CircuitState = CircuitState.CLOSED
    # Provider failures in a row (closed), or the ones that opened it (open, half-open).
    failures: int = 0
    first_failure_at: datetime | None = None
    opened_at: datetime | None = None
    probe_started_at: datetime | None = None


CLOSED = CircuitSnapshot()


def circuit_admit(
    snapshot: CircuitSnapshot, *, now: datetime, policy: CircuitPolicy
) -> tuple[CircuitSnapshot, Admission]:
    """May a call go to the provider now? The next snapshot and the answer."""
    if snapshot.state is CircuitState.CLOSED:
        return snapshot, Admission.ALLOW
    if snapshot.state is CircuitState.OPEN:
        assert snapshot.opened_at is not None
        if now < snapshot.opened_at + policy.cooldown:
            return snapshot, Admission.REJECT
    elif (
        snapshot.probe_started_at is not None and now < snapshot.probe_started_at + policy.cooldown
    ):
        # Half-open with a probe under way: only that one call is let through.
        return snapshot, Admission.REJECT
    return replace(snapshot, state=CircuitState.HALF_OPEN, probe_started_at=now), Admission.PROBE


def circuit_record_success(snapshot: CircuitSnapshot) -> CircuitSnapshot:
    """The provider answered: the count restarts, and an open or half-open circuit closes."""
    return CLOSED


def circuit_record_failure(
    snapshot: CircuitSnapshot, *, now: datetime, policy: CircuitPolicy
) -> CircuitSnapshot:
    """A provider failure (timeout, connection error, 5xx)."""
    if snapshot.state is not CircuitState.CLOSED:
        # The probe failed (or a call admitted before it opened came back failing): a new
        # cool-down starts.
        return replace(snapshot, state=CircuitState.OPEN, opened_at=now, probe_started_at=None)
    first = snapshot.first_failure_at
    if first is None or now - first > policy.window:
        failures, first = 1, now
    else:
        failures = snapshot.failures + 1
    if failures >= policy.failures:
        return CircuitSnapshot(
            state=CircuitState.OPEN, failures=failures, first_failure_at=first, opened_at=now
        )
    return CircuitSnapshot(failures=failures, first_failure_at=first)


class CircuitStore(Protocol):
    """Where the one circuit's snapshot lives; shared by every worker process."""

    def read(self) -> CircuitSnapshot:
        """The current snapshot (no lock)."""
        ...

    def update(self, change: Callable[[CircuitSnapshot], tuple[CircuitSnapshot, T]]) -> T:
        """Apply `change` to the current snapshot atomically (no other update in between), store
        the snapshot it returns and return its second item."""
        ...


class LLMCircuitOpenError(LLMProviderError):
    """Refused without a request: the circuit is open (or a probe is under way)."""

    outcome = "circuit_open"


class CircuitBreakerClient:
    """An `LLMClient` that stops calling a provider that keeps failing (see the module)."""

    def __init__(
        self,
        inner: LLMClient,
        *,
        store: CircuitStore,
        policy: CircuitPolicy,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.inner = inner
        self.store = store
        self.policy = policy
        self.clock = clock

    def chat(
        self,
        *,
        model: str,
        instructions: str,
        messages: Sequence[ChatMessage],
        purpose: CallPurpose,
        cache_key: str = "",
    ) -> LLMCallResult:
        seen = self.store.read()
        admission = Admission.ALLOW
        if seen.state is not CircuitState.CLOSED:
            admission = self.store.update(self._admit)
        if admission is Admission.REJECT:
            raise LLMCircuitOpenError(
                "circuit_open: the model provider failed repeatedly; no request sent", attempts=0
            )
        if admission is Admission.PROBE:
            logger.info("llm_circuit_probe", extra={"model": model, "purpose": purpose})
        try:
            result = self.inner.chat(
                model=model,
                instructions=instructions,
                messages=messages,
                purpose=purpose,
                cache_key=cache_key,
            )
        except LLMError as exc:
            if exc.attempts == 0:
                raise
            if exc.transient:
                self.store.update(self._failed)
            elif admission is Admission.PROBE or seen.failures:
                self.store.update(self._succeeded)
            raise
        if admission is Admission.PROBE or seen.failures or seen.state is not CircuitState.CLOSED:
            self.store.update(self._succeeded)
        return result

    # --- transitions, applied inside the store's atomic update ------------------------------

    def _admit(self, snapshot: CircuitSnapshot) -> tuple[CircuitSnapshot, Admission]:
        return circuit_admit(snapshot, now=self.clock(), policy=self.policy)

    def _failed(self, snapshot: CircuitSnapshot) -> tuple[CircuitSnapshot, None]:
        after = circuit_record_failure(snapshot, now=self.clock(), policy=self.policy)
        if after.state is CircuitState.OPEN and snapshot.state is not CircuitState.OPEN:
            logger.warning(
                "llm_circuit_opened",
                extra={
                    "failures": after.failures,
                    "after_probe": snapshot.state is CircuitState.HALF_OPEN,
                    "cooldown_seconds": self.policy.cooldown.total_seconds(),
                },
            )
        return after, None

    def _succeeded(self, snapshot: CircuitSnapshot) -> tuple[CircuitSnapshot, None]:
        after = circuit_record_success(snapshot)
        if snapshot.state is not CircuitState.CLOSED:
            logger.info("llm_circuit_closed", extra={"failures": snapshot.failures})
        return after, None
