"""Outcome metrics per prompt version (docs/architecture.md, Outcome metrics per prompt version):
what each version of an agent's prompt did to the conversations it spoke in. Pure numbers; the admin
page (`governance.outcomes_admin`) labels, formats and charts them.

Attribution: a conversation counts for (agent, version) when it has an agent call of that agent
recorded with that `LLMCall.prompt_version` in the period; one that met two versions (an override
activated mid-conversation) counts for both, with its handoff and its lead. A handoff is any
`Session.handoff_reason` but `qualified_lead` (a confirmed lead goes to people by design); latency
percentiles include failed calls (a timeout is the time the customer waited). The other
definitions are in docs/architecture.md, "Outcome metrics per prompt version".

Query count: `prompt_metrics` runs 7 queries (6 when no override version is in the period,
where the override labels need none; one more on PostgreSQL, `without_jit`), whatever the
number of versions, conversations and calls (tests/governance/test_metrics.py asserts it).
Latency percentiles are computed by PostgreSQL; on SQLite (the suite without PostgreSQL) the
same query returns the values and Python interpolates them the same way. The medians of turns to
a milestone are Python's on every database, over one row per (version, conversation).
"""

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any, Literal

from django.db import connection, transaction
from django.db.models import Aggregate, Count, FloatField, Min, OuterRef, Q, QuerySet, Subquery, Sum
from django.db.models.functions import TruncDate, TruncWeek

from agents.sources import BUILTIN_PROMPT_VERSION
from agents.states import AgentName, HandoffReason
from conversations.model_prices import call_cost_usd
from conversations.models import Lead, LLMCall, LLMCallPurpose
from conversations.periods import period_bounds
from prompts_admin.models import PromptOverride
from versioning.history import historical_model

OVERRIDE_PREFIX = "override:"
# Handoff reasons that mean the model broke the output contract (docs/architecture.md lists them).
CONTRACT_VIOLATIONS: tuple[HandoffReason, ...] = (
    HandoffReason.LLM_INVALID_JSON,
    HandoffReason.LLM_INVALID_CONTRACT,
    HandoffReason.UNKNOWN_PACKAGE,
)
# Every handoff but a confirmed lead's, in the enum's order (the page's columns).
HANDOFF_REASONS: tuple[HandoffReason, ...] = tuple(
    reason for reason in HandoffReason if reason is not HandoffReason.QUALIFIED_LEAD
)
# Longer periods are charted per week.
DAILY_CHART_MAX_DAYS = 45
DEFAULT_PERIOD_DAYS = 30
LATENCY_FRACTIONS = (0.5, 0.95)

Bucket = Literal["day", "week"]


@dataclass(frozen=True, slots=True)
class MetricsFilters:
    agent: AgentName
    date_from: date
    date_to: date  # inclusive
    include_simulated: bool = False

    @property
    def bucket(self) -> Bucket:
        days = (self.date_to - self.date_from).days + 1
        return "day" if days <= DAILY_CHART_MAX_DAYS else "week"


def default_filters(*, today: date, agent: AgentName = AgentName.TRIAGEM) -> MetricsFilters:
    """The last `DEFAULT_PERIOD_DAYS` days, today included, real conversations only."""
    return MetricsFilters(
        agent=agent, date_from=today - timedelta(days=DEFAULT_PERIOD_DAYS - 1), date_to=today
    )


@dataclass(frozen=True, slots=True)
class OverrideVersion:
    """What names an override version: the override, the history row, when and why."""

    override_id: int
    history_id: int
    date: datetime
    note: str


@dataclass(slots=True)
class VersionMetrics:
    version: str
    first_call_at: datetime
    sessions: int = 0
    turns: int = 0
    calls: int = 0
    handoffs_by_reason: dict[str, int] = field(default_factory=dict)
    leads: int = 0
    repairs: int = 0
    tokens_input: int = 0
    # The part of tokens_input read from the provider's prompt cache.
    cached_tokens: int = 0
    tokens_output: int = 0
    cost_usd: Decimal | None = Decimal("0")
    latency_p50_ms: float | None = None
    latency_p95_ms: float | None = None
    turns_to_qualification: float | None = None
    turns_to_confirmation: float | None = None
    override: OverrideVersion | None = None

    @property
    def handoffs(self) -> int:
        return sum(self.handoffs_by_reason.values())

    @property
    def handoff_rate(self) -> float:
        """Handed-off conversations, % of the version's conversations."""
        return percent(self.handoffs, self.sessions)

    def handoff_rate_for(self, reason: str) -> float:
        return percent(self.handoffs_by_reason.get(reason, 0), self.sessions)

    @property
    def contract_violations(self) -> int:
        return sum(self.handoffs_by_reason.get(reason.value, 0) for reason in CONTRACT_VIOLATIONS)

    @property
    def contract_violations_per_100_calls(self) -> float:
        return percent(self.contract_violations, self.calls)

    @property
    def repairs_per_100_calls(self) -> float:
        return percent(self.repairs, self.calls)

    @property
    def leads_per_session(self) -> float:
        return self.leads / self.sessions if self.sessions else 0.0

    @property
    def tokens_per_session(self) -> float:
        total = self.tokens_input + self.tokens_output
        return total / self.sessions if self.sessions else 0.0

    @property
    def cache_hit_share(self) -> float | None:
        """Cached input tokens, % of the input tokens; None without input tokens."""
        if not self.tokens_input:
            return None
        return percent(self.cached_tokens, self.tokens_input)

    @property
    def cost_per_session_usd(self) -> Decimal | None:
        if self.cost_usd is None or not self.sessions:
            return None
        return self.cost_usd / self.sessions


@dataclass(frozen=True, slots=True)
class ChartPoint:
    sessions: int
    handoffs: int

    @property
    def handoff_rate(self) -> float:
        return percent(self.handoffs, self.sessions)


@dataclass(frozen=True, slots=True)
class PromptMetrics:
    filters: MetricsFilters
    # Newest first: by the version's first agent call in the period.
    versions: list[VersionMetrics]
    # The chart's x axis: every day (or Monday of every week) of the period.
    buckets: list[date]
    # version -> bucket -> conversations that spoke to the version in that bucket.
    points: dict[str, dict[date, ChartPoint]]


def percent(part: int, whole: int) -> float:
    return 100.0 * part / whole if whole else 0.0


def percentile_cont(values: Sequence[float], fraction: float) -> float | None:
    """PostgreSQL's `percentile_cont`: linear interpolation between the closest ranks."""
    if not values:
        return None
    ordered = sorted(values)
    position = fraction * (len(ordered) - 1)
    lower = math.floor(position)
    upper = math.ceil(position)
    return ordered[lower] + (ordered[upper] - ordered[lower]) * (position - lower)


class PercentileCont(Aggregate):
    """PostgreSQL's ordered-set aggregate `percentile_cont(fraction) WITHIN GROUP (...)`."""

    function = "percentile_cont"
    template = "%(function)s(%(fraction)s) WITHIN GROUP (ORDER BY %(expressions)s)"
    output_field = FloatField()

    def __init__(self, expression: Any, *, fraction: float) -> None:
        super().__init__(expression)
        # A literal, not a parameter: fixed by the code, and PostgreSQL wants a constant here.
        self.extra["fraction"] = repr(float(fraction))


def uses_percentile_cont() -> bool:
    return connection.vendor == "postgresql"


def _calls(filters: MetricsFilters, purpose: LLMCallPurpose) -> QuerySet[LLMCall]:
    start, end = period_bounds(filters.date_from, filters.date_to)
    calls = LLMCall.objects.filter(
        agent=filters.agent.value, purpose=purpose, created_at__gte=start, created_at__lt=end
    )
    if not filters.include_simulated:
        calls = calls.filter(session__is_simulated=False)
    return calls.order_by()


def prompt_metrics(*, filters: MetricsFilters) -> PromptMetrics:
    """The metrics of every version of `filters.agent` that ran in the period."""
    # No savepoint inside a caller's transaction: `SET LOCAL` then lasts until it ends.
    with transaction.atomic(savepoint=False):
        without_jit()
        agent_calls = _calls(filters, LLMCallPurpose.AGENT)
        versions: dict[str, VersionMetrics] = {}
        _add_outcomes(versions, agent_calls)
        if not versions:
            return PromptMetrics(filters=filters, versions=[], buckets=[], points={})
        priced = _add_tokens(versions, agent_calls)
        _add_repairs(versions, filters, priced)
        _set_costs(versions, priced)
        _add_latencies(versions, agent_calls)
        _add_turns_to_milestones(versions, filters)
        _add_override_versions(versions)
        points = _chart_points(agent_calls, filters.bucket)
    ordered = sorted(versions.values(), key=lambda v: (v.first_call_at, v.version), reverse=True)
    return PromptMetrics(
        filters=filters, versions=ordered, buckets=chart_buckets(filters), points=points
    )


def without_jit() -> None:
    """PostgreSQL: no JIT compilation for the rest of the transaction. These queries' estimated
    costs pass `jit_above_cost` while they run in tenths of a second: compiling them took
    longer than running them (4.3 s instead of 1.2 s at 200,000 calls, bench/prompt_metrics.py).
    One more query on PostgreSQL."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL jit = off")


def _add_outcomes(versions: dict[str, VersionMetrics], calls: QuerySet[LLMCall]) -> None:
    """Query 1: per version and handoff reason, the conversations, turns, calls and leads.

    Grouped by the reason as well, a conversation falls in exactly one group of its version,
    and a turn in one conversation: the groups add up to the version's totals."""
    rows = calls.values("prompt_version", "session__handoff_reason").annotate(
        n_sessions=Count("session_id", distinct=True),
        n_turns=Count("turn_id", distinct=True),
        n_calls=Count("id"),
        n_leads=Count("session__lead", distinct=True),
        first_call_at=Min("created_at"),
    )
    for row in rows:
        version = row["prompt_version"]
        metrics = versions.get(version)
        if metrics is None:
            metrics = versions[version] = VersionMetrics(
                version=version, first_call_at=row["first_call_at"]
            )
        metrics.first_call_at = min(metrics.first_call_at, row["first_call_at"])
        metrics.sessions += row["n_sessions"]
        metrics.turns += row["n_turns"]
        metrics.calls += row["n_calls"]
        metrics.leads += row["n_leads"]
        reason = row["session__handoff_reason"]
        if reason and reason != HandoffReason.QUALIFIED_LEAD:
            metrics.handoffs_by_reason[reason] = row["n_sessions"]


# version -> model -> [tokens_input, cached_tokens, tokens_output]
Priced = dict[str, dict[str, list[int]]]
_TOKEN_SUMS = {
    "tokens_in": Sum("tokens_input"),
    "tokens_cached": Sum("cached_tokens"),
    "tokens_out": Sum("tokens_output"),
}


def _add_tokens(versions: dict[str, VersionMetrics], calls: QuerySet[LLMCall]) -> Priced:
    """Query 2: the agent calls' tokens per version and model (priced per model)."""
    priced: Priced = defaultdict(lambda: defaultdict(lambda: [0, 0, 0]))
    rows = calls.values_list("prompt_version", "model").annotate(**_TOKEN_SUMS)
    for version, model, *tokens in rows:
        _count_tokens(versions[version], priced, model, tokens)
    return priced


def _add_repairs(
    versions: dict[str, VersionMetrics], filters: MetricsFilters, priced: Priced
) -> None:
    """Query 3: the repair calls of the agent, each attributed to the version of the agent call
    of its turn (repair calls record the built-in repair prompt, not the agent's version)."""
    version_of_turn = (
        LLMCall.objects.filter(
            turn_id=OuterRef("turn_id"), agent=filters.agent.value, purpose=LLMCallPurpose.AGENT
        )
        .order_by("created_at")
        .values("prompt_version")[:1]
    )
    rows = (
        _calls(filters, LLMCallPurpose.REPAIR)
        .annotate(agent_version=Subquery(version_of_turn))
        .filter(agent_version__isnull=False)
        .values_list("agent_version", "model")
        .annotate(n=Count("id"), **_TOKEN_SUMS)
    )
    for version, model, repairs, *tokens in rows:
        metrics = versions.get(version)
        if metrics is None:  # the agent call's version is outside the period's agent calls
            continue
        metrics.repairs += repairs
        _count_tokens(metrics, priced, model, tokens)


def _count_tokens(
    metrics: VersionMetrics, priced: Priced, model: str, tokens: Sequence[int]
) -> None:
    """`tokens`: the sums of input, cached input and output tokens."""
    tokens_in, tokens_cached, tokens_out = tokens
    metrics.tokens_input += tokens_in
    metrics.cached_tokens += tokens_cached
    metrics.tokens_output += tokens_out
    totals = priced[metrics.version][model]
    totals[0] += tokens_in
    totals[1] += tokens_cached
    totals[2] += tokens_out


def _set_costs(versions: dict[str, VersionMetrics], priced: Priced) -> None:
    for version, models in priced.items():
        cost: Decimal | None = Decimal("0")
        for model, (tokens_in, tokens_cached, tokens_out) in models.items():
            price = call_cost_usd(
                model,
                tokens_input=tokens_in,
                tokens_output=tokens_out,
                tokens_cached=tokens_cached,
            )
            cost = None if cost is None or price is None else cost + price
        versions[version].cost_usd = cost


def _add_latencies(versions: dict[str, VersionMetrics], calls: QuerySet[LLMCall]) -> None:
    """Query 4: latency p50 and p95 of the agent calls per version."""
    if uses_percentile_cont():
        rows = calls.values_list("prompt_version").annotate(
            p50=PercentileCont("latency_ms", fraction=LATENCY_FRACTIONS[0]),
            p95=PercentileCont("latency_ms", fraction=LATENCY_FRACTIONS[1]),
        )
        for version, p50, p95 in rows:
            versions[version].latency_p50_ms = _ms(p50)
            versions[version].latency_p95_ms = _ms(p95)
        return
    values = _grouped(calls.values_list("prompt_version", "latency_ms"))
    for version, latencies in values.items():
        versions[version].latency_p50_ms = _ms(percentile_cont(latencies, LATENCY_FRACTIONS[0]))
        versions[version].latency_p95_ms = _ms(percentile_cont(latencies, LATENCY_FRACTIONS[1]))


def _ms(value: float | None) -> float | None:
    # To a tenth of a millisecond: the two ways of interpolating may differ in the last bits.
    return None if value is None else round(value, 1)


def _grouped(rows: Iterable[tuple[str, float]]) -> dict[str, list[float]]:
    grouped: dict[str, list[float]] = defaultdict(list)
    for key, value in rows:
        grouped[key].append(value)
    return grouped


def _turns_until(reached_at: Any) -> Subquery:
    """The conversation's distinct turns of agent calls (any agent) up to `reached_at`: a
    subquery per conversation on the index (session, created_at) — a join of the calls with the
    reached conversations made PostgreSQL read the whole call table (2.4 s instead of about
    0.2 s at 200,000 calls, bench/prompt_metrics.py)."""
    return Subquery(
        LLMCall.objects.filter(
            session_id=OuterRef("session_id"),
            purpose=LLMCallPurpose.AGENT,
            created_at__lte=reached_at,
        )
        .order_by()
        .values("session_id")
        .annotate(turns=Count("turn_id", distinct=True))
        .values("turns")
    )


def turns_to_milestones(filters: MetricsFilters) -> dict[tuple[str, str], float]:
    """(milestone, version) -> median turns of the version's conversations to the milestone:
    its Lead's creation ("confirmation") and, for triage versions, its first `qualificacao`
    agent call ("qualification"). One query, a row per (version, conversation) of the period
    (the attribution) with its turns to each milestone; the medians in Python, on every
    database."""
    reached: dict[str, QuerySet[Any, Any]] = {
        "confirmation": Lead.objects.filter(session_id=OuterRef("session_id")).values("created_at")
    }
    if filters.agent is AgentName.TRIAGEM:
        reached["qualification"] = (
            LLMCall.objects.filter(
                session_id=OuterRef("session_id"),
                agent=AgentName.QUALIFICACAO.value,
                purpose=LLMCallPurpose.AGENT,
            )
            .order_by()
            .values("session_id")
            .annotate(first=Min("created_at"))
            .values("first")
        )
    rows = (
        _calls(filters, LLMCallPurpose.AGENT)
        .values("prompt_version", "session_id")
        # Grouped, not DISTINCT: PostgreSQL then runs the subqueries once per conversation,
        # not once per call before removing duplicates (2.5x the time on bench/prompt_metrics.py).
        .annotate(calls=Count("id"))
        .annotate(**{f"{name}_at": Subquery(query) for name, query in reached.items()})
        .annotate(**{name: _turns_until(OuterRef(f"{name}_at")) for name in reached})
        .values_list("prompt_version", *reached)
    )
    counts: dict[tuple[str, str], list[float]] = defaultdict(list)
    for version, *turns in rows:
        for milestone, value in zip(reached, turns, strict=True):
            if value is not None:  # not reached (the count of no calls is no row: NULL)
                counts[(milestone, version)].append(value)
    medians = {key: percentile_cont(values, 0.5) for key, values in counts.items()}
    return {key: value for key, value in medians.items() if value is not None}


def _add_turns_to_milestones(versions: dict[str, VersionMetrics], filters: MetricsFilters) -> None:
    """Query 5."""
    for (milestone, version), value in turns_to_milestones(filters).items():
        metrics = versions.get(version)
        if metrics is None:
            continue
        if milestone == "qualification":
            metrics.turns_to_qualification = value
        else:
            metrics.turns_to_confirmation = value


def override_history_id(version: str) -> int | None:
    """The history id of an `override:<history id>` version; None for any other version."""
    if not version.startswith(OVERRIDE_PREFIX):
        return None
    tail = version.removeprefix(OVERRIDE_PREFIX)
    return int(tail) if tail.isascii() and tail.isdigit() else None


def _add_override_versions(versions: Mapping[str, VersionMetrics]) -> None:
    """Query 6 (none when only the built-in prompt ran): the override behind each version."""
    history_ids = {
        history_id: version
        for version in versions
        if version != BUILTIN_PROMPT_VERSION
        and (history_id := override_history_id(version)) is not None
    }
    if not history_ids:
        return
    rows = (
        historical_model(PromptOverride)
        .objects.filter(history_id__in=list(history_ids))
        .order_by()
        .values_list("history_id", "id", "history_date", "note")
    )
    for history_id, override_id, history_date, note in rows:
        versions[history_ids[history_id]].override = OverrideVersion(
            override_id=override_id, history_id=history_id, date=history_date, note=note
        )


def chart_buckets(filters: MetricsFilters) -> list[date]:
    """Every day of the period, or the Monday of every week it touches."""
    if filters.bucket == "day":
        first, step = filters.date_from, timedelta(days=1)
    else:
        first, step = filters.date_from - timedelta(days=filters.date_from.weekday()), timedelta(7)
    buckets = []
    current = first
    while current <= filters.date_to:
        buckets.append(current)
        current += step
    return buckets


def _chart_points(calls: QuerySet[LLMCall], bucket: Bucket) -> dict[str, dict[date, ChartPoint]]:
    """Query 7: per version and day (or week, in the site's time zone), the conversations that
    spoke to the version then, and how many of them were handed off."""
    handed_off = Q(session__handoff_reason__in=[reason.value for reason in HANDOFF_REASONS])
    truncated = TruncDate("created_at") if bucket == "day" else TruncWeek("created_at")
    rows = (
        calls.annotate(bucket=truncated)
        .values_list("prompt_version", "bucket")
        .annotate(
            n_sessions=Count("session_id", distinct=True),
            n_handoffs=Count("session_id", distinct=True, filter=handed_off),
        )
    )
    points: dict[str, dict[date, ChartPoint]] = defaultdict(dict)
    for version, day, sessions, handoffs in rows:
        key = day.date() if isinstance(day, datetime) else day
        points[version][key] = ChartPoint(sessions=sessions, handoffs=handoffs)
    return dict(points)
