"""bench/latency.py's figures from a round's measurements: the round's turns/s, and the
sustained turns/s that leaves the one model latency no worker can hide out of the round; the
steady mode's schedule of POSTs and its quantiles."""

import math

import pytest

from bench.latency import Round, quantile, steady_schedule


def _round(*, latency: float, seconds: float, answered: int = 100) -> Round:
    return Round(
        label="no flags", latency=latency, customers=100, seconds=seconds, answered=answered,
        duplicates=0, rss_peak_mb=160, cpu_ms_per_turn=9, worker_connections=8,
        web_connections=2,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("latency", "seconds", "round_rate", "sustained"),
    [
        (0.0, 1.25, 80.0, 80.0),  # no latency: the same figure
        (1.0, 1.8, 55.6, 125.0),  # 100 turns in the 0.8 s after one model latency
        (2.0, 2.5, 40.0, 200.0),
        (1.0, 1.0, 100.0, 0.0),  # no time left past the latency: nothing to divide by
    ],
)
def test_the_sustained_rate_leaves_one_model_latency_out_of_the_round(
    latency: float, seconds: float, round_rate: float, sustained: float
) -> None:
    measured = _round(latency=latency, seconds=seconds)

    assert round(measured.turns_per_second, 1) == round_rate
    assert round(measured.sustained_turns_per_second, 1) == sustained


@pytest.mark.parametrize(
    ("rate", "duration", "offsets"),
    [
        (5.0, 1.0, [0.0, 0.2, 0.4, 0.6, 0.8]),  # one every 1/rate s, the first at once
        (4.0, 0.5, [0.0, 0.25]),
        (2.0, 1.25, [0.0, 0.5, 1.0]),  # a part of a period still posts its one due at 1.0
        (10.0, 0.0, []),  # no time: nothing posted
        (0.0, 20.0, []),  # no rate: nothing posted
    ],
)
def test_the_steady_schedule_posts_one_message_every_period(
    rate: float, duration: float, offsets: list[float]
) -> None:
    assert [round(at, 6) for at in steady_schedule(rate=rate, duration=duration)] == offsets


def test_the_steady_schedule_of_20_per_second_for_20_seconds_posts_400() -> None:
    schedule = steady_schedule(rate=20, duration=20)

    assert (len(schedule), round(schedule[-1], 6)) == (400, 19.95)


@pytest.mark.parametrize(
    ("q", "value"),
    [
        (0.5, 50.0),  # at least half of the 100 values at or below it
        (0.99, 99.0),
        (0.995, 100.0),  # above the 99th value: the next one
        (1.0, 100.0),
        (0.0, 1.0),
    ],
)
def test_the_quantile_is_the_nearest_rank(q: float, value: float) -> None:
    values = [float(n) for n in range(100, 0, -1)]  # 100 ... 1, unsorted on purpose

    assert quantile(values, q) == value


def test_the_quantile_of_nothing_is_not_a_number() -> None:
    assert math.isnan(quantile([], 0.5))
