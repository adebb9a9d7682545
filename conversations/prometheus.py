"""The application's Prometheus metrics (docs/operations.md, Production, Metrics): counters and a
histogram incremented at the one place each thing happens, and gauges read from the database when
scraped.

Each instrumented module makes one call into this module (`webhook_delivery_counted`,
`turn_counted`, `handoff_counted`, `model_call_observed`, `send_counted`,
`read_receipt_counted`): the metric objects
stay here, with their names and labels. Under gunicorn and Celery several processes count: with
``PROMETHEUS_MULTIPROC_DIR`` set (the same empty directory for every process, before it starts)
prometheus-client writes each process's values to files there, and the ``/metrics`` view
(`config.metrics_view`) sums them. The gauges are not counted by any process: `DatabaseCollector`
computes them from the database at scrape time, so they are right whichever process answers.

Simulated conversations (`Session.is_simulated`) stay out of every figure: the simulator runs its
turn inside `uncounted()`, and the gauges read real sessions only.
"""

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime

from django.db.models import Min
from django.utils import timezone
from prometheus_client import Counter, Histogram, disable_created_metrics
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from agents.circuit import CircuitState
from conversations.model_prices import call_cost_usd
from conversations.models import Message, ProviderCircuit, Session

PREFIX = "lab_attendance_"
# No ``*_created`` series: the multiprocess mode has none, and one per label set doubles the
# series for a timestamp Prometheus does not need.
disable_created_metrics()  # type: ignore[no-untyped-call]

WEBHOOK_DELIVERIES = Counter(
    f"{PREFIX}webhook_deliveries",
    "Signature-checked webhook deliveries stored, by outcome.",
    ["outcome"],
)
TURNS = Counter(
    f"{PREFIX}turns",
    "Turns run, by outcome (committed, superseded, lease_lost, skipped).",
    ["outcome"],
)
HANDOFFS = Counter(f"{PREFIX}handoffs", "Sessions handed off to staff, by reason.", ["reason"])
MODEL_CALL_SECONDS = Histogram(
    f"{PREFIX}model_call_seconds",
    "Model calls' latency (retries included), by agent and model.",
    ["agent", "model"],
    buckets=(0.25, 0.5, 1, 2, 4, 8, 15, 30, 60),
)
MODEL_CALL_TOKENS = Counter(
    f"{PREFIX}model_call_tokens",
    "Tokens of the model calls, by agent, model and direction (input, output).",
    ["agent", "model", "direction"],
)
MODEL_CALL_CACHED_TOKENS = Counter(
    f"{PREFIX}model_call_cached_tokens",
    "Input tokens of the model calls read from the provider's prompt cache (a part of the "
    "input direction of model_call_tokens), by agent and model.",
    ["agent", "model"],
)
MODEL_CALL_COST = Counter(
    f"{PREFIX}model_call_cost_usd",
    "Cost of the model calls at the list prices (conversations.model_prices), in USD.",
    ["agent", "model"],
)
SENDS = Counter(
    f"{PREFIX}sends",
    "WhatsApp send attempts, by outcome (sent, retry, deferred, failed) and Graph error code.",
    ["outcome", "error_code"],
)

READ_RECEIPTS = Counter(
    f"{PREFIX}read_receipts",
    "Read receipts (with the typing indicator), by outcome (sent, failed, dropped).",
    ["outcome"],
)

OLDEST_PENDING_INBOUND = f"{PREFIX}oldest_pending_inbound_age_seconds"
LEASES_EXPIRED = f"{PREFIX}leases_expired"
CIRCUIT_STATE = f"{PREFIX}model_circuit_state"


# Set while the simulator runs a turn (`uncounted`). A context variable because the counters are
# incremented deep in the pipeline (turn, handoff, model calls, sends), which need not know whose
# turn it is; the simulator runs the whole turn in one call on one thread.
_UNCOUNTED: ContextVar[bool] = ContextVar("metrics_uncounted", default=False)


@contextmanager
def uncounted() -> Iterator[None]:
    """Nothing counted in this block (the simulator's turn)."""
    token = _UNCOUNTED.set(True)
    try:
        yield
    finally:
        _UNCOUNTED.reset(token)


def webhook_delivery_counted(outcome: str) -> None:
    if _UNCOUNTED.get():
        return
    WEBHOOK_DELIVERIES.labels(outcome=outcome).inc()


def turn_counted(outcome: str) -> None:
    if _UNCOUNTED.get():
        return
    TURNS.labels(outcome=outcome).inc()


def handoff_counted(reason: str) -> None:
    if _UNCOUNTED.get():
        return
    HANDOFFS.labels(reason=reason).inc()


def model_call_observed(
    *,
    agent: str,
    model: str,
    latency_ms: int,
    tokens_input: int,
    tokens_output: int,
    tokens_cached: int = 0,
) -> None:
    """One model call, successful or not (a failed call's latency counts, its tokens are 0);
    `tokens_cached` is the part of `tokens_input` read from the prompt cache."""
    if _UNCOUNTED.get():
        return
    MODEL_CALL_SECONDS.labels(agent=agent, model=model).observe(latency_ms / 1000)
    if tokens_input:
        MODEL_CALL_TOKENS.labels(agent=agent, model=model, direction="input").inc(tokens_input)
    if tokens_output:
        MODEL_CALL_TOKENS.labels(agent=agent, model=model, direction="output").inc(tokens_output)
    if tokens_cached:
        MODEL_CALL_CACHED_TOKENS.labels(agent=agent, model=model).inc(tokens_cached)
    cost = call_cost_usd(
        model, tokens_input=tokens_input, tokens_output=tokens_output, tokens_cached=tokens_cached
    )
    if cost:
        MODEL_CALL_COST.labels(agent=agent, model=model).inc(float(cost))


def send_counted(outcome: str, error_code: int | None = None) -> None:
    """One send attempt's outcome; `error_code` is the Graph API's, "" when there is none."""
    if _UNCOUNTED.get():
        return
    SENDS.labels(outcome=outcome, error_code="" if error_code is None else str(error_code)).inc()


def read_receipt_counted(outcome: str) -> None:
    """A read receipt sent, refused by the Graph API (failed), or dropped unsent (a backlog, or
    a worker stopping)."""
    if _UNCOUNTED.get():
        return
    READ_RECEIPTS.labels(outcome=outcome).inc()


class DatabaseCollector(Collector):
    """The gauges computed from the database at scrape time (three queries per scrape)."""

    def __init__(self, now: datetime | None = None) -> None:
        self._now = now  # fixed by the tests; the clock otherwise

    def collect(self) -> Iterator[Metric]:
        now = self._now or timezone.now()
        oldest = (
            Message.objects.pending_inbound()
            .filter(session__is_simulated=False)
            .aggregate(oldest=Min("created_at"))["oldest"]
        )
        age = GaugeMetricFamily(
            OLDEST_PENDING_INBOUND,
            "Age of the oldest INBOUND message no turn has answered yet (0: none pending).",
        )
        age.add_metric([], max((now - oldest).total_seconds(), 0.0) if oldest else 0.0)
        yield age
        expired = GaugeMetricFamily(
            LEASES_EXPIRED,
            "Sessions whose processing lease expired without being released (a dead worker).",
        )
        expired.add_metric(
            [],
            Session.objects.filter(lease_token__isnull=False, lease_expires_at__lte=now).count(),
        )
        yield expired
        circuit = GaugeMetricFamily(
            CIRCUIT_STATE,
            "The model provider's circuit breaker: 1 for its stored state, 0 for the others.",
            labels=["provider", "state"],
        )
        for provider, state in ProviderCircuit.objects.order_by("name").values_list(
            "name", "state"
        ):
            for candidate in CircuitState:
                circuit.add_metric([provider, candidate.value], 1.0 if state == candidate else 0.0)
        yield circuit
