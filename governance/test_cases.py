"""Prompt test cases (docs/architecture.md, Prompt test cases): a recorded call frozen with what an
editor expects of its answer, run against a text through the replay's own path.

`prompt_test_case_create` freezes what the replay reads of a call
(`governance.recorded.RecordedCall`): its context snapshot and its history as the call read it,
masked (`agents.masking`) when the editor may not read personal data. `run_cases` rebuilds
each case's request with the text (`governance.replay.draft_call_prepare`), asks the model
and reads the answer as a turn does (`governance.replay.replay_answer`), then compares the
answer with the expectations (`case_differences`, pure). Nothing is sent, no session
changes, no `LLMCall` is written.

Model calls: up to `REPLAY_CONCURRENCY` at once, and no new call once the run's cost reaches
`REPLAY_MAX_COST_USD` (the cases left are failed, saying so); every database read stays in the
caller's thread, which gives its pooled connection back while it waits on the model. The
installation-wide replay slots (`governance.slots`) are not taken: they belong to replay runs,
and a suite is a few dozen calls.
"""

from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, cast

from django.utils.translation import gettext

from agents.masking import Masker
from agents.media_markers import MediaView
from agents.sources import HistoryDirection, HistoryEntry, OverrideTemplate
from agents.states import AgentName
from conversations.db_connections import pooled_connections_release
from conversations.labels import handoff_label, state_label
from conversations.models import LLMCall
from conversations.privacy.personal_data import can_view_personal_data, session_masker
from governance.models import ContractOutcome, HandoffExpectation, PromptTestCase, PromptTestRun
from governance.recorded import (
    AnswerOutcome,
    RecordedCall,
    SnapshotError,
    recorded_call_of,
    recorded_outcome,
    snapshot_context,
)
from governance.replay import (
    REPLAY_PROMPT_VERSION,
    DraftCall,
    ReplayAnswer,
    ReplayDeps,
    answer_cost,
    draft_call_prepare,
    replay_answer,
    replay_model,
)
from prompts_admin.models import PromptOverride, prompt_content_hash

# --- Freezing a recorded call ---------------------------------------------------------------------


def history_as_json(
    entries: Iterable[HistoryEntry], *, masker: Masker | None
) -> list[dict[str, Any]]:
    """The entries a call read, as a case stores them (masked with `masker` when given)."""

    def text(value: str) -> str:
        return masker.text(value) if masker is not None else value

    rows = []
    for entry in entries:
        row: dict[str, Any] = {
            "direction": entry.direction,
            "content": text(entry.content),
            "error": entry.error,
            "staff": entry.staff,
            "quoted": text(entry.quoted),
        }
        if entry.media is not None:
            media = entry.media
            row["media"] = {
                "kind": media.kind,
                "caption": text(media.caption),
                "filename": text(media.filename),
                "transcript": text(media.transcript),
                "description": text(media.description),
                "data": masker.value(dict(media.data)) if masker is not None else dict(media.data),
            }
        rows.append(row)
    return rows


def history_from_json(rows: Sequence[Mapping[str, Any]], *, session_id: int) -> list[HistoryEntry]:
    entries = []
    for row in rows:
        media = row.get("media")
        entries.append(
            HistoryEntry(
                session_id=session_id,
                direction=cast(HistoryDirection, row["direction"]),
                content=str(row.get("content") or ""),
                error=str(row.get("error") or ""),
                staff=bool(row.get("staff")),
                quoted=str(row.get("quoted") or ""),
                media=MediaView(
                    kind=str(media.get("kind") or ""),
                    caption=str(media.get("caption") or ""),
                    filename=str(media.get("filename") or ""),
                    transcript=str(media.get("transcript") or ""),
                    description=str(media.get("description") or ""),
                    data=dict(media.get("data") or {}),
                )
                if isinstance(media, Mapping)
                else None,
            )
        )
    return entries


class FrozenHistorySource:
    """A case's stored history: the newest `limit` entries, oldest first, as a database
    history source returns them."""

    def __init__(self, entries: Sequence[HistoryEntry]) -> None:
        self._entries = list(entries)

    def history(self, session_id: int, limit: int) -> list[HistoryEntry]:
        return self._entries[-limit:] if limit > 0 else []


# A case freezes every message the call read; the invoker keeps MAX_HISTORY_MESSAGES of them.
FROZEN_HISTORY_LIMIT = 500


@dataclass(frozen=True, slots=True)
class CallPrefill:
    """What a call's answer recorded, to prefill the case's expectations."""

    code: int | None
    state: str
    handoff: str
    packages: tuple[str, ...]
    text: str


def call_prefill(call: LLMCall, *, deps: ReplayDeps, masker: Masker | None) -> CallPrefill:
    """The recorded answer read now, as the replay reads it (`recorded_outcome`); its text
    masked with `masker` when given. Raises `SnapshotError` for a call the replay cannot read."""
    recorded = recorded_call_of(call)
    context = snapshot_context(recorded.snapshot, recorded=recorded)
    outcome = recorded_outcome(
        call,
        agent=_agent(call.agent),
        context=context,
        catalog=deps.kb.catalog(),
        config=deps.config,
    )
    text = masker.text(outcome.text) if masker is not None else outcome.text
    return CallPrefill(outcome.code, outcome.state, outcome.handoff, outcome.packages, text)


def _agent(value: str) -> AgentName:
    try:
        return AgentName(value)
    except ValueError as exc:
        raise SnapshotError(f"not an agent call ({value})") from exc


def case_masker(call: LLMCall, user: Any) -> Masker | None:
    """The masker of the call's conversation for an editor who may not read personal data;
    None for one who may."""
    if can_view_personal_data(user):
        return None
    return session_masker(call.session)


def prompt_test_case_create(
    *, call: LLMCall, user: Any, title: str, expectations: Mapping[str, Any], deps: ReplayDeps
) -> PromptTestCase:
    """A case frozen from `call` (its session and instance loaded) with the editor's
    `expectations` (`PromptTestCase` field names); masked unless `user` may read personal
    data."""
    masker = case_masker(call, user)
    recorded = recorded_call_of(call)
    snapshot_context(recorded.snapshot, recorded=recorded)  # refuses an unreadable snapshot
    prefill = call_prefill(call, deps=deps, masker=masker)
    entries = recorded.history.history(call.session_id, FROZEN_HISTORY_LIMIT)
    snapshot = dict(recorded.snapshot)
    case = PromptTestCase(
        agent=call.agent,
        title=title,
        llm_call=call,
        source_instance=call.session.instance,
        session_id_recorded=call.session_id,
        recorded_at=call.created_at,
        context_snapshot=masker.value(snapshot) if masker is not None else snapshot,
        history_entries=history_as_json(entries, masker=masker),
        masked=masker is not None,
        recorded_code=prefill.code,
        recorded_text=prefill.text,
        created_by=user if getattr(user, "is_authenticated", False) else None,
        **expectations,
    )
    case.save()
    return case


def case_recorded_call(case: PromptTestCase) -> RecordedCall:
    """What the replay reads of a case: its frozen copy, and its instance as it is now."""
    instance = case.source_instance
    return RecordedCall(
        agent=case.agent,
        snapshot=case.context_snapshot or {},
        session_id=case.session_id_recorded,
        display_phone=instance.display_phone if instance is not None else "",
        brand_context=instance.brand_context if instance is not None else "",
        history=FrozenHistorySource(
            history_from_json(case.history_entries or [], session_id=case.session_id_recorded)
        ),
        recorded_at=case.recorded_at,
    )


# --- Expectations (pure) --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Expectations:
    """What an editor expects of a case's answer; an empty one is not checked."""

    code: int | None = None
    state: str = ""
    handoff: str = HandoffExpectation.ANY
    handoff_reason: str = ""
    required_fields: tuple[str, ...] = ()
    must_contain: tuple[str, ...] = ()
    must_not_contain: tuple[str, ...] = ()
    package: str = ""

    @classmethod
    def of(cls, case: PromptTestCase) -> "Expectations":
        return cls(
            code=case.expected_code,
            state=case.expected_state,
            handoff=case.handoff_expected,
            handoff_reason=case.expected_handoff_reason,
            required_fields=tuple(str(f) for f in case.required_fields or ()),
            must_contain=tuple(str(t) for t in case.must_contain or ()),
            must_not_contain=tuple(str(t) for t in case.must_not_contain or ()),
            package=case.expected_package,
        )


def _shown(value: object) -> str:
    return "—" if value is None or value == "" else str(value)


def _field_present(answer: Mapping[str, Any], path: str) -> bool:
    """Whether the answer's JSON has `path` ("motivo", "dados.email"), not empty."""
    value: Any = answer
    for key in path.split("."):
        if not isinstance(value, Mapping) or key not in value:
            return False
        value = value[key]
    return value not in (None, "", [], {})


def case_differences(expected: Expectations, outcome: AnswerOutcome) -> list[str]:
    """How `outcome` differs from `expected`, one pt-BR sentence each (empty: it passes).
    Texts are compared case-insensitively, as plain substrings."""
    differences = []
    if outcome.contract == ContractOutcome.FAILED:
        differences.append(
            gettext("the answer is outside the contract (%(reason)s)")
            % {"reason": handoff_label(outcome.handoff)}
        )
    if expected.code is not None and outcome.code != expected.code:
        differences.append(
            gettext("expected code %(expected)s, got %(got)s")
            % {"expected": expected.code, "got": _shown(outcome.code)}
        )
    if expected.state and outcome.state != expected.state:
        differences.append(
            gettext("expected next state %(expected)s, got %(got)s")
            % {
                "expected": state_label(expected.state),
                "got": state_label(outcome.state) if outcome.state else "—",
            }
        )
    if expected.handoff == HandoffExpectation.YES and not outcome.handoff:
        differences.append(gettext("expected a handoff, got none"))
    if expected.handoff == HandoffExpectation.NO and outcome.handoff:
        differences.append(
            gettext("expected no handoff, got one (%(reason)s)")
            % {"reason": handoff_label(outcome.handoff)}
        )
    if expected.handoff_reason and outcome.handoff != expected.handoff_reason:
        differences.append(
            gettext("expected handoff reason %(expected)s, got %(got)s")
            % {
                "expected": handoff_label(expected.handoff_reason),
                "got": handoff_label(outcome.handoff) if outcome.handoff else "—",
            }
        )
    for path in expected.required_fields:
        if not _field_present(outcome.answer_json, path):
            differences.append(gettext("the answer lacks the field %(field)s") % {"field": path})
    reply = outcome.text.casefold()
    for text in expected.must_contain:
        if text.casefold() not in reply:
            differences.append(gettext("the reply lacks “%(text)s”") % {"text": text})
    for text in expected.must_not_contain:
        if text.casefold() in reply:
            differences.append(gettext("the reply contains “%(text)s”") % {"text": text})
    if expected.package and expected.package not in outcome.packages:
        differences.append(
            gettext("expected package %(expected)s requested, got %(got)s")
            % {"expected": expected.package, "got": ", ".join(outcome.packages) or "—"}
        )
    return differences


# --- Running --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CaseResult:
    case_id: int
    title: str
    passed: bool
    differences: tuple[str, ...]
    code: int | None = None
    text: str = ""

    def as_json(self) -> dict[str, Any]:
        return {
            "case": self.case_id,
            "title": self.title,
            "passed": self.passed,
            "code": self.code,
            "differences": list(self.differences),
        }


@dataclass(frozen=True, slots=True)
class CasesReport:
    results: tuple[CaseResult, ...]
    cost_usd: Decimal = field(default_factory=lambda: Decimal("0"))

    @property
    def passed(self) -> int:
        return sum(r.passed for r in self.results)

    @property
    def failed(self) -> int:
        return len(self.results) - self.passed

    def as_json(self) -> dict[str, Any]:
        return {
            "cases": len(self.results),
            "passed": self.passed,
            "failed": self.failed,
            "cost_usd": f"{self.cost_usd:.6f}",
            "results": [r.as_json() for r in self.results],
        }


def _result(case: PromptTestCase, answer: ReplayAnswer) -> CaseResult:
    if answer.outcome is None:
        error = gettext("the model did not answer: %(error)s") % {"error": answer.error}
        return CaseResult(case.pk, case.title, False, (error,))
    differences = case_differences(Expectations.of(case), answer.outcome)
    return CaseResult(
        case.pk,
        case.title,
        not differences,
        tuple(differences),
        code=answer.outcome.code,
        text=answer.outcome.text,
    )


def run_cases(
    cases: Sequence[PromptTestCase], override: PromptOverride | None, deps: ReplayDeps
) -> CasesReport:
    """Each case against `override`'s text (None: each agent's prompt as it is now, its
    active override or the built-in one), in the given order; see the module docstring for
    the model calls. Reads the database in this thread only; writes nothing."""
    draft = OverrideTemplate(override.content, REPLAY_PROMPT_VERSION) if override else None
    results: dict[int, CaseResult] = {}
    cost = Decimal("0")
    catalog = deps.kb.catalog()
    pending: dict[Future[ReplayAnswer], PromptTestCase] = {}
    model = replay_model(override.agent) if override is not None else ""

    def collect(done: Iterable[Future[ReplayAnswer]]) -> None:
        nonlocal cost
        for future in done:
            case = pending.pop(future)
            answer = future.result()
            cost += answer_cost(answer.calls, asked=model or replay_model(case.agent))
            results[case.pk] = _result(case, answer)

    with ThreadPoolExecutor(max_workers=deps.concurrency, thread_name_prefix="cases") as pool:
        for case in cases:
            while len(pending) >= deps.concurrency:
                # The wait holds no database connection, as a replay's (the next query takes
                # one again).
                pooled_connections_release()
                done, _running = wait(pending, return_when=FIRST_COMPLETED)
                collect(done)
            if cost >= deps.max_cost_usd:
                results[case.pk] = CaseResult(
                    case.pk,
                    case.title,
                    False,
                    (gettext("not run: the run reached REPLAY_MAX_COST_USD"),),
                )
                continue
            prepared: DraftCall | str = draft_call_prepare(
                case_recorded_call(case), draft=draft, deps=deps
            )
            if isinstance(prepared, str):
                error = gettext("the case cannot be run: %(error)s") % {"error": prepared}
                results[case.pk] = CaseResult(case.pk, case.title, False, (error,))
                continue
            pending[pool.submit(replay_answer, prepared, catalog=catalog, deps=deps)] = case
        pooled_connections_release()
        collect(wait(pending).done)
    return CasesReport(results=tuple(results[c.pk] for c in cases), cost_usd=cost)


def active_cases(agent: str) -> list[PromptTestCase]:
    return list(
        PromptTestCase.objects.filter(agent=agent, is_active=True).select_related("source_instance")
    )


def active_cases_count(agent: str) -> int:
    return PromptTestCase.objects.filter(agent=agent, is_active=True).count()


def case_versions(cases: Iterable[PromptTestCase]) -> list[list[Any]]:
    """[id, updated_at] of each case: what a run covered."""
    return sorted([case.pk, case.updated_at.isoformat()] for case in cases)


def prompt_test_run_record(
    *, override: PromptOverride, cases: Sequence[PromptTestCase], report: CasesReport, user: Any
) -> PromptTestRun:
    """The run of `cases` against `override`'s text as it is now, for the activation gate."""
    return PromptTestRun.objects.create(
        override=override,
        agent=override.agent,
        content_hash=prompt_content_hash(override.content),
        case_versions=case_versions(cases),
        cases=len(report.results),
        passed=report.passed,
        failed=report.failed,
        results=[r.as_json() for r in report.results],
        cost_usd=report.cost_usd,
        created_by=user if getattr(user, "is_authenticated", False) else None,
    )


def prompt_tests_run(
    *, override: PromptOverride, deps: ReplayDeps, user: Any = None
) -> tuple[PromptTestRun, CasesReport]:
    """The agent's active cases against `override`'s text, recorded for the gate."""
    cases = active_cases(override.agent)
    report = run_cases(cases, override, deps)
    return prompt_test_run_record(override=override, cases=cases, report=report, user=user), report
