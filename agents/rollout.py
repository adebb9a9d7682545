"""Gradual release of a prompt version (docs/decisions/0057): which version a new conversation
pins when an agent has a candidate next to its active override. Pure module.

A conversation's bucket is a stable hash of its session id, 0 to 99; the candidate is pinned when
the bucket is below its percentage. The same bucket serves every agent, so raising a percentage
only adds conversations to the candidate's side, and one conversation is on the candidate side of
every agent released to at least its bucket.
"""

import hashlib
import math
from collections.abc import Mapping
from dataclasses import dataclass

from agents.sources import OverrideTemplate, RolloutCandidate
from agents.states import AgentName

ROLLOUT_MIN_PERCENT = 1
ROLLOUT_MAX_PERCENT = 99
BUCKETS = 100


def rollout_bucket(session_id: int) -> int:
    """The session's bucket, 0 to 99. A hash rather than `session_id % 100`: ids are handed out
    in arrival order, so a remainder would put every hundredth conversation of a burst (a
    campaign, a retry wave) on the same side; sha256 spreads them with no pattern to their order."""
    digest = hashlib.sha256(str(session_id).encode("ascii")).hexdigest()
    return int(digest, 16) % BUCKETS


def rollout_overrides(
    *,
    active: Mapping[AgentName, OverrideTemplate | None],
    candidates: Mapping[AgentName, RolloutCandidate],
    session_id: int,
) -> dict[AgentName, OverrideTemplate | None]:
    """The overrides a new session pins: each agent's candidate when the session's bucket is
    below its percentage, else the active override (None: the built-in prompt)."""
    bucket = rollout_bucket(session_id)
    pinned = dict(active)
    for agent, candidate in candidates.items():
        if bucket < candidate.percent:
            pinned[agent] = candidate.override
    return pinned


# The one-sided 95% critical value of the standard normal (its 0.95 quantile).
Z_CRITICAL_95 = 1.6448536269514722


@dataclass(frozen=True, slots=True)
class Proportion:
    """Conversations of one side of a release with an outcome (a handoff, a contract error)."""

    events: int
    conversations: int

    @property
    def rate(self) -> float:
        return self.events / self.conversations if self.conversations else 0.0


def candidate_worse(
    *, candidate: Proportion, current: Proportion, margin_points: float, min_conversations: int
) -> bool | None:
    """Whether the candidate's rate exceeds the current version's by more than the margin: a
    one-sided two-proportion z-test at 95% of H0 `p_c - p_0 <= m` against H1 `p_c - p_0 > m`,
    with m = `margin_points` / 100 and the unpooled standard error (the margin says the
    proportions differ under H0, so they are not pooled):

        z = (p_c - p_0 - m) / sqrt(p_c (1 - p_c) / n_c + p_0 (1 - p_0) / n_0)

    worse when z > 1.6448536269514722. None (no decision) when either side has fewer than
    `min_conversations`; with zero variance (every rate 0 or 1) the observed difference decides:
    worse when p_c - p_0 > m."""
    if min(candidate.conversations, current.conversations) < max(min_conversations, 1):
        return None
    p_c, p_0 = candidate.rate, current.rate
    margin = margin_points / 100
    variance = p_c * (1 - p_c) / candidate.conversations + p_0 * (1 - p_0) / current.conversations
    if variance == 0:
        return p_c - p_0 > margin
    return (p_c - p_0 - margin) / math.sqrt(variance) > Z_CRITICAL_95
