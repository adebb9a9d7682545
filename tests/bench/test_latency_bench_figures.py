"""bench/latency.py's figures from a round's measurements: the round's turns/s, and the
sustained turns/s that leaves the one model latency no worker can hide out of the round."""

import pytest

from bench.latency import Round


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
