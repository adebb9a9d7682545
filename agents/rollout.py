"""Gradual release of a prompt version (docs/decisions/0057): which version a new conversation
pins when an agent has a candidate next to its active override. Pure module.

A conversation's bucket is a stable hash of its session id, 0 to 99; the candidate is pinned when
the bucket is below its percentage. The same bucket serves every agent, so raising a percentage
only adds conversations to the candidate's side, and one conversation is on the candidate side of
every agent released to at least its bucket.
"""

import hashlib
from collections.abc import Mapping

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
