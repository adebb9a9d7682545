"""The replays the activation gate weighs (docs/architecture.md, The activation gate), read from the
database.

`prompts_admin.activation` defines what the gate asks (`ReplayEvidence`); this app registers
`DatabaseReplayEvidence` when ready, since prompts_admin may not import it.

Which runs count as evidence: a finished run that replayed at least one call, done, or stopped
early (by a cap or by the editor) with what it replayed so far: a partial replay still measured
real calls. A failed, queued or running run, or one that replayed nothing, says nothing about the
text and does not count.
"""

from django.urls import NoReverseMatch, reverse

from governance.models import ReplayRun, ReplayStatus
from prompts_admin.activation import ReplaySummary

EVIDENCE_STATUSES = (ReplayStatus.DONE, ReplayStatus.CAPPED, ReplayStatus.CANCELLED)


def replay_admin_url(run_id: int) -> str:
    """The run's admin page; "" when its admin is not installed."""
    try:
        return reverse("admin:governance_replayrun_change", args=[run_id])
    except NoReverseMatch:
        return ""


class DatabaseReplayEvidence:
    def latest_replay(self, agent: str, content_hash: str) -> ReplaySummary | None:
        run = (
            ReplayRun.objects.filter(
                agent=agent,
                content_hash=content_hash,
                status__in=EVIDENCE_STATUSES,
                calls_done__gt=0,
            )
            .order_by("-created_at", "-id")
            .first()
        )
        if run is None:
            return None
        return ReplaySummary(
            run_id=run.pk,
            status=run.status,
            calls_done=run.calls_done,
            code_changed=run.code_changed,
            handoff_changed=run.handoff_changed,
            contract_errors=run.contract_errors,
            cost_usd=run.cost_usd,
            created_at=run.created_at,
            admin_url=replay_admin_url(run.pk),
        )
