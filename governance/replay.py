"""Replay a draft prompt override over recorded calls of its agent (docs/architecture.md, Replay a
draft).

`replay_run_start` stores a `ReplayRun` (the draft's text and hash, the filters, how many calls
they select); the ``governance.replay_run`` task (or ``python manage.py replay``) runs
`replay_run_execute`. Each selected call's request is rebuilt from its context snapshot with the
draft in place of the recorded prompt (`agents.invoker.AgentInvoker.prepare` with an override),
and both answers, replayed and recorded, are read by the turn's own code
(`conversations.turns.think.agent_answer_read`) on an in-memory session, so both are judged by
today's code. Nothing is sent, no session changes, no `LLMCall` is written.

Runs share the installation with customers: at most `REPLAY_MAX_RUNNING` runs and
`REPLAY_CONCURRENCY` model calls at once, counted in rows of the database (`governance.slots`) so
the count holds across processes and in the embedded SQLite default. A run that finds no slot
stays queued, holding no worker thread and no connection, and is published again by the run that
ends next or by the sweep (`replay_queue_advance`); one that can no longer start ends FAILED with
its reason (`stuck_replay_runs_fail`).

The model calls run in a small thread pool; every database read and write stays in the run's
thread, between calls, and that thread gives its pooled connection back while it waits
(`conversations.db_connections`), so no transaction or connection is held across a model call.
Before each call the run checks for a cancel and for the caps (`REPLAY_MAX_CALLS`,
`REPLAY_MAX_COST_USD`); calls already in flight finish, so the cost may pass its cap by at most
`REPLAY_CONCURRENCY - 1` calls. A model with no listed price (`conversations.model_prices`) is
refused, never counted as free. A provider error is that call's result; anything unexpected ends
the run FAILED with a detail, and is logged.
"""

import logging
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from decimal import Decimal
from time import sleep
from typing import Any, TypeVar
from uuid import UUID

from django.conf import settings
from django.db import IntegrityError, connections, transaction
from django.db.models import QuerySet
from django.utils import timezone
from django.utils.translation import gettext

from agents.context import CatalogSnapshot, SessionContext
from agents.invoker import PreparedCall
from agents.llm import LLMCallResult, LLMClient, LLMError
from agents.sources import (
    KBSource,
    OverrideTemplate,
    PromptSource,
    TaskScopedKBSource,
    TaskScopedPromptSource,
)
from agents.states import AGENT_FOR_STATE, AgentName
from conversations.agent_sources import OK_OUTCOME, build_agent_invoker
from conversations.db_connections import pooled_connections_release
from conversations.labels import usd_text
from conversations.model_prices import call_cost_usd
from conversations.models import LLMCall, LLMCallPurpose
from conversations.periods import day_start
from conversations.provider_circuit import process_llm_client
from conversations.turns.deps import PipelineConfig
from conversations.turns.result import Turn
from conversations.turns.think import agent_answer_read
from governance.models import (
    ContractOutcome,
    ModelRun,
    PersonaRun,
    ReplayResult,
    ReplayRun,
    ReplaySlotPool,
    ReplayStatus,
)
from governance.recorded import (
    AnswerOutcome,
    MemoryRecorder,
    RecordedCall,
    SnapshotError,
    answer_outcome,
    recorded_call_of,
    recorded_outcome,
    replay_turn,
    snapshot_context,
)
from governance.slots import slot_acquire, slot_release, slots_release, slots_taken
from knowledge_base.selectors import DatabaseKBSource
from prompts_admin.models import PromptOverride, prompt_content_hash
from prompts_admin.selectors import DatabasePromptSource

logger = logging.getLogger(__name__)
RunT = TypeVar("RunT", bound=ModelRun)

# The version the replay's requests carry (never recorded: the replay writes no LLMCall).
REPLAY_PROMPT_VERSION = "replay"
_DETAIL_CHARS = ReplayRun._meta.get_field("detail").max_length or 255

# A run makes up to REPLAY_MAX_CALLS model calls: longer than a turn, so its task has its own
# time limits, below the broker's visibility timeout (a longer task would be delivered twice).
_VISIBILITY = int(settings.CELERY_BROKER_TRANSPORT_OPTIONS.get("visibility_timeout", 600))
REPLAY_TIME_LIMIT = max(_VISIBILITY - 60, settings.CELERY_TASK_TIME_LIMIT)
REPLAY_SOFT_TIME_LIMIT = REPLAY_TIME_LIMIT - 30
# Past the hard limit, with a margin for the worker's clock and start: no task runs the run now.
# Also the lease of a run's slot.
REPLAY_ABANDONED_AFTER = timedelta(seconds=REPLAY_TIME_LIMIT + 60)
# A queued run whose task no worker has looked at for this long can no longer be trusted to start
# (no worker consumes the replays queue, or the message was lost): it ends FAILED, saying so.
REPLAY_START_TIMEOUT = timedelta(minutes=15)
# How often a run waiting for a call slot looks again.
SLOT_POLL_SECONDS = 0.5

Dispatch = Callable[[int], None]


class ReplayRefused(Exception):
    """A run that must not start; the message says why (pt-BR through gettext)."""


# --- Selection ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReplayFilters:
    """Which recorded calls a run replays. Dates are local days (TIME_ZONE), both included;
    `segment` and `handoff_reason` are the conversation's (as it is now); `last_n` keeps the
    newest N."""

    date_from: date | None = None
    date_to: date | None = None
    segment: str = ""
    handoff_reason: str = ""
    last_n: int | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "date_from": self.date_from.isoformat() if self.date_from else None,
            "date_to": self.date_to.isoformat() if self.date_to else None,
            "segment": self.segment,
            "handoff_reason": self.handoff_reason,
            "last_n": self.last_n,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "ReplayFilters":
        def day(value: Any) -> date | None:
            return date.fromisoformat(value) if value else None

        last_n = data.get("last_n")
        return cls(
            date_from=day(data.get("date_from")),
            date_to=day(data.get("date_to")),
            segment=str(data.get("segment") or ""),
            handoff_reason=str(data.get("handoff_reason") or ""),
            last_n=int(last_n) if last_n else None,
        )


def replay_calls(
    *, agent: str, filters: ReplayFilters, until: datetime | None = None
) -> QuerySet[LLMCall]:
    """The recorded calls a replay of `agent` may replay under `filters`, newest first (without
    `last_n`: slice it). `until` keeps the calls recorded by then (a run's creation), so the
    selection a run counted at its start is the one it replays."""
    calls = LLMCall.objects.filter(
        agent=agent,
        purpose=LLMCallPurpose.AGENT,
        outcome=OK_OUTCOME,
        context_snapshot__isnull=False,
        session__is_simulated=False,
    )
    if filters.date_from is not None:
        calls = calls.filter(created_at__gte=day_start(filters.date_from))
    if filters.date_to is not None:
        calls = calls.filter(created_at__lt=day_start(filters.date_to + timedelta(days=1)))
    if until is not None:
        calls = calls.filter(created_at__lte=until)
    if filters.segment:
        calls = calls.filter(session__segment=filters.segment)
    if filters.handoff_reason:
        calls = calls.filter(session__handoff_reason=filters.handoff_reason)
    return calls.order_by("-created_at", "-id")


def replay_calls_count(*, agent: str, filters: ReplayFilters, until: datetime | None = None) -> int:
    """How many calls the filters select (`last_n` included)."""
    count = replay_calls(agent=agent, filters=filters, until=until).count()
    return min(count, filters.last_n) if filters.last_n else count


# --- Start --------------------------------------------------------------------------------------


def replay_model(agent: str) -> str:
    """The model the agent is configured with (the replay calls it, not the recorded one)."""
    models = {
        AgentName.TRIAGEM.value: settings.OPENAI_MODEL_TRIAGE,
        AgentName.QUALIFICACAO.value: settings.OPENAI_MODEL_QUALIFICATION,
        AgentName.COLETA.value: settings.OPENAI_MODEL_COLLECTION,
    }
    return str(models.get(agent, ""))


def replay_run_start(
    *,
    override: PromptOverride,
    filters: ReplayFilters,
    user: Any | None,
    form_token: UUID | None = None,
) -> ReplayRun:
    """A queued run of `override`'s text (as it is now) over the calls `filters` select.

    An active override may be replayed too (its text against what the calls recorded, e.g.
    after the built-in prompt served them); the run's detail says it was active.
    Refused (`ReplayRefused`) when the model has no listed price: the cost cap could not count
    its calls. `form_token` is the start form's one-time token (`replay_run_submit`).
    """
    model = replay_model(override.agent)
    refusal = unpriced_model_refusal(model)
    if refusal:
        raise ReplayRefused(refusal)
    created = timezone.now()
    return ReplayRun.objects.create(
        override=override,
        agent=override.agent,
        content=override.content,
        content_hash=prompt_content_hash(override.content),
        model=model,
        filters=filters.as_json(),
        calls_selected=replay_calls_count(agent=override.agent, filters=filters, until=created),
        created_by=user if user is not None and user.is_authenticated else None,
        created_at=created,
        form_token=form_token,
        detail=gettext("The override was active when replayed.") if override.is_active else "",
    )


def submit_once(started: Callable[[], RunT | None], start: Callable[[], RunT]) -> tuple[RunT, bool]:
    """A start form's submit: `start`'s new run and True; or, for a form token seen before (a
    double click, a resubmitted page), the run `started` finds and False. `start` stores the
    token where `started` looks for it, in a unique column or under a lock the caller holds."""
    existing = started()
    if existing is not None:
        return existing, False
    try:
        with transaction.atomic():
            run = start()
    except IntegrityError:
        # The same token submitted twice at once: the other request's run stands.
        existing = started()
        if existing is None:
            raise
        return existing, False
    return run, True


def replay_run_submit(
    *, override: PromptOverride, filters: ReplayFilters, user: Any | None, form_token: UUID
) -> tuple[ReplayRun, bool]:
    """The start form's submit (`submit_once`, the token in the run's unique `form_token`)."""
    return submit_once(
        lambda: ReplayRun.objects.filter(form_token=form_token).first(),
        lambda: replay_run_start(
            override=override, filters=filters, user=user, form_token=form_token
        ),
    )


def unpriced_model_refusal(model: str) -> str:
    """Why a replay of `model` must not run ("" when it may): a model with no listed price
    would count as free against REPLAY_MAX_COST_USD."""
    if call_cost_usd(model, tokens_input=0, tokens_output=0) is not None:
        return ""
    return gettext(
        "No price for the model %(model)s (conversations/model_prices.py): the replay could "
        "not keep to REPLAY_MAX_COST_USD."
    ) % {"model": model or "—"}


def replay_run_cancel(*, run: ReplayRun) -> bool:
    """Stop a run: a queued one ends CANCELLED at once, a running one stops before its next
    call; False when it is finished already."""
    now = timezone.now()
    if ReplayRun.objects.filter(pk=run.pk, status=ReplayStatus.QUEUED).update(
        status=ReplayStatus.CANCELLED, cancel_requested=True, finished_at=now
    ):
        return True
    updated = ReplayRun.objects.filter(pk=run.pk, status=ReplayStatus.RUNNING).update(
        cancel_requested=True
    )
    return updated == 1


# --- Execute ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReplayDeps:
    """What a run calls and reads: the model client, the prompt and KB sources, the limits.

    `concurrency` is the installation's figure (REPLAY_CONCURRENCY call slots shared by every
    run); `max_running`, REPLAY_MAX_RUNNING run slots. `call_lease` outlasts one recorded call's
    requests (the draft's and a format repair, each with its retries)."""

    llm: LLMClient
    prompts: PromptSource
    kb: KBSource
    config: PipelineConfig
    max_calls: int
    max_cost_usd: Decimal
    concurrency: int
    max_running: int
    run_lease: timedelta = REPLAY_ABANDONED_AFTER
    call_lease: timedelta = timedelta(minutes=5)
    slot_poll_seconds: float = SLOT_POLL_SECONDS

    @classmethod
    def from_settings(cls, *, llm: LLMClient | None = None) -> "ReplayDeps":
        # The process's client without the production circuit breaker: a replay's failures must
        # not open the circuit customers' turns depend on.
        request_seconds = settings.LLM_TIMEOUT_SECONDS * (settings.LLM_RETRY_MAX + 1)
        return cls(
            llm=llm if llm is not None else process_llm_client(),
            prompts=TaskScopedPromptSource(DatabasePromptSource()),
            kb=TaskScopedKBSource(DatabaseKBSource()),
            config=PipelineConfig.from_settings(),
            max_calls=settings.REPLAY_MAX_CALLS,
            max_cost_usd=Decimal(str(settings.REPLAY_MAX_COST_USD)),
            concurrency=max(1, settings.REPLAY_CONCURRENCY),
            max_running=max(1, settings.REPLAY_MAX_RUNNING),
            call_lease=timedelta(seconds=2 * request_seconds + 60),
        )


@dataclass(frozen=True, slots=True)
class DraftCall:
    """A recorded call's request with the draft, ready to send: built in the run's thread (it
    reads the database), sent from a worker's."""

    agent: AgentName
    context: SessionContext
    prepared: PreparedCall
    turn: Turn


@dataclass(frozen=True, slots=True)
class ReplayCase:
    """One recorded call, ready to replay, and what its recorded answer did."""

    call: LLMCall
    draft: DraftCall
    recorded: AnswerOutcome


@dataclass(frozen=True, slots=True)
class ReplayAnswer:
    """What a worker thread brings back: the draft's outcome and its calls, or the error."""

    outcome: AnswerOutcome | None
    raw: str = ""
    calls: tuple[LLMCallResult, ...] = ()
    error: str = ""
    provider_error: bool = False
    latency_ms: int = 0


@dataclass(slots=True)
class _Totals:
    calls_done: int = 0
    code_changed: int = 0
    state_changed: int = 0
    handoff_changed: int = 0
    contract_errors: int = 0
    repaired: int = 0
    provider_errors: int = 0
    tokens_input: int = 0
    cached_tokens: int = 0
    tokens_output: int = 0
    cost_usd: Decimal = field(default_factory=lambda: Decimal("0"))

    def as_fields(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


def replay_run_execute(
    *,
    run_id: int,
    deps: ReplayDeps | None = None,
    deadline_errors: tuple[type[BaseException], ...] = (),
    dispatch: Dispatch | None = None,
) -> ReplayRun:
    """Run a queued run to its end (see the module docstring) when a run slot is free; without
    one the run stays queued, waiting for `replay_queue_advance`. A run that is not queued is
    left as is, so the task is safe to retry. `deadline_errors` (the task's soft time limit)
    end the run FAILED with the results so far. `dispatch` publishes a queued run's task: at
    the end of this run, the next waiting ones are published with it (None: nobody is; the
    sweep will)."""
    try:
        deps = deps or ReplayDeps.from_settings()
        run = ReplayRun.objects.get(pk=run_id)
        if run.status != ReplayStatus.QUEUED:
            return run
        if run.cancel_requested:
            return _finish(run, ReplayStatus.CANCELLED, _Totals(), "", deps=deps, dispatch=None)
        refusal = unpriced_model_refusal(run.model)
        if refusal:
            return _finish(run, ReplayStatus.FAILED, _Totals(), refusal, deps=deps, dispatch=None)
        if not _claim(run, deps):
            run.refresh_from_db()
            return run
    except Exception as exc:
        # Before the run started (the database refused a connection, a bug): say so on the run
        # rather than leave it queued for ever.
        logger.exception("replay_run_start_failed", extra={"run_id": run_id})
        detail = gettext("The replay could not start: %(error)s") % {"error": type(exc).__name__}
        if not _fail_queued(run_id, detail):
            raise
        return ReplayRun.objects.get(pk=run_id)
    totals = _Totals()
    try:
        status, detail = _execute(run, deps, totals)
    except deadline_errors:
        logger.warning("replay_run_deadline", extra={"run_id": run.pk})
        detail = gettext("Stopped at the task's time limit; the results so far are kept.")
        return _finish(run, ReplayStatus.FAILED, totals, detail, deps=deps, dispatch=dispatch)
    except Exception as exc:
        logger.exception("replay_run_failed", extra={"run_id": run.pk})
        detail = gettext("Unexpected error: %(error)s") % {"error": type(exc).__name__}
        return _finish(run, ReplayStatus.FAILED, totals, detail, deps=deps, dispatch=dispatch)
    return _finish(run, status, totals, detail, deps=deps, dispatch=dispatch)


def _claim(run: ReplayRun, deps: ReplayDeps) -> bool:
    """Take a run slot and mark the run RUNNING; False when none is free (the run waits, not
    dispatched) or another delivery of its task got there first."""
    now = timezone.now()
    slot = _run_slot(run, deps, now)
    if slot is None:
        ReplayRun.objects.filter(pk=run.pk, status=ReplayStatus.QUEUED).update(dispatched_at=None)
        # A run that ended between the first try and the line above skipped this one (it was
        # still marked dispatched): look once more, or it would wait for the sweep.
        slot = _run_slot(run, deps, now)
        if slot is None:
            logger.info("replay_run_waits", extra={"run_id": run.pk})
            return False
    run.status, run.started_at, run.dispatched_at = ReplayStatus.RUNNING, now, None
    if not ReplayRun.objects.filter(pk=run.pk, status=ReplayStatus.QUEUED).update(
        status=run.status, started_at=now, dispatched_at=None
    ):
        slot_release(pool=ReplaySlotPool.RUN, number=slot, run_id=run.pk)
        return False
    return True


def _run_slot(run: ReplayRun, deps: ReplayDeps, now: datetime) -> int | None:
    return slot_acquire(
        pool=ReplaySlotPool.RUN,
        cap=deps.max_running,
        run_id=run.pk,
        now=now,
        lease=deps.run_lease,
    )


def _fail_queued(run_id: int, detail: str) -> bool:
    """End a run that is still queued FAILED with `detail`; False when that failed too."""
    try:
        ReplayRun.objects.filter(pk=run_id, status=ReplayStatus.QUEUED).update(
            status=ReplayStatus.FAILED, detail=detail[:_DETAIL_CHARS], finished_at=timezone.now()
        )
    except Exception:
        logger.exception("replay_run_start_failed", extra={"run_id": run_id})
        return False
    return True


def replay_queue_advance(*, dispatch: Dispatch, max_running: int, now: datetime) -> list[int]:
    """Publish the oldest queued runs that wait for a run slot, as many as are free; returns
    their ids. Each is marked dispatched first, conditionally, so two callers at once never
    publish the same run."""
    free = max_running - slots_taken(pool=ReplaySlotPool.RUN, now=now)
    if free <= 0:
        return []
    waiting = ReplayRun.objects.filter(status=ReplayStatus.QUEUED, dispatched_at__isnull=True)
    published = []
    for run_id in waiting.order_by("created_at", "id").values_list("pk", flat=True)[:free]:
        if ReplayRun.objects.filter(
            pk=run_id, status=ReplayStatus.QUEUED, dispatched_at__isnull=True
        ).update(dispatched_at=now):
            dispatch(run_id)
            published.append(run_id)
    return published


def _execute(run: ReplayRun, deps: ReplayDeps, totals: _Totals) -> tuple[ReplayStatus, str]:
    draft = OverrideTemplate(run.content, REPLAY_PROMPT_VERSION)
    selection = replay_calls(
        agent=run.agent, filters=ReplayFilters.from_json(run.filters), until=run.created_at
    )
    selected = run.calls_selected
    newest = list(selection.select_related("session__instance")[: min(selected, deps.max_calls)])
    # Oldest first: the results read in the order the conversations happened.
    calls: Iterator[LLMCall] = reversed(newest)
    catalog = deps.kb.catalog()
    stop: tuple[ReplayStatus, str] | None = None
    pending: dict[Future[ReplayAnswer], tuple[ReplayCase, int]] = {}
    # The next call to replay, built, while it waits for a call slot.
    ready: ReplayCase | None = None
    exhausted = False
    with ThreadPoolExecutor(max_workers=deps.concurrency, thread_name_prefix="replay") as pool:
        while True:
            waits_for_slot = False
            while stop is None and len(pending) < deps.concurrency:
                if ready is None:
                    call = next(calls, None)
                    if call is None:
                        exhausted = True
                        break
                    stop = _stop_reason(run, deps, totals)
                    if stop is not None:
                        break
                    case = replay_case(call, draft=draft, catalog=catalog, deps=deps)
                    if isinstance(case, str):
                        _result_write(run, totals, call=call, case=None, answer=None, error=case)
                        continue
                    ready = case
                else:
                    # It waited for a call slot: the run may have been cancelled meanwhile.
                    stop = _stop_reason(run, deps, totals)
                    if stop is not None:
                        break
                slot = slot_acquire(
                    pool=ReplaySlotPool.CALL,
                    cap=deps.concurrency,
                    run_id=run.pk,
                    now=timezone.now(),
                    lease=deps.call_lease,
                )
                if slot is None:
                    waits_for_slot = True
                    break
                future = pool.submit(replay_answer, ready.draft, catalog=catalog, deps=deps)
                pending[future], ready = (ready, slot), None
            if not pending and (stop is not None or exhausted):
                break
            # The wait holds no database connection (the next query takes one again).
            pooled_connections_release()
            if not pending:
                sleep(deps.slot_poll_seconds)
                continue
            timeout = deps.slot_poll_seconds if waits_for_slot else None
            done, _running = wait(pending, timeout=timeout, return_when=FIRST_COMPLETED)
            for future in done:
                case, slot = pending.pop(future)
                answer = future.result()
                slot_release(pool=ReplaySlotPool.CALL, number=slot, run_id=run.pk)
                _result_write(run, totals, call=case.call, case=case, answer=answer, error="")
    if stop is not None:
        return stop
    if selected > deps.max_calls:
        return ReplayStatus.CAPPED, gettext(
            "Stopped at REPLAY_MAX_CALLS: %(max)s of the %(selected)s selected calls replayed."
        ) % {"max": deps.max_calls, "selected": selected}
    return ReplayStatus.DONE, ""


def _stop_reason(
    run: ReplayRun, deps: ReplayDeps, totals: _Totals
) -> tuple[ReplayStatus, str] | None:
    """Whether the next call must not start: a cancel (read fresh: the admin sets it) or the
    cost cap."""
    if ReplayRun.objects.filter(pk=run.pk, cancel_requested=True).exists():
        return ReplayStatus.CANCELLED, ""
    if totals.cost_usd >= deps.max_cost_usd:
        return ReplayStatus.CAPPED, gettext(
            "Stopped at REPLAY_MAX_COST_USD: the calls cost %(cost)s (limit %(max)s)."
        ) % {"cost": usd_text(totals.cost_usd), "max": usd_text(deps.max_cost_usd, 4)}
    return None


def replay_case(
    call: LLMCall, *, draft: OverrideTemplate, catalog: CatalogSnapshot, deps: ReplayDeps
) -> ReplayCase | str:
    """The call rebuilt with the draft, and its recorded outcome; or why it cannot be."""
    prepared = draft_call_prepare(recorded_call_of(call), draft=draft, deps=deps)
    if isinstance(prepared, str):
        return prepared
    recorded = recorded_outcome(
        call, agent=prepared.agent, context=prepared.context, catalog=catalog, config=deps.config
    )
    return ReplayCase(call=call, draft=prepared, recorded=recorded)


def draft_call_prepare(
    recorded: RecordedCall, *, draft: OverrideTemplate | None, deps: ReplayDeps
) -> DraftCall | str:
    """The request a recorded call makes with `draft` in place of its prompt (None: the
    agent's prompt as it is now, its active override or the built-in one); or why it cannot
    be made. Reads the database (the KB versions, the history of a recorded call): the run's
    thread, never a worker's."""
    snapshot = recorded.snapshot
    try:
        context = snapshot_context(snapshot, recorded=recorded)
        agent = AgentName(recorded.agent)
        if AGENT_FOR_STATE.get(context.state) != agent:
            raise SnapshotError(f"agent {agent} does not serve state {context.state}")
    except (SnapshotError, ValueError) as exc:
        return str(exc)
    invoker = build_agent_invoker(
        llm=deps.llm,
        prompts=deps.prompts,
        kb=deps.kb,
        history=recorded.history,
        recorder=MemoryRecorder(),
        clock=lambda: recorded.recorded_at,
    )
    prepared = invoker.prepare(session=context, agent=agent, override=draft)
    if draft is not None and prepared.prompt_version != draft.version:
        # The invoker serves the built-in prompt when an override does not render: replaying
        # that would not test the draft.
        return gettext(
            "The draft's text does not render for this conversation (a turn would use the "
            "built-in prompt)."
        )
    return DraftCall(
        agent=agent,
        context=context,
        prepared=prepared,
        turn=replay_turn(recorded, context.state),
    )


def replay_answer(case: DraftCall, *, catalog: CatalogSnapshot, deps: ReplayDeps) -> ReplayAnswer:
    """In a worker thread: the draft's call and the reading of its answer (no database)."""
    try:
        prepared = case.prepared
        try:
            result = deps.llm.chat(
                model=prepared.model,
                instructions=prepared.instructions,
                messages=prepared.input,
                purpose="agent",
                cache_key=prepared.cache_key,
            )
        except LLMError as exc:
            return ReplayAnswer(
                outcome=None, error=str(exc), provider_error=True, latency_ms=exc.latency_ms
            )
        recorder = MemoryRecorder()
        read = agent_answer_read(
            result.raw_response,
            agent=case.agent,
            context=case.context,
            catalog=catalog,
            turn=case.turn,
            llm=deps.llm,
            recorder=recorder,
            config=deps.config,
        )
        return ReplayAnswer(
            outcome=answer_outcome(read, before=case.context),
            raw=result.raw_response,
            calls=(result, *recorder.calls),
            latency_ms=result.latency_ms,
        )
    finally:
        # Defensive: nothing here reads the database, but a connection a thread opened would
        # outlive it.
        connections.close_all()


def answer_cost(calls: tuple[LLMCallResult, ...], *, asked: str) -> Decimal:
    """The calls' cost; one whose answer names an unlisted model is priced as `asked` (the
    run's model, which has a price: an unpriced run does not start)."""
    total = Decimal("0")
    for result in calls:
        tokens = {
            "tokens_input": result.tokens_input,
            "tokens_output": result.tokens_output,
            "tokens_cached": result.tokens_cached,
        }
        cost = call_cost_usd(result.model, **tokens)
        if cost is None:
            cost = call_cost_usd(asked, **tokens)
        if cost is None:
            raise ValueError(f"no price for {result.model!r} nor {asked!r}")
        total += cost
    return total


def _result_write(
    run: ReplayRun,
    totals: _Totals,
    *,
    call: LLMCall,
    case: ReplayCase | None,
    answer: ReplayAnswer | None,
    error: str,
) -> None:
    """One result and the run's totals, in one short transaction."""
    recorded = case.recorded if case is not None else None
    replayed = answer.outcome if answer is not None else None
    calls = answer.calls if answer is not None else ()
    cost = answer_cost(calls, asked=run.model)
    tokens = (
        sum(c.tokens_input for c in calls),
        sum(c.tokens_cached for c in calls),
        sum(c.tokens_output for c in calls),
    )
    changed = {"code": False, "state": False, "handoff": False}
    if recorded is not None and replayed is not None:
        changed = {
            "code": recorded.code != replayed.code,
            "state": recorded.state != replayed.state,
            "handoff": recorded.handoff != replayed.handoff,
        }
    totals.calls_done += 1
    totals.code_changed += changed["code"]
    totals.state_changed += changed["state"]
    totals.handoff_changed += changed["handoff"]
    if replayed is not None:
        totals.contract_errors += replayed.contract == ContractOutcome.FAILED
        totals.repaired += replayed.contract == ContractOutcome.REPAIRED
    totals.provider_errors += answer is not None and answer.provider_error
    totals.tokens_input += tokens[0]
    totals.cached_tokens += tokens[1]
    totals.tokens_output += tokens[2]
    totals.cost_usd += cost
    snapshot = call.context_snapshot or {}
    with transaction.atomic():
        ReplayResult.objects.create(
            run=run,
            llm_call=call,
            session_id=call.session_id,
            recorded_at=call.created_at,
            recorded_prompt_version=call.prompt_version or str(snapshot.get("prompt_version", "")),
            recorded_code=recorded.code if recorded else None,
            replayed_code=replayed.code if replayed else None,
            recorded_state=recorded.state if recorded else "",
            replayed_state=replayed.state if replayed else "",
            recorded_handoff=recorded.handoff if recorded else "",
            replayed_handoff=replayed.handoff if replayed else "",
            recorded_packages=list(recorded.packages) if recorded else [],
            replayed_packages=list(replayed.packages) if replayed else [],
            contract=replayed.contract if replayed else "",
            error=error or (answer.error if answer is not None else ""),
            recorded_text=recorded.text if recorded else "",
            replayed_text=replayed.text if replayed else "",
            replayed_raw=answer.raw if answer is not None else "",
            code_changed=changed["code"],
            state_changed=changed["state"],
            handoff_changed=changed["handoff"],
            tokens_input=tokens[0],
            cached_tokens=tokens[1],
            tokens_output=tokens[2],
            cost_usd=cost,
            latency_ms=answer.latency_ms if answer is not None else 0,
        )
        ReplayRun.objects.filter(pk=run.pk).update(**totals.as_fields())


def replay_runs_sweep(*, now: datetime, dispatch: Dispatch, max_running: int) -> list[int]:
    """The periodic look at every run: end FAILED the abandoned runs and those no worker
    started, then publish the runs waiting for a free slot that no ending run published (its
    worker died, or it was the command's); returns the ids of the runs it failed."""
    failed = abandoned_replay_runs_fail(now=now, older_than=REPLAY_ABANDONED_AFTER)
    failed += stuck_replay_runs_fail(now=now, older_than=REPLAY_START_TIMEOUT)
    replay_queue_advance(dispatch=dispatch, max_running=max_running, now=now)
    return failed


def abandoned_replay_runs_fail(*, now: datetime, older_than: timedelta) -> list[int]:
    """End FAILED the runs still RUNNING that started more than `older_than` ago, with a detail
    saying so, and give their slots back; returns their ids. `older_than` is longer than the
    task's time limits, so no task can still be running them: their worker died (a task
    redelivered after that leaves a RUNNING run as it is). The results and totals written so
    far are kept."""
    cutoff = now - older_than
    abandoned = ReplayRun.objects.filter(status=ReplayStatus.RUNNING, started_at__lt=cutoff)
    detail = gettext("The worker running it stopped; the results so far are kept.")
    failed = _fail_each(abandoned, status=ReplayStatus.RUNNING, detail=detail, now=now)
    for run_id in failed:
        slots_release(run_id=run_id)
        logger.warning("replay_run_abandoned", extra={"run_id": run_id})
    return failed


def abandoned_persona_runs_fail(*, now: datetime, older_than: timedelta) -> list[int]:
    """End FAILED the runs still RUNNING that started more than `older_than` ago (their worker
    died: it is longer than the task's time limits) and give their slots back."""
    detail = gettext("The worker running it stopped; the results so far are kept.")
    failed = []
    stale = PersonaRun.objects.filter(status=ReplayStatus.RUNNING, started_at__lt=now - older_than)
    for run_id in stale.values_list("pk", flat=True):
        if PersonaRun.objects.filter(pk=run_id, status=ReplayStatus.RUNNING).update(
            status=ReplayStatus.FAILED, detail=detail, finished_at=now
        ):
            slots_release(persona_run_id=run_id)
            failed.append(run_id)
            logger.warning("persona_run_abandoned", extra={"run_id": run_id})
    return failed


def stuck_replay_runs_fail(*, now: datetime, older_than: timedelta) -> list[int]:
    """End FAILED the queued runs whose task was published more than `older_than` ago and no
    worker has looked at since (a run waiting for a slot is not dispatched: it stays); returns
    their ids."""
    stuck = ReplayRun.objects.filter(status=ReplayStatus.QUEUED, dispatched_at__lt=now - older_than)
    minutes = int(older_than.total_seconds() // 60)
    detail = gettext(
        "No worker started it within %(minutes)s minutes (is a worker consuming the replays "
        "queue?); start it again."
    ) % {"minutes": minutes}
    failed = _fail_each(stuck, status=ReplayStatus.QUEUED, detail=detail, now=now)
    for run_id in failed:
        logger.warning("replay_run_not_started", extra={"run_id": run_id})
    return failed


def _fail_each(
    runs: QuerySet[ReplayRun], *, status: ReplayStatus, detail: str, now: datetime
) -> list[int]:
    failed = []
    for run in runs.only("pk", "detail"):
        notes = [note for note in (detail, run.detail) if note]
        # Conditional on the status: a run that moved on meanwhile keeps its own course.
        if ReplayRun.objects.filter(pk=run.pk, status=status).update(
            status=ReplayStatus.FAILED, detail="; ".join(notes)[:_DETAIL_CHARS], finished_at=now
        ):
            failed.append(run.pk)
    return failed


def _finish(
    run: ReplayRun,
    status: ReplayStatus,
    totals: _Totals,
    detail: str,
    *,
    deps: ReplayDeps,
    dispatch: Dispatch | None,
) -> ReplayRun:
    """The run's end: its status and totals, its slots given back, and the runs waiting for a
    slot published (`dispatch`)."""
    notes = [note for note in (detail, run.detail) if note]
    now = timezone.now()
    ReplayRun.objects.filter(pk=run.pk).update(
        status=status,
        detail="; ".join(notes)[:_DETAIL_CHARS],
        finished_at=now,
        dispatched_at=None,
        **totals.as_fields(),
    )
    slots_release(run_id=run.pk)
    if dispatch is not None:
        replay_queue_advance(dispatch=dispatch, max_running=deps.max_running, now=now)
    run.refresh_from_db()
    return run
