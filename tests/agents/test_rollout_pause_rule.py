"""The rule that pauses a gradual release (agents.rollout.candidate_worse): a one-sided
two-proportion z-test of the candidate's excess over the current version's rate past a margin.
Expected values computed by hand from z = (p_c - p_0 - m) / sqrt(p_c(1-p_c)/n_c + p_0(1-p_0)/n_0)."""

import pytest

from agents.rollout import Proportion, candidate_worse


def worse(candidate: tuple[int, int], current: tuple[int, int], margin: float = 5) -> bool | None:
    return candidate_worse(
        candidate=Proportion(*candidate),
        current=Proportion(*current),
        margin_points=margin,
        min_conversations=30,
    )


@pytest.mark.parametrize(
    ("candidate", "current", "expected"),
    [
        # 18% vs 6% of 100 each: z = 0.07 / sqrt(0.1476/100 + 0.0564/100) = 1.5498 < 1.6449.
        ((18, 100), (6, 100), False),
        # 19% vs 6%: z = 0.08 / sqrt(0.1539/100 + 0.0564/100) = 1.7445 > 1.6449.
        ((19, 100), (6, 100), True),
        # Exactly the margin (11% vs 6%): z = 0, not past it.
        ((11, 100), (6, 100), False),
        # Better than the current: never worse.
        ((2, 100), (30, 100), False),
    ],
)
def test_the_z_test_at_the_critical_value(
    candidate: tuple[int, int], current: tuple[int, int], expected: bool
) -> None:
    assert worse(candidate, current) is expected


def test_the_margin_is_in_percentage_points() -> None:
    # 19% vs 6% passes a 5-point margin (z = 1.7445) but not a 6-point one:
    # z = 0.07 / sqrt(0.002103) = 1.5265.
    assert worse((19, 100), (6, 100), margin=5) is True
    assert worse((19, 100), (6, 100), margin=6) is False


@pytest.mark.parametrize(
    ("candidate", "current", "expected"),
    [
        ((12, 29), (1, 30), None),  # 29 on the candidate's side: no decision
        ((12, 30), (1, 29), None),  # 29 on the current's side: no decision
        ((12, 30), (1, 30), True),  # 30 each: z = 0.3167 / sqrt(0.0080 + 0.0011) = 3.3243
        ((0, 0), (0, 0), None),
    ],
)
def test_fewer_than_the_minimum_on_a_side_is_no_decision(
    candidate: tuple[int, int], current: tuple[int, int], expected: bool | None
) -> None:
    assert worse(candidate, current) is expected


@pytest.mark.parametrize(
    ("candidate", "current", "expected"),
    [
        ((30, 30), (0, 30), True),  # every candidate conversation, none of the current's
        ((0, 30), (0, 30), False),  # none on either side
        ((30, 30), (30, 30), False),  # all on both sides: no difference
        ((0, 30), (30, 30), False),
    ],
)
def test_zero_variance_is_decided_by_the_observed_difference(
    candidate: tuple[int, int], current: tuple[int, int], expected: bool
) -> None:
    assert worse(candidate, current) is expected


def test_unequal_sides_past_and_short_of_the_margin() -> None:
    # 40 of 110 vs 18 of 90 (36.4% vs 20.0%): z = 0.1136 / sqrt(0.002103 + 0.001778) = 1.8240.
    assert worse((40, 110), (18, 90)) is True
    assert worse((40, 110), (18, 90), margin=10) is False
