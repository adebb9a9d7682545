"""The automatic pause of a gradual release (agents.rollout.candidate_worse): a candidate whose
conversations were handed off, or broke the output contract, more than the current version's
by more than `ROLLOUT_PAUSE_MARGIN` points is paused; no new conversation pins it then.

The sides (`release_sides`, which the metrics page shows too) are the real conversations started
since the release started (its latest run of history rows with a share and no pause), and
before its pause if paused: those that pinned a version of the candidate, and the others that
pinned a version of the agent. Rates per conversation, as the metrics page's handoff rate
(`governance.outcomes`). Three queries whatever the number of conversations (the candidates,
their history, one aggregate over the sessions), then one save per pause; after its commit the
pause e-mails the prompt editors (`governance.rollout_alert`).
"""

import logging
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Q
from django.utils import timezone, translation
from django.utils.formats import number_format
from django.utils.translation import gettext

from agents.rollout import Proportion, candidate_worse
from conversations.commit_hooks import on_commit_call
from conversations.models import Session
from governance.outcomes import CONTRACT_VIOLATIONS, HANDOFF_REASONS
from governance.rollout_alert import rollout_pause_alert_send
from prompts_admin.models import PromptOverride
from versioning.history import historical_model

logger = logging.getLogger(__name__)

HANDED_OFF = Q(handoff_reason__in=[reason.value for reason in HANDOFF_REASONS])
CONTRACT_ERROR = Q(handoff_reason__in=[reason.value for reason in CONTRACT_VIOLATIONS])


@dataclass(frozen=True, slots=True)
class Release:
    """A gradual release's current run: since its first history row with a share and no pause
    after the last one without a share or with a pause, until its pause (`paused_at`) if any."""

    override_id: int
    agent: str
    percent: int
    started_at: datetime
    paused_at: datetime | None
    pause_reason: str
    versions: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Side:
    """One side's real conversations of a release and how many were handed off, and handed off
    for breaking the output contract."""

    conversations: int
    handoffs: int
    contract_errors: int

    @property
    def handoff(self) -> Proportion:
        return Proportion(self.handoffs, self.conversations)

    @property
    def contract(self) -> Proportion:
        return Proportion(self.contract_errors, self.conversations)


@dataclass(frozen=True, slots=True)
class ReleaseSides:
    release: Release
    candidate: Side
    current: Side


def releases(*, agent: str | None = None, include_paused: bool = False) -> list[Release]:
    """The gradual releases (of `agent`, or of every agent), running only unless
    `include_paused`: two queries, one when there is none."""
    candidates = PromptOverride.objects.filter(rollout_percent__isnull=False)
    if agent is not None:
        candidates = candidates.filter(agent=agent)
    if not include_paused:
        candidates = candidates.filter(rollout_paused_at__isnull=True)
    found = {
        pk: (agent_value, percent, paused_at, reason)
        for pk, agent_value, percent, paused_at, reason in candidates.values_list(
            "pk", "agent", "rollout_percent", "rollout_paused_at", "rollout_pause_reason"
        )
    }
    if not found:
        return []
    rows = (
        historical_model(PromptOverride)
        .objects.filter(id__in=list(found))
        .order_by("id", "history_id")
        .values_list("id", "history_id", "history_date", "rollout_percent", "rollout_paused_at")
    )
    runs: dict[int, list[tuple[int, datetime]]] = {}
    # A pause ends the run (a paused release's run is the one it paused); the next row with a
    # share and no pause (the resume) starts a new one, and a row without a share clears it.
    open_runs: set[int] = set()
    for override_id, history_id, history_date, percent, paused_at in rows:
        if percent is None:
            runs[override_id] = []
            open_runs.discard(override_id)
        elif paused_at is not None:
            open_runs.discard(override_id)
        elif override_id in open_runs:
            runs[override_id].append((history_id, history_date))
        else:
            runs[override_id] = [(history_id, history_date)]
            open_runs.add(override_id)
    result = []
    for pk, run in runs.items():
        agent_value, percent, paused_at, reason = found[pk]
        if run and percent is not None:  # the filter's; typed as nullable
            result.append(
                Release(
                    override_id=pk,
                    agent=agent_value,
                    percent=percent,
                    started_at=run[0][1],
                    paused_at=paused_at,
                    pause_reason=reason,
                    versions=tuple(f"override:{history_id}" for history_id, _date in run),
                )
            )
    return result


def release_sides(found: list[Release]) -> list[ReleaseSides]:
    """Each release's two sides: the real conversations created in its run that pinned a
    version of the candidate, and the others that pinned a version of its agent. One aggregate
    query whatever the number of releases and conversations (none without a release)."""
    if not found:
        return []
    counts: dict[str, Count] = {}
    for release in found:
        pinned = Q(created_at__gte=release.started_at, prompt_versions__has_key=release.agent)
        if release.paused_at is not None:
            pinned &= Q(created_at__lt=release.paused_at)
        candidate = Q(**{f"prompt_versions__{release.agent}__in": release.versions})
        for letter, where in {"c": pinned & candidate, "o": pinned & ~candidate}.items():
            key = f"{release.override_id}_{letter}"
            counts[f"{key}_n"] = Count("pk", filter=where)
            counts[f"{key}_h"] = Count("pk", filter=where & HANDED_OFF)
            counts[f"{key}_e"] = Count("pk", filter=where & CONTRACT_ERROR)
    totals = Session.objects.filter(is_simulated=False).aggregate(**counts)

    def side(key: str) -> Side:
        return Side(
            conversations=totals[f"{key}_n"],
            handoffs=totals[f"{key}_h"],
            contract_errors=totals[f"{key}_e"],
        )

    return [
        ReleaseSides(
            release=release,
            candidate=side(f"{release.override_id}_c"),
            current=side(f"{release.override_id}_o"),
        )
        for release in found
    ]


def rollout_pauses_check() -> list[int]:
    """Pauses every running candidate worse than its agent's current version; the ids paused."""
    paused = []
    for sides in release_sides(releases()):
        for label, cand, cur in (
            ("handoffs", sides.candidate.handoff, sides.current.handoff),
            ("contract errors", sides.candidate.contract, sides.current.contract),
        ):
            if candidate_worse(
                candidate=cand,
                current=cur,
                margin_points=settings.ROLLOUT_PAUSE_MARGIN,
                min_conversations=settings.ROLLOUT_PAUSE_MIN_CONVERSATIONS,
            ):
                if _pause(sides.release.override_id, label, cand, cur):
                    paused.append(sides.release.override_id)
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
            # Through a Decimal of its shortest form: "5", not "5,0"; "2,5", not "2.5".
            "margin": number_format(Decimal(f"{settings.ROLLOUT_PAUSE_MARGIN:g}")),
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
        # After the commit: a rolled-back pause alerts no one, and a mail server that fails
        # cannot undo the pause.
        on_commit_call(rollout_pause_alert_send, override_id)
    logger.info("rollout_paused", extra={"override_id": override_id, "metric": label})
    return True
