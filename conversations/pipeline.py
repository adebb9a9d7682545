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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, Protocol
from uuid import UUID, uuid4

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from agents.actions import ContractError, map_action
from agents.codes import code_spec
from agents.context import InstanceInfo, SessionContext
from agents.contract import LLMResponseParseError, ParsedLLMResponse, parse_llm_response
from agents.invoker import AgentCall
from agents.llm import LLMClient, LLMError, LLMRateLimitError, LLMTimeoutError
from agents.repair import repair_llm_response
from agents.sources import (
    BUILTIN_PROMPT_VERSION,
    CallRecorder,
    KBSource,
    PromptSource,
    RuntimeSettings,
)
from agents.states import AGENT_FOR_STATE, BOT_STATES, AgentName, HandoffReason, SessionState
from conversations.commit_hooks import on_commit_call
from conversations.dispatcher import (
    Handoff,
    Next,
    Step,
    SystemEvent,
    action_name,
    dispatch,
)
from conversations.handoff import session_handoff, strategic_company_for
from conversations.lease import lease_claim, lease_release
from conversations.models import (
    SUPERSEDED,
    CrmStatus,
    DeliveryStatus,
    Direction,
    Lead,
    Message,
    Session,
)
from conversations.whatsapp.formatting import format_ai_message_for_whatsapp, split_for_whatsapp

logger = logging.getLogger(__name__)

_DETAIL_CHARS = 255


class Invoker(Protocol):
    """`agents.invoker.AgentInvoker.invoke`, the one method the pipeline needs."""

    def invoke(
        self,
        *,
        session: SessionContext,
        agent: AgentName,
        turn_id: UUID | None = None,
        message_id: int | None = None,
        current_message: str | None = None,
    ) -> AgentCall: ...


def _noop(_message_id: int) -> None:
    return None


@dataclass(frozen=True, slots=True)
class PipelineConfig:
    max_agent_hops: int = 3
    max_enrichments: int = 2
    repair_model: str = "gpt-4o-mini"
    # Longer than the task's hard time limit: a live holder never sees its lease expire.
    lease_ttl: timedelta = timedelta(seconds=180)

    @classmethod
    def from_settings(cls) -> "PipelineConfig":
        return cls(
            max_agent_hops=settings.MAX_AGENT_HOPS_PER_MESSAGE,
            max_enrichments=settings.MAX_CONTEXT_ENRICHMENTS_PER_MESSAGE,
            repair_model=settings.OPENAI_MODEL_SUMMARY,
            lease_ttl=timedelta(seconds=settings.CELERY_TASK_TIME_LIMIT + 30),
        )


@dataclass(frozen=True, slots=True)
class PipelineDeps:
    """The collaborators of a turn; the task layer wires the real ones, tests pass fakes."""

    invoker: Invoker
    # The client of the format-repair call (the invoker has its own for the agents).
    llm: LLMClient
    prompts: PromptSource
    kb: KBSource
    recorder: CallRecorder
    # Enqueue the sending of one OUTBOUND message id (called after commit, parts in order).
    send: Callable[[int], None]
    # Enqueue the operational summary of a handed-off session (called after commit).
    enqueue_summary: Callable[[int], None]
    # Mark one INBOUND message read with a typing indicator when its turn starts.
    mark_read: Callable[[int], None] = _noop
    clock: Callable[[], datetime] = timezone.now


class ProcessOutcome(StrEnum):
    BUSY = "busy"  # another worker holds the lease: it will drain this session
    DRAINED = "drained"  # no pending inbound message is left
    LEASE_LOST = "lease_lost"  # the lease expired and another worker took it over


@dataclass(frozen=True, slots=True)
class ProcessReport:
    outcome: ProcessOutcome
    turns: int = 0  # committed turns (a superseded run is not counted)
    superseded: int = 0


class CommitOutcome(StrEnum):
    COMMITTED = "committed"
    SUPERSEDED = "superseded"
    LEASE_LOST = "lease_lost"


@dataclass(frozen=True, slots=True)
class Reply:
    """The model's customer text and the answer it came from."""

    text: str
    agent: AgentName
    parsed: ParsedLLMResponse
    raw_response: str


@dataclass(slots=True)
class TurnResult:
    """A turn thought through in memory, ready to commit."""

    context: SessionContext
    # The agent whose answer decided the outcome (None: decided before any model call).
    agent: AgentName | None = None
    events: list[SystemEvent] = field(default_factory=list)
    reply: Reply | None = None  # the model's text to send (1, 4, 6, 8, 5)
    handoff: Handoff | None = None
    create_lead: bool = False
    close: bool = False
    # The offending raw answer of a failure, kept on the handoff event.
    failure_raw: str = ""

    @property
    def supersedable(self) -> bool:
        """Only a draft the model wrote for the customer gives way to a newer message."""
        return self.reply is not None


@dataclass(frozen=True, slots=True)
class _Turn:
    session_id: int
    turn_id: UUID
    token: UUID
    state: SessionState
    inbound_ids: tuple[int, ...]
    last_inbound_id: int
    # What the customer wrote this turn (searched for a strategic company's name or CNPJ).
    texts: tuple[str, ...] = ()


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
            pending = _pending_inbound(session_id)
            if not pending:
                lease_release(session_id=session_id, token=token)
                token = None
                # A message stored while we released found the lease taken and its task left:
                # look once more, and take the lease back if it is still free.
                if not _has_pending(session_id):
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


def _pending_inbound(session_id: int) -> list[Message]:
    return list(
        Message.objects.pending_inbound()
        .filter(session_id=session_id)
        .order_by(F("wa_timestamp").asc(nulls_last=True), "id")
        .only("id", "content", "wa_timestamp")
    )


def _has_pending(session_id: int) -> bool:
    return Message.objects.pending_inbound().filter(session_id=session_id).exists()


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
    turn = _Turn(
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
        # HUMAN: staff read them in admin; CLOSED: a message that raced the close. Nothing is
        # called or sent, but they must not stay pending forever.
        Message.objects.pending_inbound().filter(pk__in=turn.inbound_ids).update(
            processed_at=deps.clock()
        )
        logger.info("turn_skipped", extra={**log, "state": turn.state.value})
        return CommitOutcome.COMMITTED

    started = time.monotonic()
    logger.info("turn_started", extra={**log, "state": turn.state.value})
    deps.mark_read(turn.last_inbound_id)
    context = session_context(session)
    runtime = deps.prompts.runtime()
    try:
        result = _think(
            turn=turn,
            context=context,
            customer_document=session.customer_document,
            runtime=runtime,
            deps=deps,
            config=config,
        )
        result = _apply_strategic_rule(result, before=context, runtime=runtime)
        outcome = _commit(turn=turn, result=result, deps=deps, runtime=runtime)
    except deadline_errors:
        logger.warning("turn_deadline_exceeded", extra=log)
        result = _failure(context, HandoffReason.LLM_TIMEOUT, "task time limit exceeded")
        outcome = _commit(turn=turn, result=result, deps=deps, runtime=runtime)
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


def session_context(session: Session) -> SessionContext:
    """The session as the agents see it (a plain snapshot; the instance must be loaded)."""
    instance = session.instance
    return SessionContext(
        session_id=session.pk,
        state=SessionState(session.state),
        instance=InstanceInfo(
            name=instance.name,
            display_phone=instance.display_phone,
            brand_context=instance.brand_context,
            health_sensitive=instance.health_sensitive,
        ),
        customer_phone=session.customer_phone,
        customer_name=session.customer_name,
        segment=session.segment,
        intent=session.intent,
        service=session.service,
        technical_data=dict(session.technical_data or {}),
        registration_data=dict(session.registration_data or {}),
        loaded_packages=tuple(session.loaded_packages or ()),
        technical_extras=dict(session.technical_extras or {}),
        registration_extras=dict(session.registration_extras or {}),
        confirmation_data=(
            dict(session.confirmation_data) if session.confirmation_data is not None else None
        ),
    )


# --- Think: agents, parse, repair, validate, dispatch (no writes but LLMCall rows) -------------


_REASON_FOR_ERROR: tuple[tuple[type[LLMError], HandoffReason], ...] = (
    (LLMTimeoutError, HandoffReason.LLM_TIMEOUT),
    (LLMRateLimitError, HandoffReason.LLM_RATE_LIMITED),
)


def handoff_reason_for(error: LLMError) -> HandoffReason:
    for kind, reason in _REASON_FOR_ERROR:
        if isinstance(error, kind):
            return reason
    return HandoffReason.LLM_PROVIDER_ERROR


def _failure(
    context: SessionContext,
    reason: HandoffReason,
    detail: str,
    *,
    agent: AgentName | None = None,
    events: Sequence[SystemEvent] = (),
    raw: str = "",
) -> TurnResult:
    return TurnResult(
        context=context,
        agent=agent,
        events=list(events),
        handoff=Handoff(reason, detail=detail[:_DETAIL_CHARS]),
        failure_raw=raw,
    )


def _think(
    *,
    turn: _Turn,
    context: SessionContext,
    customer_document: str,
    runtime: RuntimeSettings,
    deps: PipelineDeps,
    config: PipelineConfig,
) -> TurnResult:
    company = strategic_company_for(
        runtime,
        phone=context.customer_phone,
        document=customer_document,
        texts=(*turn.texts, str(context.registration_data.get("empresa", ""))),
    )
    if company is not None:
        # Before any model call: a strategic company's contact always goes to a human.
        return TurnResult(
            context=context, handoff=Handoff(HandoffReason.STRATEGIC_COMPANY, company.name)
        )
    catalog = deps.kb.catalog()
    agent = AGENT_FOR_STATE[context.state]
    events: list[SystemEvent] = []
    hops = enrichments = 0
    while True:
        log = {"session_id": turn.session_id, "turn_id": str(turn.turn_id), "agent": agent.value}
        try:
            # The turn's messages are stored already: the history carries them all, so no
            # `current_message` is appended (it would repeat one when arrival and WhatsApp
            # timestamps disagree).
            call = deps.invoker.invoke(
                session=context, agent=agent, turn_id=turn.turn_id, message_id=turn.last_inbound_id
            )
        except LLMError as exc:
            reason = handoff_reason_for(exc)
            logger.warning(
                "llm_failure_handoff", extra={**log, "reason": reason.value, "error": str(exc)}
            )
            return _failure(context, reason, f"{agent}: {exc}", agent=agent, events=events)
        raw = call.result.raw_response
        read = _parse_or_repair(raw, agent=agent, turn=turn, deps=deps, config=config, log=log)
        if isinstance(read, str):
            logger.warning(
                "llm_failure_handoff",
                extra={**log, "reason": HandoffReason.LLM_INVALID_JSON.value, "error": read},
            )
            return _failure(
                context,
                HandoffReason.LLM_INVALID_JSON,
                f"{agent}: {read}",
                agent=agent,
                events=events,
                raw=raw,
            )
        # From here on `raw` is the text that parsed: the repaired one after a repair.
        parsed, raw = read
        try:
            action = map_action(parsed, agent=agent, context=context, catalog=catalog)
        except ContractError as exc:
            logger.warning(
                "llm_failure_handoff",
                extra={
                    **log,
                    "reason": exc.reason.value,
                    "problem": exc.problem,
                    "error": str(exc),
                },
            )
            return _failure(
                context, exc.reason, f"{agent}: {exc}", agent=agent, events=events, raw=raw
            )
        if action.ignored_keys:
            logger.info("llm_response_ignored_keys", extra={**log, "keys": action.ignored_keys})
        step = dispatch(action, context=context, raw_response=raw)
        if step.next is Next.INVOKE:
            if hops >= config.max_agent_hops:
                logger.warning("llm_failure_handoff", extra={**log, "reason": "routing_loop"})
                return _failure(
                    context,
                    HandoffReason.ROUTING_LOOP,
                    f"{agent}: code {action.code.value} after {hops} agent changes in one turn",
                    agent=agent,
                    events=events,
                    raw=raw,
                )
            hops += 1
        elif step.next is Next.ENRICH:
            if enrichments >= config.max_enrichments:
                logger.warning("llm_failure_handoff", extra={**log, "reason": "enrichment_limit"})
                return _failure(
                    context,
                    HandoffReason.ENRICHMENT_LIMIT,
                    f"{agent}: code 99 after {enrichments} package loads in one turn",
                    agent=agent,
                    events=events,
                    raw=raw,
                )
            enrichments += 1
        events.extend(step.events)
        context = step.context
        if step.next in (Next.INVOKE, Next.ENRICH):
            assert step.agent is not None
            agent = step.agent
            continue
        return _finish(step, events, Reply(step.reply, agent, parsed, raw))


def _finish(step: Step, events: list[SystemEvent], reply: Reply) -> TurnResult:
    return TurnResult(
        context=step.context,
        agent=reply.agent,
        events=events,
        reply=reply if step.reply else None,
        handoff=step.handoff,
        create_lead=step.create_lead,
        close=step.next is Next.CLOSE,
    )


def _parse_or_repair(
    raw: str,
    *,
    agent: AgentName,
    turn: _Turn,
    deps: PipelineDeps,
    config: PipelineConfig,
    log: Mapping[str, Any],
) -> tuple[ParsedLLMResponse, str] | str:
    """The parsed answer and the text it came from, after at most one repair call; or why it
    could not be read."""
    try:
        return parse_llm_response(raw), raw
    except LLMResponseParseError as exc:
        logger.warning("llm_response_parse_retry", extra={**log, "error": str(exc)})
        parse_error = str(exc)
    record: dict[str, Any] = {
        "session_id": turn.session_id,
        "agent": agent,
        "purpose": "repair",
        "prompt_version": BUILTIN_PROMPT_VERSION,
        "context_snapshot": None,
        "turn_id": turn.turn_id,
        "message_id": turn.last_inbound_id,
    }
    try:
        repair = repair_llm_response(llm=deps.llm, model=config.repair_model, raw_response=raw)
    except LLMError as exc:
        deps.recorder.record(
            model=config.repair_model, result=None, error=exc, raw_response="", **record
        )
        logger.warning("llm_response_repair_unavailable", extra={**log, "error": str(exc)})
        return f"{parse_error}; repair unavailable: {exc}"
    deps.recorder.record(
        model=repair.call.model,
        result=repair.call,
        error=None,
        raw_response=repair.call.raw_response,
        **record,
    )
    if repair.parsed is None:
        logger.warning("llm_response_repair_failed", extra={**log, "error": repair.error})
        return f"{parse_error}; {repair.error}"
    logger.info("llm_response_repair_success", extra=dict(log))
    return repair.parsed, repair.call.raw_response


def _apply_strategic_rule(
    result: TurnResult, *, before: SessionContext, runtime: RuntimeSettings
) -> TurnResult:
    """A CNPJ or company name given in this turn that is a strategic company's hands off."""
    data, old = result.context.registration_data, before.registration_data
    document, name = (
        str(data.get(key, "")) if data.get(key, "") != old.get(key, "") else ""
        for key in ("documento", "empresa")
    )
    if result.handoff is not None or not (document or name):
        return result
    company = strategic_company_for(runtime, phone="", document=document, texts=(name,))
    if company is None:
        return result
    return replace(
        result,
        reply=None,
        close=False,
        create_lead=False,
        handoff=Handoff(HandoffReason.STRATEGIC_COMPANY, company.name),
    )


# --- Commit ---------------------------------------------------------------------------------------


def _commit(
    *, turn: _Turn, result: TurnResult, deps: PipelineDeps, runtime: RuntimeSettings
) -> CommitOutcome:
    now = deps.clock()
    log = {"session_id": turn.session_id, "turn_id": str(turn.turn_id)}
    with transaction.atomic():
        session = (
            Session.objects.select_for_update(no_key=_no_key_lock())
            .only("id", "state", "lease_token")
            .get(pk=turn.session_id)
        )
        if session.lease_token != turn.token:
            logger.warning("session_lease_lost", extra=log)
            return CommitOutcome.LEASE_LOST
        newer = (
            Message.objects.pending_inbound()
            .filter(session_id=turn.session_id)
            .exclude(pk__in=turn.inbound_ids)
            .exists()
        )
        state_changed = session.state != turn.state.value
        if result.supersedable and (newer or state_changed):
            assert result.reply is not None
            _store_draft(turn, result.reply, now)
            logger.info(
                "turn_superseded",
                extra={**log, "newer_inbound": newer, "state_changed": state_changed},
            )
            return CommitOutcome.SUPERSEDED
        if state_changed:
            # Staff took the session (or it was closed) while a failure was being handled: the
            # session is theirs now; the messages were answered by them.
            _mark_processed(turn, now)
            logger.info("turn_discarded", extra={**log, "state": session.state})
            return CommitOutcome.COMMITTED
        _write_turn(
            turn, result, now, runtime, send=deps.send, enqueue_summary=deps.enqueue_summary
        )
    return CommitOutcome.COMMITTED


def _no_key_lock() -> bool:
    # FOR NO KEY UPDATE does not block the webhook inserting messages of this session (their
    # foreign key takes FOR KEY SHARE on the row); only PostgreSQL has it.
    return bool(connection.features.has_select_for_no_key_update)


def _mark_processed(turn: _Turn, now: datetime) -> None:
    Message.objects.pending_inbound().filter(pk__in=turn.inbound_ids).update(
        processed_at=now, turn_id=turn.turn_id
    )


def _store_draft(turn: _Turn, reply: Reply, now: datetime) -> None:
    Message.objects.create(
        session_id=turn.session_id,
        direction=Direction.OUTBOUND,
        message_type="text",
        agent=reply.agent.value,
        content=format_ai_message_for_whatsapp(reply.text),
        raw_response=reply.raw_response,
        json_part=reply.parsed.json_part,
        code=reply.parsed.s,
        action=action_name_of(reply.parsed.s),
        error=SUPERSEDED,
        turn_id=turn.turn_id,
        created_at=now,
    )


def action_name_of(code: int) -> str:
    spec = code_spec(code)
    return action_name(spec.code) if spec else ""


def _session_fields(result: TurnResult, now: datetime) -> dict[str, Any]:
    """The session as the turn left it (a handoff's fields are `session_handoff`'s)."""
    context = result.context
    fields: dict[str, Any] = {
        "state": context.state.value,
        "segment": context.segment,
        "intent": context.intent,
        "service": context.service,
        "technical_data": dict(context.technical_data),
        "technical_extras": dict(context.technical_extras),
        "registration_data": dict(context.registration_data),
        "registration_extras": dict(context.registration_extras),
        "confirmation_data": (
            dict(context.confirmation_data) if context.confirmation_data is not None else None
        ),
        "loaded_packages": list(context.loaded_packages),
        "customer_name": context.customer_name[:200],
        "last_message_at": now,
    }
    document = str(context.registration_data.get("documento", ""))
    if document:
        fields["customer_document"] = document
    if result.close:
        fields["closed_at"] = now
    return fields


def failure_handoff_write(
    *,
    session: Session,
    token: UUID,
    inbound_ids: Sequence[int],
    reason: HandoffReason,
    detail: str,
    now: datetime,
    runtime: RuntimeSettings,
    send: Callable[[int], None],
    enqueue_summary: Callable[[int], None],
) -> list[int]:
    """Write a handoff decided outside a model turn exactly as a failed turn writes it.

    For callers that hold the session's lease and its row lock (the repeated-failure sweep):
    `session_handoff` with the session's fields as a turn writes them, the inbound messages
    marked processed; the text is sent and the summary enqueued after commit. Returns the
    OUTBOUND part ids, in sending order.
    """
    turn = _Turn(
        session_id=session.pk,
        turn_id=uuid4(),
        token=token,
        state=SessionState(session.state),
        inbound_ids=tuple(inbound_ids),
        last_inbound_id=max(inbound_ids),
    )
    result = _failure(session_context(session), reason, detail)
    return _write_turn(turn, result, now, runtime, send=send, enqueue_summary=enqueue_summary)


def _write_turn(
    turn: _Turn,
    result: TurnResult,
    now: datetime,
    runtime: RuntimeSettings,
    *,
    send: Callable[[int], None],
    enqueue_summary: Callable[[int], None],
) -> list[int]:
    """Write everything the turn decided, send its parts after commit; their ids, in order.

    One UPDATE of the session and one INSERT of its rows either way: a handoff's go through
    `session_handoff` with the turn's own (which also registers the sends and the summary).
    """
    fields = _session_fields(result, now)
    events = _event_rows(turn, result.events, now)
    replies = _reply_rows(turn, result.reply, now) if result.reply is not None else []
    if result.handoff is not None:
        written = session_handoff(
            session_id=turn.session_id,
            reason=result.handoff.reason,
            detail=result.handoff.detail,
            motive=result.handoff.motive,
            now=now,
            # The fixed text unless the model wrote this handoff's message (code 5).
            fixed_text=result.reply is None,
            runtime=runtime,
            send=send,
            enqueue_summary=enqueue_summary,
            agent=result.agent.value if result.agent else "",
            raw_response=result.failure_raw,
            turn_id=turn.turn_id,
            fields=fields,
            rows_before=events,
            rows_after=replies,
        )
        # The turn runs in a bot state and its commit checked that under the row lock.
        assert written is not None, "a turn hands off a session in a bot state"
        part_ids = list(written.part_ids)
    else:
        assert result.reply is not None, "a turn without a reply is a handoff"
        Session.objects.filter(pk=turn.session_id).update(**fields)
        created = Message.objects.bulk_create([*events, *replies])
        part_ids = [m.pk for m in created if m.direction == Direction.OUTBOUND]
        # One hook each, every one attempted whatever the others do (conversations.commit_hooks).
        for part_id in part_ids:
            on_commit_call(send, part_id)
    if result.create_lead:
        Lead.objects.update_or_create(
            session_id=turn.session_id,
            defaults={"data": lead_data(result.context), "crm_status": CrmStatus.PENDING},
        )
    _mark_processed(turn, now)
    return part_ids


def _event_rows(turn: _Turn, events: Sequence[SystemEvent], now: datetime) -> list[Message]:
    return [
        Message(
            session_id=turn.session_id,
            direction=Direction.SYSTEM,
            message_type=event.event,
            agent=event.agent,
            code=event.code,
            action=event.action,
            json_part=dict(event.details) or None,
            raw_response=event.raw_response,
            turn_id=turn.turn_id,
            created_at=now,
        )
        for event in events
    ]


def _reply_rows(turn: _Turn, reply: Reply, now: datetime) -> list[Message]:
    """The model's message as OUTBOUND parts (a handoff's fixed text is `session_handoff`'s)."""
    parts = split_for_whatsapp(format_ai_message_for_whatsapp(reply.text))
    return [
        Message(
            session_id=turn.session_id,
            direction=Direction.OUTBOUND,
            message_type="text",
            content=part,
            part_index=index,
            turn_id=turn.turn_id,
            delivery_status=DeliveryStatus.PENDING,
            created_at=now,
            agent=reply.agent.value,
            code=reply.parsed.s,
            action=action_name_of(reply.parsed.s),
            **(
                {"raw_response": reply.raw_response, "json_part": reply.parsed.json_part}
                if index == 0
                else {}
            ),
        )
        for index, part in enumerate(parts)
    ]


def lead_data(context: SessionContext) -> dict[str, Any]:
    """The snapshot of a confirmed request, in the contract's field names.

    The registration is the one the code-4 message showed (the dispatcher accepts a code 5 only
    when the session's data still equals it).
    """
    confirmed = context.confirmation_data
    return {
        "nome_cliente": context.customer_name,
        "telefone": context.customer_phone,
        "segmento": context.segment,
        "intencao": context.intent,
        "servico": context.service,
        "qualification_data": dict(context.technical_data),
        "cadastro": dict(confirmed if confirmed is not None else context.registration_data),
    }
