"""The replays and prompt test case runs the activation gate weighs (docs/architecture.md, The
activation gate), read from the database.

`prompts_admin.activation` defines what the gate asks (`ReplayEvidence`, `CasesEvidence`); this
app registers `DatabaseReplayEvidence` and `DatabaseCasesEvidence` when ready, since
prompts_admin may not import it.

Which runs count as evidence: a finished run that replayed at least one call, done, or stopped
early (by a cap or by the editor) with what it replayed so far: a partial replay still measured
real calls. A failed, queued or running run, or one that replayed nothing, says nothing about the
text and does not count.
"""

from django.urls import NoReverseMatch, reverse

from governance.models import PromptTestCase, PromptTestRun, ReplayRun, ReplayStatus
from governance.test_cases import case_versions
from prompts_admin.activation import CasesSummary, ReplaySummary

EVIDENCE_STATUSES = (ReplayStatus.DONE, ReplayStatus.CAPPED, ReplayStatus.CANCELLED)


def replay_admin_url(run_id: int) -> str:
    """The run's admin page; "" when its admin is not installed."""
    return _admin_url("admin:governance_replayrun_change", run_id)


def _admin_url(name: str, pk: int) -> str:
    try:
        return reverse(name, args=[pk])
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


class DatabaseCasesEvidence:
    """The agent's active test cases, and the latest run of them against a text: it counts
    when it ran each active case as the case is now (a case added or edited since is not
    covered); only the active cases' results are weighed."""

    def cases_of(self, agent: str, content_hash: str) -> CasesSummary:
        cases = list(
            PromptTestCase.objects.filter(agent=agent, is_active=True).only("pk", "updated_at")
        )
        if not cases:
            return CasesSummary(active=0, run_id=None, failed=0, failures=(), admin_url="")
        run = (
            PromptTestRun.objects.filter(agent=agent, content_hash=content_hash)
            .order_by("-created_at", "-id")
            .first()
        )
        ran = {tuple(version) for version in run.case_versions} if run is not None else set()
        if run is None or not {tuple(v) for v in case_versions(cases)} <= ran:
            return CasesSummary(active=len(cases), run_id=None, failed=0, failures=(), admin_url="")
        active = {case.pk for case in cases}
        failures = tuple(
            f"#{r['case']} {r['title']}: {'; '.join(r['differences'])}"
            for r in run.results
            if r.get("case") in active and not r.get("passed")
        )
        return CasesSummary(
            active=len(cases),
            run_id=run.pk,
            failed=len(failures),
            failures=failures,
            admin_url=_admin_url("admin:governance_prompttestrun_change", run.pk),
        )
