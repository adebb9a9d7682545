"""The use case of a session's turn: claim the lease, think, commit, until nothing is pending.

`session_process` (task ``conversations.process_session``) takes the session's lease
(`conversations.lease`); a worker that finds it taken exits — the holder drains every pending
inbound message before it releases, then looks once more, so a message that arrived while it
released is not stranded. Each turn is read (`conversations.turns.selectors`), thought through
with no DB transaction open (`conversations.turns.think`) and committed
(`conversations.turns.commit`); a HUMAN or CLOSED session's messages are only marked processed.
A session's first turn pins the active prompt versions (`Session.prompt_versions`, one read of
the three agents' overrides), the published release (`Session.release`, one read) and the
version of each active package (`Session.package_versions`, from the catalog the turn reads
anyway), written by its commit; later turns use the pinned ones. The
task's soft time limit (`deadline_errors`) ends the current turn in an ``llm_timeout`` handoff.
The phases and every failure's outcome: `conversations.turns`.
"""

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from enum import StrEnum
from uuid import UUID, uuid4

from agents.media_markers import media_handoff, media_text
from agents.rollout import rollout_overrides
from agents.sources import package_versions_of, prompt_versions_of
from agents.states import BOT_STATES, HandoffReason, SessionState
from conversations.lease import lease_claim, lease_release
from conversations.media_reading import READING_WAIT
from conversations.media_views import media_being_read, media_view_of
from conversations.models import Message
from conversations.privacy.retention import late_calls_scrub
from conversations.prometheus import turn_counted
from conversations.sending import read_receipt_for
from conversations.turns.commit import CommitOutcome, turn_commit, turn_skip
from conversations.turns.deps import PipelineConfig, PipelineDeps
from conversations.turns.result import SessionPin, Turn, turn_failure
from conversations.turns.selectors import (
    session_context,
    session_has_pending,
    session_pending_inbound,
    session_with_instance,
)
from conversations.turns.think import turn_think

logger = logging.getLogger(__name__)


class ProcessOutcome(StrEnum):
    BUSY = "busy"  # another worker holds the lease: it will drain this session
    DRAINED = "drained"  # no pending inbound message is left
    LEASE_LOST = "lease_lost"  # the lease expired and another worker took it over
    # A pending message's media is being read: the end of the reading enqueues the turn.
    AWAITING_MEDIA = "awaiting_media"


@dataclass(frozen=True, slots=True)
class ProcessReport:
    outcome: ProcessOutcome
    turns: int = 0  # committed turns (a superseded run is not counted)
    superseded: int = 0


# --- The use case -------------------------------------------------------------------------------


def _reading_awaited(pending: Sequence[Message], *, now: datetime) -> bool:
    """Whether a pending message's media is still being read (within `READING_WAIT`: a reading
    older than that was lost, and the turn goes on without it)."""
    return any(media_being_read(m) and m.created_at > now - READING_WAIT for m in pending)


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
            if _reading_awaited(pending, now=deps.clock()):
                lease_release(session_id=session_id, token=token)
                token = None
                # A reading that ended while we held the lease found it taken and its turn
                # left: look once more, and take the lease back if nothing is being read now.
                if _reading_awaited(
                    session_pending_inbound(session_id=session_id), now=deps.clock()
                ):
                    logger.info("turn_awaits_media", extra={"session_id": session_id})
                    return ProcessReport(ProcessOutcome.AWAITING_MEDIA, turns, superseded)
                token = lease_claim(session_id=session_id, now=deps.clock(), ttl=config.lease_ttl)
                if token is None:
                    return ProcessReport(ProcessOutcome.BUSY, turns, superseded)
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
                # An erasure revokes the lease of the session it anonymises.
                late_calls_scrub(session_id=session_id)
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
    """One turn: read it, think it through, commit it; a HUMAN or CLOSED session's is skipped."""
    session = session_with_instance(session_id=session_id)
    last = pending[-1]
    media = [media_view_of(m) for m in pending]
    turn = Turn(
        session_id=session_id,
        turn_id=uuid4(),
        token=token,
        state=SessionState(session.state),
        inbound_ids=tuple(m.pk for m in pending),
        last_inbound_id=last.pk,
        texts=tuple(
            m.content if v is None else media_text(v) for m, v in zip(pending, media, strict=True)
        ),
        media_handoff=media_handoff(media),
    )
    log = {"session_id": session_id, "turn_id": str(turn.turn_id), "messages": len(pending)}
    if turn.state not in BOT_STATES:
        turn_skip(turn=turn, now=deps.clock())
        logger.info("turn_skipped", extra={**log, "state": turn.state.value})
        turn_counted("skipped")
        return CommitOutcome.COMMITTED

    started = time.monotonic()
    logger.info("turn_started", extra={**log, "state": turn.state.value})
    receipt = read_receipt_for(session, last)
    if receipt is not None:
        deps.mark_read(receipt)
    context = session_context(session)
    if not context.prompt_versions:
        # The session's first turn pins the prompts and the knowledge active now; its commit
        # writes them, and every later turn of the session uses them.
        # An agent released gradually pins its candidate for the sessions in its share.
        pin = SessionPin(
            prompt_versions=prompt_versions_of(
                rollout_overrides(
                    active=deps.prompts.active_overrides(),
                    candidates=deps.prompts.rollout_candidates(),
                    session_id=session_id,
                )
            ),
            release_id=deps.prompts.live_release(),
            package_versions=package_versions_of(deps.kb.catalog().packages),
        )
        context = replace(
            context,
            prompt_versions=pin.prompt_versions,
            package_versions=pin.package_versions,
        )
        turn = replace(turn, pin=pin)
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
    turn_counted(outcome.value)
    return outcome
