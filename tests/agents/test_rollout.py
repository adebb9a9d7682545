"""The gradual release's bucket and pin (agents.rollout): pure, no database."""

import pytest

from agents.rollout import rollout_bucket, rollout_overrides
from agents.sources import OverrideTemplate, RolloutCandidate
from agents.states import AgentName

CURRENT = OverrideTemplate(content="Atual.", version="override:10")
CANDIDATE = OverrideTemplate(content="Candidata.", version="override:11")


@pytest.mark.parametrize(
    ("session_id", "bucket"),
    [(1, 15), (2, 61), (3, 78), (6, 3), (7, 49), (5, 53)],
)
def test_a_known_session_id_has_a_known_bucket(session_id: int, bucket: int) -> None:
    assert rollout_bucket(session_id) == bucket


def test_the_buckets_run_from_0_to_99_and_spread_evenly() -> None:
    buckets = [rollout_bucket(i) for i in range(1, 10_001)]

    assert (min(buckets), max(buckets)) == (0, 99)
    assert sum(b < 50 for b in buckets) == 4955


def pinned(session_id: int, percent: int) -> OverrideTemplate | None:
    return rollout_overrides(
        active={AgentName.TRIAGEM: CURRENT, AgentName.COLETA: None},
        candidates={AgentName.TRIAGEM: RolloutCandidate(override=CANDIDATE, percent=percent)},
        session_id=session_id,
    )[AgentName.TRIAGEM]


@pytest.mark.parametrize(
    ("session_id", "percent", "expected"),
    [
        # Bucket 3: below 4, not below 3 nor 1.
        (6, 1, CURRENT),
        (6, 3, CURRENT),
        (6, 4, CANDIDATE),
        # Bucket 49: the candidate at 50, not at 49.
        (7, 49, CURRENT),
        (7, 50, CANDIDATE),
        (7, 51, CANDIDATE),
        # Bucket 53: above 50.
        (5, 50, CURRENT),
    ],
)
def test_the_candidate_is_pinned_below_its_percent(
    session_id: int, percent: int, expected: OverrideTemplate
) -> None:
    assert pinned(session_id, percent) == expected


def test_at_1_percent_only_bucket_0_gets_the_candidate() -> None:
    assert (rollout_bucket(188), rollout_bucket(113)) == (0, 35)
    assert pinned(188, 1) == CANDIDATE
    assert pinned(113, 1) == CURRENT


def test_at_99_percent_only_bucket_99_keeps_the_current() -> None:
    assert (rollout_bucket(40), rollout_bucket(3)) == (99, 78)
    assert pinned(40, 99) == CURRENT
    assert pinned(3, 99) == CANDIDATE
    assert pinned(3, 78) == CURRENT


def test_agents_without_a_candidate_keep_theirs() -> None:
    pins = rollout_overrides(
        active={AgentName.TRIAGEM: CURRENT, AgentName.COLETA: None},
        candidates={AgentName.COLETA: RolloutCandidate(override=CANDIDATE, percent=99)},
        session_id=1,
    )

    assert pins == {AgentName.TRIAGEM: CURRENT, AgentName.COLETA: CANDIDATE}
