"""Think a turn through in memory: agents, parse, repair, validate, dispatch, the strategic rule.

No writes but the `LLMCall` rows (the invoker's and the repair's recorder). A strategic
company's contact is handed off before any model call. Otherwise the agent of the state is
invoked; its answer is parsed strictly, with exactly one format-repair call on a parse error;
the parsed answer is validated into an `Action` (`agents.actions`) and dispatched
(`conversations.dispatcher`) on an in-memory copy of the session. Codes 2, 3 and 7 invoke the
next agent at once (at most `PipelineConfig.max_agent_hops` hops, else ``routing_loop``); code
99 loads packages and invokes the same agent again (at most `max_enrichments` times, else
``enrichment_limit``). A CNPJ or company name the turn collected that is a strategic company's
hands off instead of the reply.

Every way the agents can fail is an `AgentStop` (the reason, the detail, the raw answer): the loop
returns it and `turn_think` turns it into the failure's `TurnResult` in one place.
"""

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from agents.actions import Action, ContractError, map_action
from agents.context import CatalogSnapshot, SessionContext
from agents.contract import LLMResponseParseError, ParsedLLMResponse, parse_llm_response
from agents.invoker import AgentCall
from agents.llm import LLMClient, LLMError, LLMRateLimitError, LLMTimeoutError
from agents.repair import repair_llm_response
from agents.sources import BUILTIN_PROMPT_VERSION, CallRecord, CallRecorder, RuntimeSettings
from agents.states import AGENT_FOR_STATE, AgentName, HandoffReason
from conversations.dispatcher import Handoff, Next, Step, SystemEvent, dispatch
from conversations.handoff import strategic_company_for
from conversations.turns.deps import PipelineConfig, PipelineDeps
from conversations.turns.result import Reply, Turn, TurnResult, turn_failure

logger = logging.getLogger(__name__)

# The steps after which the turn calls an agent again (the next one, or the same one enriched).
_CALL_AGAIN = (Next.INVOKE, Next.ENRICH)

_REASON_FOR_ERROR: tuple[tuple[type[LLMError], HandoffReason], ...] = (
    (LLMTimeoutError, HandoffReason.LLM_TIMEOUT),
    (LLMRateLimitError, HandoffReason.LLM_RATE_LIMITED),
)


def handoff_reason_for(error: LLMError) -> HandoffReason:
    for kind, reason in _REASON_FOR_ERROR:
        if isinstance(error, kind):
            return reason
    return HandoffReason.LLM_PROVIDER_ERROR


def turn_think(
    *,
    turn: Turn,
    context: SessionContext,
    customer_document: str,
    runtime: RuntimeSettings,
    deps: PipelineDeps,
    config: PipelineConfig,
) -> TurnResult:
    """What the turn decides (see the module docstring); nothing is written but LLM calls."""
    company = strategic_company_for(
        runtime,
        phone=context.customer_phone,
        document=customer_document,
        texts=(*turn.texts, str(context.registration_data.get("empresa", ""))),
    )
    if company is not None:
        # Before any model call: a strategic company's contact always goes to a human.
        result = TurnResult(
            context=context, handoff=Handoff(HandoffReason.STRATEGIC_COMPANY, company.name)
        )
    elif turn.media_handoff is not None:
        # Nothing the bot could read (only media, or an audio it could not transcribe): a
        # person looks at it, instead of a model answering blind.
        result = TurnResult(context=context, handoff=Handoff(turn.media_handoff))
    else:
        result = _agents_answer(turn=turn, context=context, deps=deps, config=config)
    return _apply_strategic_rule(result, before=context, runtime=runtime)


# --- The agents' loop ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AgentStop:
    """Why the agents' loop hands the session off instead of answering (`agent_answer_read`)."""

    reason: HandoffReason
    detail: str  # after the agent's name
    raw: str = ""  # the offending answer, kept on the handoff event
    # Logged with ``llm_failure_handoff`` after the reason.
    log: Mapping[str, Any] = field(default_factory=dict)
    # The answer as parsed, when it parsed but broke the contract (the replay shows its code).
    parsed: ParsedLLMResponse | None = None


@dataclass(frozen=True, slots=True)
class AgentAnswer:
    """One agent's answer, read, validated and dispatched (`agent_answer_read`)."""

    action: Action
    step: Step
    parsed: ParsedLLMResponse
    raw: str  # the text that parsed: the repaired one after a repair
    repaired: bool = False  # the answer parsed only after the format-repair call


@dataclass(slots=True)
class _Loop:
    """Where the turn is: the agent to call, the session so far, the events, the counters."""

    agent: AgentName
    context: SessionContext
    events: list[SystemEvent] = field(default_factory=list)
    hops: int = 0
    enrichments: int = 0


def _agents_answer(
    *, turn: Turn, context: SessionContext, deps: PipelineDeps, config: PipelineConfig
) -> TurnResult:
    """Invoke the state's agent and follow its answers to the turn's result."""
    catalog = deps.kb.catalog()
    loop = _Loop(agent=AGENT_FOR_STATE[context.state], context=context)
    outcome = _follow(loop, turn=turn, catalog=catalog, deps=deps, config=config)
    if isinstance(outcome, AgentStop):
        return _stopped(loop, outcome, turn=turn)
    return _finish(outcome, loop)


def _follow(
    loop: _Loop,
    *,
    turn: Turn,
    catalog: CatalogSnapshot,
    deps: PipelineDeps,
    config: PipelineConfig,
) -> AgentAnswer | AgentStop:
    """Call agents until one answers the customer or ends the turn; or why the turn stops."""
    while True:
        answer = _agent_answer(loop, turn=turn, catalog=catalog, deps=deps, config=config)
        if isinstance(answer, AgentStop) or answer.step.next not in _CALL_AGAIN:
            return answer
        stop = _over_limit(loop, answer, config)
        if stop is not None:
            return stop
        _advance(loop, answer.step)


def _agent_answer(
    loop: _Loop,
    *,
    turn: Turn,
    catalog: CatalogSnapshot,
    deps: PipelineDeps,
    config: PipelineConfig,
) -> AgentAnswer | AgentStop:
    """Call `loop.agent` once and read, validate and dispatch its answer."""
    call = _invoke(loop, turn=turn, deps=deps)
    if isinstance(call, AgentStop):
        return call
    return agent_answer_read(
        call.result.raw_response,
        agent=loop.agent,
        context=loop.context,
        catalog=catalog,
        turn=turn,
        llm=deps.llm,
        recorder=deps.recorder,
        config=config,
    )


def agent_answer_read(
    raw: str,
    *,
    agent: AgentName,
    context: SessionContext,
    catalog: CatalogSnapshot,
    turn: Turn,
    llm: LLMClient,
    recorder: CallRecorder,
    config: PipelineConfig,
) -> AgentAnswer | AgentStop:
    """Read one raw answer of `agent` exactly as a turn does: parse it strictly (one
    format-repair call through `llm` on a parse error, recorded through `recorder`), validate it
    into an `Action` and dispatch it on `context` (in memory); or why the turn would stop.

    The replay of a draft prompt (`governance.replay`) reads its answers, and the recorded ones,
    through this same function.
    """
    log = _log_fields(turn, agent)
    read = _parse_or_repair(
        raw, agent=agent, turn=turn, llm=llm, recorder=recorder, config=config, log=log
    )
    if isinstance(read, str):
        return AgentStop(HandoffReason.LLM_INVALID_JSON, read, raw=raw, log={"error": read})
    parsed, repaired_raw, repaired = read
    action = _validate(parsed, repaired_raw, agent=agent, context=context, catalog=catalog)
    if isinstance(action, AgentStop):
        return replace(action, parsed=parsed)
    if action.ignored_keys:
        logger.info("llm_response_ignored_keys", extra={**log, "keys": action.ignored_keys})
    step = dispatch(action, context=context, raw_response=repaired_raw)
    return AgentAnswer(
        action=action,
        step=step,
        parsed=parsed,
        raw=repaired_raw,
        repaired=repaired,
    )


def _invoke(loop: _Loop, *, turn: Turn, deps: PipelineDeps) -> AgentCall | AgentStop:
    try:
        # The turn's messages are stored already: the history carries them all, so no
        # `current_message` is appended (it would repeat one when arrival and WhatsApp
        # timestamps disagree).
        return deps.invoker.invoke(
            session=loop.context,
            agent=loop.agent,
            turn_id=turn.turn_id,
            message_id=turn.last_inbound_id,
        )
    except LLMError as exc:
        return AgentStop(handoff_reason_for(exc), str(exc), log={"error": str(exc)})


def _validate(
    parsed: ParsedLLMResponse,
    raw: str,
    *,
    agent: AgentName,
    context: SessionContext,
    catalog: CatalogSnapshot,
) -> Action | AgentStop:
    try:
        return map_action(parsed, agent=agent, context=context, catalog=catalog)
    except ContractError as exc:
        return AgentStop(
            exc.reason, str(exc), raw=raw, log={"problem": exc.problem, "error": str(exc)}
        )


def _over_limit(loop: _Loop, answer: AgentAnswer, config: PipelineConfig) -> AgentStop | None:
    """Why another call would be one too many in this turn (None: it is allowed)."""
    if answer.step.next is Next.INVOKE and loop.hops >= config.max_agent_hops:
        return AgentStop(
            HandoffReason.ROUTING_LOOP,
            f"code {answer.action.code.value} after {loop.hops} agent changes in one turn",
            raw=answer.raw,
        )
    if answer.step.next is Next.ENRICH and loop.enrichments >= config.max_enrichments:
        return AgentStop(
            HandoffReason.ENRICHMENT_LIMIT,
            f"code 99 after {loop.enrichments} package loads in one turn",
            raw=answer.raw,
        )
    return None


def _advance(loop: _Loop, step: Step) -> None:
    """Take the step: the session and events it produced, and the agent to call next."""
    if step.next is Next.INVOKE:
        loop.hops += 1
    else:
        loop.enrichments += 1
    loop.events.extend(step.events)
    loop.context = step.context
    assert step.agent is not None
    loop.agent = step.agent


def _finish(answer: AgentAnswer, loop: _Loop) -> TurnResult:
    step = answer.step
    reply = Reply(step.reply, loop.agent, answer.parsed, answer.raw, options=step.options)
    return TurnResult(
        context=step.context,
        agent=reply.agent,
        events=[*loop.events, *step.events],
        reply=reply if step.reply else None,
        handoff=step.handoff,
        create_lead=step.create_lead,
        close=step.next is Next.CLOSE,
    )


def _stopped(loop: _Loop, stop: AgentStop, *, turn: Turn) -> TurnResult:
    """The failure's result, with what the turn had found before the failing answer."""
    logger.warning(
        "llm_failure_handoff",
        extra={**_log_fields(turn, loop.agent), "reason": stop.reason.value, **stop.log},
    )
    return turn_failure(
        loop.context,
        stop.reason,
        f"{loop.agent}: {stop.detail}",
        agent=loop.agent,
        events=loop.events,
        raw=stop.raw,
    )


def _log_fields(turn: Turn, agent: AgentName) -> dict[str, Any]:
    return {"session_id": turn.session_id, "turn_id": str(turn.turn_id), "agent": agent.value}


# --- Parse and repair ---------------------------------------------------------------------------


def _parse_or_repair(
    raw: str,
    *,
    agent: AgentName,
    turn: Turn,
    llm: LLMClient,
    recorder: CallRecorder,
    config: PipelineConfig,
    log: Mapping[str, Any],
) -> tuple[ParsedLLMResponse, str, bool] | str:
    """The parsed answer, the text it came from and whether a repair call made it parse (at
    most one); or why it could not be read."""
    try:
        return parse_llm_response(raw), raw, False
    except LLMResponseParseError as exc:
        logger.warning("llm_response_parse_retry", extra={**log, "error": str(exc)})
        parse_error = str(exc)
    call = partial(
        CallRecord,
        session_id=turn.session_id,
        agent=agent,
        purpose="repair",
        prompt_version=BUILTIN_PROMPT_VERSION,
        turn_id=turn.turn_id,
        message_id=turn.last_inbound_id,
    )
    try:
        repair = repair_llm_response(llm=llm, model=config.repair_model, raw_response=raw)
    except LLMError as exc:
        recorder.record(call(model=config.repair_model, error=exc))
        logger.warning("llm_response_repair_unavailable", extra={**log, "error": str(exc)})
        return f"{parse_error}; repair unavailable: {exc}"
    recorder.record(
        call(model=repair.call.model, result=repair.call, raw_response=repair.call.raw_response)
    )
    if repair.parsed is None:
        logger.warning("llm_response_repair_failed", extra={**log, "error": repair.error})
        return f"{parse_error}; {repair.error}"
    logger.info("llm_response_repair_success", extra=dict(log))
    return repair.parsed, repair.call.raw_response, True


# --- The strategic rule, after the agents ---------------------------------------------------------


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
