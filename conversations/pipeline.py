"""The message pipeline: one session's pending inbound messages → the agents → one answer.

`session_process` is the use case behind the ``conversations.process_session`` task (DESIGN.md §4
steps 2-7, §7, §8). It runs in three phases per turn, and holds no DB transaction across a model
call:

1. **Claim** the session's lease (`conversations.lease`); a worker that finds it taken exits —
   the holder drains every pending inbound message before it releases, then looks once more, so a
   message that arrived while it released is not stranded.
2. **Think** (no writes but the `LLMCall` rows): the pending inbound messages, ordered by WhatsApp
   timestamp then id, are one turn. A HUMAN or CLOSED session only marks them processed. A
   strategic company's contact is handed off before any model call. Otherwise the agent of the
   state is invoked; its answer is parsed strictly, with exactly one format-repair call on a parse
   error; the parsed answer is validated into an `Action` (`agents.actions`) and dispatched
   (`conversations.dispatcher`) on an in-memory copy of the session. Codes 2, 3 and 7 invoke the
   next agent at once (at most `MAX_AGENT_HOPS_PER_MESSAGE` hops, else ``routing_loop``); code 99
   loads packages and invokes the same agent again (at most
   `MAX_CONTEXT_ENRICHMENTS_PER_MESSAGE` times, else ``enrichment_limit``).
3. **Commit**, in one short transaction that re-reads the session under a row lock: if the lease
   is no longer ours, nothing is written; if a newer inbound message arrived meanwhile (or staff
   took the session), the model's draft is stored with ``error="superseded"``, not sent, and the
   turn runs again with every pending message; otherwise the session fields, the SYSTEM events,
   the lead (code 5), the OUTBOUND parts and ``processed_at`` of the turn's messages are written
   together, and the parts are sent — and the summary enqueued on a handoff — after commit. A
   handoff is written by `conversations.handoff.session_handoff`, in the same statements.

Outcomes of every failure (each a handoff to HUMAN with the fixed text, never the model's):
parse error not repaired → ``llm_invalid_json``; invalid contract → ``llm_invalid_contract``;
unknown or inactive package → ``unknown_package``; too many hops/enrichments → ``routing_loop`` /
``enrichment_limit``; `LLMTimeoutError` → ``llm_timeout``; `LLMRateLimitError` →
``llm_rate_limited``; any other `LLMError` → ``llm_provider_error``; the task's soft time limit
→ ``llm_timeout``. A handoff or a failure is committed even when a newer message arrived (the
newer message then finds the session in HUMAN); only a draft the model wrote for the customer is
superseded.
"""

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from uuid import UUID, uuid4

from agents.states import BOT_STATES, HandoffReason, SessionState
from conversations.lease import lease_claim, lease_release
from conversations.models import (
    Message,
    Session,
)
from conversations.turns.commit import CommitOutcome, turn_commit, turn_skip
from conversations.turns.deps import PipelineConfig, PipelineDeps
from conversations.turns.result import Turn, turn_failure
from conversations.turns.selectors import (
    session_context,
    session_has_pending,
    session_pending_inbound,
)
from conversations.turns.think import turn_think

logger = logging.getLogger(__name__)


class ProcessOutcome(StrEnum):
    BUSY = "busy"  # another worker holds the lease: it will drain this session
    DRAINED = "drained"  # no pending inbound message is left
    LEASE_LOST = "lease_lost"  # the lease expired and another worker took it over


@dataclass(frozen=True, slots=True)
class ProcessReport:
    outcome: ProcessOutcome
    turns: int = 0  # committed turns (a superseded run is not counted)
    superseded: int = 0


# --- The use case -------------------------------------------------------------------------------


def session_process(
    *,
    session_id: int,
    deps: PipelineDeps,
    config: PipelineConfig,
    deadline_errors: tuple[type[BaseException], ...] = (),
) -> ProcessReport:
    """Answer every pending inbound message of the session (see the module docstring).

    `deadline_errors`: exceptions that mean "out of time" (Celery's `SoftTimeLimitExceeded`):
    the current turn ends in an ``llm_timeout`` handoff and the lease is released.
    """
    token = lease_claim(session_id=session_id, now=deps.clock(), ttl=config.lease_ttl)
    if token is None:
        logger.info("session_lease_busy", extra={"session_id": session_id})
        return ProcessReport(ProcessOutcome.BUSY)
    turns = superseded = 0
    try:
        while True:
            pending = session_pending_inbound(session_id=session_id)
            if not pending:
                lease_release(session_id=session_id, token=token)
                token = None
                # A message stored while we released found the lease taken and its task left:
                # look once more, and take the lease back if it is still free.
                if not session_has_pending(session_id=session_id):
                    return ProcessReport(ProcessOutcome.DRAINED, turns, superseded)
                token = lease_claim(session_id=session_id, now=deps.clock(), ttl=config.lease_ttl)
                if token is None:
                    return ProcessReport(ProcessOutcome.DRAINED, turns, superseded)
                continue
            outcome = _process_turn(
                session_id=session_id,
                token=token,
                pending=pending,
                deps=deps,
                config=config,
                deadline_errors=deadline_errors,
            )
            if outcome is CommitOutcome.LEASE_LOST:
                token = None
                return ProcessReport(ProcessOutcome.LEASE_LOST, turns, superseded)
            if outcome is CommitOutcome.SUPERSEDED:
                superseded += 1
            else:
                turns += 1
    finally:
        if token is not None:
            lease_release(session_id=session_id, token=token)


def _process_turn(
    *,
    session_id: int,
    token: UUID,
    pending: Sequence[Message],
    deps: PipelineDeps,
    config: PipelineConfig,
    deadline_errors: tuple[type[BaseException], ...],
) -> CommitOutcome:
    session = Session.objects.select_related("instance").get(pk=session_id)
    last = pending[-1]
    turn = Turn(
        session_id=session_id,
        turn_id=uuid4(),
        token=token,
        state=SessionState(session.state),
        inbound_ids=tuple(m.pk for m in pending),
        last_inbound_id=last.pk,
        texts=tuple(m.content for m in pending),
    )
    log = {"session_id": session_id, "turn_id": str(turn.turn_id), "messages": len(pending)}
    if turn.state not in BOT_STATES:
        turn_skip(turn=turn, now=deps.clock())
        logger.info("turn_skipped", extra={**log, "state": turn.state.value})
        return CommitOutcome.COMMITTED

    started = time.monotonic()
    logger.info("turn_started", extra={**log, "state": turn.state.value})
    deps.mark_read(turn.last_inbound_id)
    context = session_context(session)
    runtime = deps.prompts.runtime()
    try:
        result = turn_think(
            turn=turn,
            context=context,
            customer_document=session.customer_document,
            runtime=runtime,
            deps=deps,
            config=config,
        )
        outcome = turn_commit(turn=turn, result=result, deps=deps, runtime=runtime)
    except deadline_errors:
        logger.warning("turn_deadline_exceeded", extra=log)
        result = turn_failure(context, HandoffReason.LLM_TIMEOUT, "task time limit exceeded")
        outcome = turn_commit(turn=turn, result=result, deps=deps, runtime=runtime)
    logger.info(
        "turn_finished",
        extra={
            **log,
            "outcome": outcome.value,
            "state": result.context.state.value,
            "handoff_reason": result.handoff.reason.value if result.handoff else "",
            "duration_ms": int((time.monotonic() - started) * 1000),
        },
    )
    return outcome
