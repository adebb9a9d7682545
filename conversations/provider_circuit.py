"""Where the model provider's circuit breaker keeps its state, and the LLM client a task uses.

The state machine is pure (agents/circuit.py); its state must be shared by every worker
process, and the database is the one store every deployment has (the embedded default has no
Redis and the cache may be per process), so it is one `ProviderCircuit` row. Reading it is one
primary-key SELECT per model call; it is written only when something changes (a failure, the
circuit opening, a probe, the first success after failures), under ``SELECT ... FOR UPDATE`` in
a short transaction of its own, never across the model call.
"""

import functools
import threading
from collections.abc import Callable
from datetime import timedelta
from typing import TypeVar

from django.conf import settings
from django.db import transaction

from agents.circuit import (
    CircuitBreakerClient,
    CircuitPolicy,
    CircuitSnapshot,
    CircuitState,
)
from agents.llm import LLMClient, MediaReader, OpenAIClient
from conversations.db_connections import ConnectionReleasingClient, ConnectionReleasingReader
from conversations.models import ProviderCircuit

T = TypeVar("T")
PROVIDER = "openai"


# Every model call reads the circuit first: literal SQL, not the ORM's ``filter(pk=name).first()``,
# because with every worker statement the ORM's a turn cost 25.4-34.9 ms of worker CPU on the
# bench machine, over the 25 ms floor (bench/worker_cpu.py).
READ_SQL = """SELECT name, state, failures, first_failure_at, opened_at, probe_started_at
    FROM conversations_providercircuit WHERE name = %s"""


class DatabaseCircuitStore:
    """`CircuitStore` on one `ProviderCircuit` row, created on first use."""

    def __init__(self, name: str = PROVIDER) -> None:
        self.name = name

    def read(self) -> CircuitSnapshot:
        rows = list(ProviderCircuit.objects.raw(READ_SQL, [self.name]))
        return _snapshot(rows[0]) if rows else CircuitSnapshot()

    def update(self, change: Callable[[CircuitSnapshot], tuple[CircuitSnapshot, T]]) -> T:
        with transaction.atomic():
            ProviderCircuit.objects.get_or_create(pk=self.name)
            row = ProviderCircuit.objects.select_for_update().get(pk=self.name)
            before = _snapshot(row)
            after, answer = change(before)
            if after != before:
                row.state = after.state.value
                row.failures = after.failures
                row.first_failure_at = after.first_failure_at
                row.opened_at = after.opened_at
                row.probe_started_at = after.probe_started_at
                row.save()
        return answer


def _snapshot(row: ProviderCircuit) -> CircuitSnapshot:
    return CircuitSnapshot(
        state=CircuitState(row.state),
        failures=row.failures,
        first_failure_at=row.first_failure_at,
        opened_at=row.opened_at,
        probe_started_at=row.probe_started_at,
    )


def circuit_policy_from_settings() -> CircuitPolicy:
    """LLM_CIRCUIT_FAILURES, LLM_CIRCUIT_WINDOW_SECONDS and LLM_CIRCUIT_COOLDOWN_SECONDS."""
    return CircuitPolicy(
        failures=settings.LLM_CIRCUIT_FAILURES,
        window=timedelta(seconds=settings.LLM_CIRCUIT_WINDOW_SECONDS),
        cooldown=timedelta(seconds=settings.LLM_CIRCUIT_COOLDOWN_SECONDS),
    )


def task_llm_client() -> LLMClient:
    """The model client of one task: this process's OpenAI client behind the shared circuit
    breaker (whose state is in the database, so a fresh wrapper per task is free)."""
    return CircuitBreakerClient(
        process_llm_client(), store=DatabaseCircuitStore(), policy=circuit_policy_from_settings()
    )


def process_llm_client() -> LLMClient:
    """This process's OpenAI client, giving the thread's pooled connection back before each
    request, without the circuit breaker: what a caller uses whose failures must not open the
    circuit customers' turns depend on (a prompt replay)."""
    # Under a lock: a threads worker's first burst would otherwise build one client per thread
    # (`lru_cache` does not hold back concurrent misses), each with its TLS context.
    with _client_lock:
        return _releasing_client(
            settings.OPENAI_API_KEY,
            settings.OPENAI_BASE_URL,
            settings.LLM_TIMEOUT_SECONDS,
            settings.LLM_RETRY_MAX,
        )


def process_media_reader() -> MediaReader:
    """This process's OpenAI client as the media reader (transcriptions, image descriptions),
    giving the thread's pooled connection back before each request; outside the circuit breaker,
    whose state is the customers' turns' (a failed transcription hands off on its own)."""
    with _client_lock:
        client = _openai_client(
            settings.OPENAI_API_KEY,
            settings.OPENAI_BASE_URL,
            settings.LLM_TIMEOUT_SECONDS,
            settings.LLM_RETRY_MAX,
        )
    return ConnectionReleasingReader(client)


_client_lock = threading.Lock()


@functools.lru_cache(maxsize=4)
def _releasing_client(
    api_key: str, base_url: str | None, timeout: float, retry_max: int
) -> ConnectionReleasingClient:
    """The process's OpenAI client, giving the thread's pooled database connection back before
    each request (conversations.db_connections): the circuit's reads and the call records take
    one again after the model answers."""
    return ConnectionReleasingClient(_openai_client(api_key, base_url, timeout, retry_max))


@functools.lru_cache(maxsize=4)
def _openai_client(
    api_key: str, base_url: str | None, timeout: float, retry_max: int
) -> OpenAIClient:
    """One OpenAI client (and its keep-alive connection pool) per process and configuration,
    reused by every turn and summary task instead of a new pool and TLS handshake per task;
    built lazily, after a prefork worker's fork."""
    return OpenAIClient(api_key=api_key, base_url=base_url, timeout=timeout, retry_max=retry_max)
