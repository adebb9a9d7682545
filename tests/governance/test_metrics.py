"""Outcome metrics per prompt version, on the hand-built history of
tests/governance/metrics_data.py: exact counts, rates, medians and percentiles, on SQLite and
PostgreSQL, in a constant number of queries."""

import uuid
from datetime import date, datetime, timedelta
from decimal import Decimal

import pytest
from django.db import connection
from pytest_django import DjangoAssertNumQueries

from agents.states import AgentName
from conversations.models import Lead
from governance.outcomes import (
    ChartPoint,
    MetricsFilters,
    chart_buckets,
    default_filters,
    percentile_cont,
    prompt_metrics,
)
from prompts_admin.models import PromptOverride
from tests.governance import metrics_data
from tests.governance.metrics_data import PERIOD, ZONE, call, conversation

pytestmark = pytest.mark.django_db

FILTERS = MetricsFilters(agent=AgentName.TRIAGEM, date_from=PERIOD[0], date_to=PERIOD[1])


def test_each_version_gets_its_conversations_turns_calls_and_handoffs() -> None:
    data = metrics_data.build()

    metrics = prompt_metrics(filters=FILTERS)

    override, builtin = metrics.versions
    assert [v.version for v in metrics.versions] == [data.override_version, "builtin"]
    assert (builtin.sessions, builtin.turns, builtin.calls) == (4, 6, 6)
    assert builtin.handoffs_by_reason == {"model_requested": 1, "llm_invalid_json": 1}
    assert (builtin.handoffs, builtin.handoff_rate) == (2, 50.0)
    assert builtin.handoff_rate_for("llm_invalid_json") == 25.0
    assert (override.sessions, override.turns, override.calls) == (3, 4, 4)
    assert override.handoffs_by_reason == {"staff_takeover": 1}
    assert override.handoff_rate == 100 / 3


def test_contract_violations_and_repairs_are_counted_per_100_calls() -> None:
    metrics_data.build()

    override, builtin = prompt_metrics(filters=FILTERS).versions

    assert (builtin.contract_violations, builtin.repairs) == (1, 1)
    assert builtin.contract_violations_per_100_calls == 100 / 6
    assert builtin.repairs_per_100_calls == 100 / 6
    assert (override.contract_violations_per_100_calls, override.repairs_per_100_calls) == (0, 0)


def test_leads_tokens_and_cost_per_conversation() -> None:
    metrics_data.build()

    override, builtin = prompt_metrics(filters=FILTERS).versions

    assert (builtin.leads, builtin.leads_per_session) == (1, 0.25)
    # Six triage calls of 100 + 10 tokens and the repair's 50 + 5, over 4 conversations.
    assert (builtin.tokens_input, builtin.tokens_output) == (650, 65)
    assert builtin.tokens_per_session == 178.75
    # gpt-4o-mini: 650 × 0.15 + 65 × 0.60 USD per million tokens.
    assert builtin.cost_usd == Decimal("0.0001365")
    assert builtin.cost_per_session_usd == Decimal("0.000034125")
    assert (override.leads, override.tokens_per_session) == (1, 440 / 3)


def cached_turn(data: metrics_data.Dataset) -> None:
    """One more override conversation: an agent call of 2,000 input tokens (1,536 cached) and
    100 output, and its turn's repair of 1,200 (1,024 cached) and 20."""
    session = conversation(data.instance)
    turn = uuid.uuid4()
    at = metrics_data.OVERRIDE_DAY
    version = data.override_version
    call(session, turn=turn, at=at, version=version, tokens=(2000, 100), cached=1536)
    call(
        session,
        turn=turn,
        at=at + timedelta(minutes=1),
        version="builtin",
        purpose="repair",
        tokens=(1200, 20),
        cached=1024,
    )


def test_cached_input_tokens_are_summed_and_priced_at_the_cached_price() -> None:
    data = metrics_data.build()
    cached_turn(data)

    override, builtin = prompt_metrics(filters=FILTERS).versions

    # The four calls of 100 + 10 before, then 2,000 and 1,200 input tokens.
    assert (override.tokens_input, override.cached_tokens, override.tokens_output) == (
        3600,
        2560,
        160,
    )
    # gpt-4o-mini: (3600 − 2560) × 0.15 + 2560 × 0.075 + 160 × 0.60 per million.
    assert override.cost_usd == Decimal("0.000444")
    assert override.cost_per_session_usd == Decimal("0.000111")
    assert override.cache_hit_share == 2560 * 100 / 3600
    assert (builtin.cached_tokens, builtin.cache_hit_share) == (0, 0.0)
    assert builtin.cost_usd == Decimal("0.0001365")


def test_without_input_tokens_there_is_no_cache_share() -> None:
    data = metrics_data.build()
    session = conversation(data.instance)
    call(session, turn=uuid.uuid4(), at=metrics_data.OVERRIDE_DAY, version="", tokens=(0, 0))

    [unversioned] = [v for v in prompt_metrics(filters=FILTERS).versions if v.version == ""]

    assert (unversioned.tokens_input, unversioned.cache_hit_share) == (0, None)


def test_a_model_without_a_price_leaves_the_cost_unknown() -> None:
    data = metrics_data.build()
    session = conversation(data.instance)
    call(
        session,
        turn=uuid.uuid4(),
        at=metrics_data.OVERRIDE_DAY,
        version=data.override_version,
        model="unpriced-model",
    )

    override, builtin = prompt_metrics(filters=FILTERS).versions

    assert (override.cost_usd, override.cost_per_session_usd) == (None, None)
    assert builtin.cost_usd == Decimal("0.0001365")


def test_latency_percentiles_interpolate_as_percentile_cont() -> None:
    metrics_data.build()

    override, builtin = prompt_metrics(filters=FILTERS).versions

    assert (builtin.latency_p50_ms, builtin.latency_p95_ms) == (350.0, 575.0)
    assert (override.latency_p50_ms, override.latency_p95_ms) == (2500.0, 3850.0)


def test_turns_to_qualification_and_to_confirmation_are_medians() -> None:
    metrics_data.build()

    override, builtin = prompt_metrics(filters=FILTERS).versions

    assert (builtin.turns_to_qualification, builtin.turns_to_confirmation) == (2.0, 3.0)
    assert (override.turns_to_qualification, override.turns_to_confirmation) == (2.0, 4.0)


def test_the_median_of_an_even_count_is_the_mean_of_the_middle_two() -> None:
    data = metrics_data.build()
    # Another built-in conversation that reaches qualification in its fifth turn.
    session = conversation(data.instance)
    at = metrics_data.BUILTIN_DAY
    for n in range(4):
        call(session, turn=uuid.uuid4(), at=at + timedelta(minutes=n), version="builtin")
    call(
        session,
        turn=uuid.uuid4(),
        at=at + timedelta(minutes=5),
        version="builtin",
        agent="qualificacao",
    )

    builtin = prompt_metrics(filters=FILTERS).versions[1]

    assert builtin.turns_to_qualification == 3.5  # (2 + 5) / 2


def test_other_agents_have_no_turns_to_qualification() -> None:
    metrics_data.build()

    metrics = prompt_metrics(
        filters=MetricsFilters(agent=AgentName.QUALIFICACAO, date_from=PERIOD[0], date_to=PERIOD[1])
    )

    (builtin,) = metrics.versions
    assert (builtin.sessions, builtin.calls, builtin.leads) == (2, 3, 2)
    assert (builtin.turns_to_qualification, builtin.turns_to_confirmation) == (None, 3.5)


def test_simulated_conversations_count_only_when_asked() -> None:
    metrics_data.build()

    filters = MetricsFilters(
        agent=AgentName.TRIAGEM, date_from=PERIOD[0], date_to=PERIOD[1], include_simulated=True
    )
    override = prompt_metrics(filters=filters).versions[0]

    assert (override.sessions, override.calls, override.handoff_rate) == (4, 5, 50.0)
    assert override.latency_p50_ms == 3000.0


def test_the_period_is_in_the_sites_time_zone_with_both_days_included() -> None:
    data = metrics_data.build()

    only_the_5th = MetricsFilters(
        agent=AgentName.TRIAGEM, date_from=date(2026, 11, 5), date_to=date(2026, 11, 5)
    )
    metrics = prompt_metrics(filters=only_the_5th)
    assert [v.version for v in metrics.versions] == [data.override_version]
    # 11 November 00:00 in São Paulo is outside a period ending on the 10th.
    late = prompt_metrics(
        filters=MetricsFilters(
            agent=AgentName.TRIAGEM, date_from=date(2026, 11, 11), date_to=date(2026, 11, 11)
        )
    )
    assert [(v.version, v.calls) for v in late.versions] == [("builtin", 1)]


def test_an_override_version_knows_its_override_history_row() -> None:
    data = metrics_data.build()

    override = prompt_metrics(filters=FILTERS).versions[0].override

    assert override is not None
    assert (override.override_id, override.history_id, override.note) == (
        data.override.pk,
        data.history_id,
        "Pergunta a cidade antes",
    )


def test_the_chart_points_count_the_conversations_of_each_day() -> None:
    data = metrics_data.build()

    metrics = prompt_metrics(filters=FILTERS)

    assert metrics.buckets == [date(2026, 11, d) for d in range(1, 11)]
    assert metrics.points == {
        "builtin": {date(2026, 11, 2): ChartPoint(sessions=4, handoffs=2)},
        data.override_version: {date(2026, 11, 5): ChartPoint(sessions=3, handoffs=1)},
    }


def test_long_periods_are_charted_per_week() -> None:
    data = metrics_data.build()
    filters = MetricsFilters(
        agent=AgentName.TRIAGEM, date_from=date(2026, 10, 1), date_to=date(2026, 11, 30)
    )

    metrics = prompt_metrics(filters=filters)

    # Mondays: 28 Sep is the week of 1 Oct; 2 and 5 Nov are in the week of 2 Nov.
    assert (metrics.buckets[0], metrics.buckets[-1], len(metrics.buckets)) == (
        date(2026, 9, 28),
        date(2026, 11, 30),
        10,
    )
    assert metrics.points["builtin"] == {
        date(2026, 11, 2): ChartPoint(sessions=4, handoffs=2),
        date(2026, 11, 9): ChartPoint(sessions=1, handoffs=0),
    }
    assert metrics.points[data.override_version] == {
        date(2026, 11, 2): ChartPoint(sessions=3, handoffs=1)
    }


def test_no_call_in_the_period_gives_no_version() -> None:
    metrics = prompt_metrics(filters=FILTERS)

    assert (metrics.versions, metrics.buckets, metrics.points) == ([], [], {})


def test_default_filters_are_the_last_30_days_of_triage() -> None:
    assert default_filters(today=date(2026, 11, 30)) == MetricsFilters(
        agent=AgentName.TRIAGEM, date_from=date(2026, 11, 1), date_to=date(2026, 11, 30)
    )
    assert chart_buckets(FILTERS)[-1] == date(2026, 11, 10)


@pytest.mark.parametrize(
    ("values", "fraction", "expected"),
    [
        ([], 0.5, None),
        ([7], 0.95, 7),
        ([1, 2, 3, 4], 0.5, 2.5),
        ([10, 20, 30, 40, 50, 60], 0.95, 57.5),
    ],
)
def test_percentile_cont_interpolates_linearly(
    values: list[float], fraction: float, expected: float | None
) -> None:
    assert percentile_cont(values, fraction) == expected


def _versions(count: int) -> None:
    """`count` override versions of triage, each with a conversation, a lead and a repair."""
    instance = metrics_data.build().instance
    override = PromptOverride.objects.create(agent="triagem", content="v")
    for n in range(count - 1):
        override.content = f"v{n}"
        override.save()
    history_ids = PromptOverride.history.filter(id=override.pk).values_list("history_id", flat=True)
    for n, history_id in enumerate(history_ids):
        at = datetime(2026, 11, 6, 10, n, tzinfo=ZONE)
        session = conversation(instance, reason="qualified_lead")
        turn = uuid.uuid4()
        call(session, turn=turn, at=at, version=f"override:{history_id}")
        call(session, turn=turn, at=at, version="builtin", purpose="repair")
        Lead.objects.create(session=session, created_at=at + timedelta(minutes=1))


def metrics_queries() -> int:
    """7, and `SET LOCAL jit = off` on PostgreSQL (governance.outcomes.without_jit)."""
    return 8 if connection.vendor == "postgresql" else 7


@pytest.mark.parametrize("count", [1, 10])
def test_the_query_count_does_not_grow_with_the_versions(
    count: int, django_assert_num_queries: DjangoAssertNumQueries
) -> None:
    _versions(count)

    with django_assert_num_queries(metrics_queries()):
        metrics = prompt_metrics(filters=FILTERS)

    assert len(metrics.versions) == count + 2
