"""The automatic pause of a gradual release (agents.rollout.candidate_worse): a candidate whose
conversations were handed off, or broke the output contract, more than the current version's
by more than `ROLLOUT_PAUSE_MARGIN` points is paused; no new conversation pins it then.

The sides are the real conversations started since the release started (its latest run of
history rows with a share and no pause): those that pinned a version of the candidate, and the
others that pinned a version of the agent. Rates per conversation, as the metrics page's
handoff rate (`governance.outcomes`). Three queries whatever the number of conversations (the
candidates, their history, one aggregate over the sessions), then one save per pause.
"""

import logging
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Q
from django.utils import timezone, translation
from django.utils.translation import gettext

from agents.rollout import Proportion, candidate_worse
from conversations.models import Session
from governance.outcomes import CONTRACT_VIOLATIONS, HANDOFF_REASONS
from prompts_admin.models import PromptOverride

logger = logging.getLogger(__name__)

HANDED_OFF = Q(handoff_reason__in=[reason.value for reason in HANDOFF_REASONS])
CONTRACT_ERROR = Q(handoff_reason__in=[reason.value for reason in CONTRACT_VIOLATIONS])


@dataclass(frozen=True, slots=True)
class Release:
    override_id: int
    agent: str
    started_at: datetime
    versions: tuple[str, ...]


def _releases() -> list[Release]:
    running = dict(
        PromptOverride.objects.filter(
            rollout_percent__isnull=False, rollout_paused_at__isnull=True
        ).values_list("pk", "agent")
    )
    if not running:
        return []
    rows = (
        PromptOverride.history.model.objects.filter(id__in=list(running))
        .order_by("id", "history_id")
        .values_list("id", "history_id", "history_date", "rollout_percent", "rollout_paused_at")
    )
    runs: dict[int, list[tuple[int, datetime]]] = {}
    for override_id, history_id, history_date, percent, paused_at in rows:
        if percent is None or paused_at is not None:
            runs[override_id] = []
        else:
            runs.setdefault(override_id, []).append((history_id, history_date))
    return [
        Release(
            override_id=pk,
            agent=running[pk],
            started_at=run[0][1],
            versions=tuple(f"override:{history_id}" for history_id, _date in run),
        )
        for pk, run in runs.items()
        if run
    ]


def rollout_pauses_check() -> list[int]:
    """Pauses every running candidate worse than its agent's current version; the ids paused."""
    releases = _releases()
    if not releases:
        return []
    counts: dict[str, Count] = {}
    for release in releases:
        pinned = Q(created_at__gte=release.started_at, prompt_versions__has_key=release.agent)
        candidate = Q(**{f"prompt_versions__{release.agent}__in": release.versions})
        sides = {"c": pinned & candidate, "o": pinned & ~candidate}
        for side, where in sides.items():
            key = f"{release.override_id}_{side}"
            counts[f"{key}_n"] = Count("pk", filter=where)
            counts[f"{key}_h"] = Count("pk", filter=where & HANDED_OFF)
            counts[f"{key}_e"] = Count("pk", filter=where & CONTRACT_ERROR)
    totals = Session.objects.filter(is_simulated=False).aggregate(**counts)
    paused = []
    for release in releases:
        pk = release.override_id
        for metric, label in (("h", "handoffs"), ("e", "contract errors")):
            cand = Proportion(totals[f"{pk}_c_{metric}"], totals[f"{pk}_c_n"])
            cur = Proportion(totals[f"{pk}_o_{metric}"], totals[f"{pk}_o_n"])
            if candidate_worse(
                candidate=cand,
                current=cur,
                margin_points=settings.ROLLOUT_PAUSE_MARGIN,
                min_conversations=settings.ROLLOUT_PAUSE_MIN_CONVERSATIONS,
            ):
                if _pause(release.override_id, label, cand, cur):
                    paused.append(release.override_id)
                break
    return paused


def _pause(override_id: int, label: str, cand: Proportion, cur: Proportion) -> bool:
    with translation.override(settings.LANGUAGE_CODE):
        what = gettext("handoffs") if label == "handoffs" else gettext("contract errors")
        reason = gettext(
            "Gradual release paused automatically: %(what)s %(c_rate)s%% (%(c_n)s conversations) "
            "against %(o_rate)s%% (%(o_n)s conversations), margin of %(margin)s points"
        ) % {
            "what": what,
            "c_rate": round(100 * cand.rate),
            "c_n": cand.conversations,
            "o_rate": round(100 * cur.rate),
            "o_n": cur.conversations,
            "margin": f"{settings.ROLLOUT_PAUSE_MARGIN:g}",
        }
    with transaction.atomic():
        override = (
            PromptOverride.objects.select_for_update()
            .filter(pk=override_id, rollout_percent__isnull=False, rollout_paused_at__isnull=True)
            .first()
        )
        if override is None:
            return False
        override.rollout_paused_at = timezone.now()
        override.rollout_pause_reason = reason
        override._change_reason = reason
        override.save()
    logger.info("rollout_paused", extra={"override_id": override_id, "metric": label})
    return True
