"""A recorded agent call as the replay rebuilds it: the session it saw, its history, the KB
package versions it was given, and what its own answer did.

Everything here reads the database or is pure; nothing writes. `conversations.models.LLMCall`
keeps the session context of each agent call (`agents.invoker.context_snapshot`): the replay
builds the same request from it with another prompt text, and reads the recorded answer (and its
format repair, if the turn made one) through the same parse, repair, validation and dispatch as
a turn (`conversations.turns.think.agent_answer_read`) — the repair answered from the recorded
repair call, not the model.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID, uuid4

from agents.context import CatalogSnapshot, InstanceInfo, SessionContext
from agents.contract import LLMResponseParseError, parse_llm_response
from agents.llm import (
    CallPurpose,
    ChatMessage,
    LLMCallResult,
    LLMProviderError,
)
from agents.sources import CallRecord, HistoryEntry, HistorySource
from agents.states import AgentName, SessionState
from conversations.agent_sources import OK_OUTCOME, DatabaseHistorySource
from conversations.models import LLMCall, LLMCallPurpose
from conversations.turns.deps import PipelineConfig
from conversations.turns.result import Turn
from conversations.turns.think import AgentAnswer, AgentStop, agent_answer_read
from governance.models import ContractOutcome


@dataclass(frozen=True, slots=True)
class AnswerOutcome:
    """What one agent answer did, in the terms the replay compares."""

    code: int | None
    # The state the answer moves the session to ("" when it stays).
    state: str
    # The handoff reason it leads to ("" for none): a code 98 or 5, or a failure.
    handoff: str
    # Packages requested (code 99).
    packages: tuple[str, ...]
    contract: ContractOutcome
    # The customer message of the answer (the raw text when it did not parse), with the options
    # sent under it on a last line (`with_options`), so a draft that changes them shows in the
    # diff and is masked and erased with the text.
    text: str
    # The answer's JSON part as parsed ({} when it did not parse): a test case's required
    # fields are looked up in it.
    answer_json: Mapping[str, Any] = field(default_factory=dict)


def answer_outcome(read: AgentAnswer | AgentStop, *, before: SessionContext) -> AnswerOutcome:
    """The comparable outcome of `agent_answer_read`'s result on the session `before`."""
    if isinstance(read, AgentStop):
        parsed = read.parsed
        return AnswerOutcome(
            code=parsed.s if parsed is not None else None,
            state="",
            handoff=read.reason.value,
            packages=(),
            contract=ContractOutcome.FAILED,
            text=parsed.message if parsed is not None else read.raw,
            answer_json=dict(parsed.json_part) if parsed is not None else {},
        )
    step = read.step
    return AnswerOutcome(
        code=read.action.code.value,
        state=step.context.state.value if step.context.state != before.state else "",
        handoff=step.handoff.reason.value if step.handoff is not None else "",
        packages=tuple(read.action.packages),
        contract=ContractOutcome.REPAIRED if read.repaired else ContractOutcome.VALID,
        text=with_options(read.parsed.message, [option.title for option in step.options]),
        answer_json=dict(read.parsed.json_part),
    )


# The last line of a replayed text that lists its options (pt-BR, as the prompt editors read it).
OPTIONS_LINE = "[opções: {}]"


def with_options(text: str, titles: Sequence[str]) -> str:
    """`text` with a last line naming the options sent under it (`text` itself when none)."""
    if not titles:
        return text
    return f"{text}\n{OPTIONS_LINE.format(' | '.join(titles))}"


# --- The session and sources as the recorded call saw them -------------------------------------


class SnapshotError(ValueError):
    """A recorded call whose context snapshot cannot be replayed (its text says why)."""


@dataclass(frozen=True, slots=True)
class RecordedCall:
    """What a replay reads of one recorded agent call: from its `LLMCall` row
    (`recorded_call_of`), or from the frozen copy a prompt test case keeps of it
    (`governance.test_cases`)."""

    agent: str
    snapshot: Mapping[str, Any]
    session_id: int
    # The instance's current phone and brand text (the snapshot does not hold them).
    display_phone: str
    brand_context: str
    # The conversation as the call read it.
    history: HistorySource
    recorded_at: datetime
    # Ids for the logs and the recorder of the answer's reading.
    turn_id: UUID | None = None
    message_id: int | None = None


def recorded_call_of(call: LLMCall) -> RecordedCall:
    """The recorded call as the replay reads it from the database (its session and instance
    loaded: `select_related("session__instance")` for many)."""
    snapshot = call.context_snapshot or {}
    messages = snapshot.get("history_messages")
    return RecordedCall(
        agent=call.agent,
        snapshot=snapshot,
        session_id=call.session_id,
        display_phone=call.session.instance.display_phone,
        brand_context=call.session.instance.brand_context,
        history=RecordedHistorySource(
            call=call, messages=messages if isinstance(messages, int) else None
        ),
        recorded_at=call.created_at,
        turn_id=call.turn_id,
        message_id=call.message_id,
    )


def snapshot_context(snapshot: Mapping[str, Any], *, recorded: RecordedCall) -> SessionContext:
    """The session as the recorded call saw it. The instance's phone and brand text are not in
    the snapshot: they are the instance's current ones. Extras are not recorded either."""
    try:
        instance = snapshot["instance"]
        return SessionContext(
            session_id=recorded.session_id,
            state=SessionState(snapshot["state"]),
            instance=InstanceInfo(
                name=str(instance["name"]),
                display_phone=recorded.display_phone,
                brand_context=recorded.brand_context,
                health_sensitive=bool(instance["health_sensitive"]),
            ),
            customer_phone=str(snapshot.get("customer_phone", "")),
            customer_name=str(snapshot.get("customer_name", "")),
            segment=str(snapshot.get("segment", "")),
            intent=str(snapshot.get("intent", "")),
            service=str(snapshot.get("service", "")),
            technical_data=dict(snapshot.get("technical_data") or {}),
            registration_data=dict(snapshot.get("registration_data") or {}),
            loaded_packages=tuple(
                str(p["package_id"]) for p in snapshot.get("loaded_packages") or ()
            ),
            # Each loaded package at the version the call was given (`DatabaseKBSource`: the
            # current one when that version is gone or unknown).
            package_versions=snapshot_package_versions(snapshot),
            confirmation_data=(
                dict(snapshot["confirmation_data"])
                if snapshot.get("confirmation_data") is not None
                else None
            ),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise SnapshotError(f"unreadable context snapshot ({type(exc).__name__}: {exc})") from exc


def snapshot_package_versions(snapshot: Mapping[str, Any]) -> dict[str, int]:
    """The history id of each loaded package the call was given (when it was recorded)."""
    return {
        str(p["package_id"]): int(p["version"])
        for p in snapshot.get("loaded_packages") or ()
        if isinstance(p, Mapping) and isinstance(p.get("version"), int)
    }


class RecordedHistorySource:
    """The session's conversation as it was when the recorded call read it: the messages
    stored before the call started, at most as many as it was given."""

    def __init__(self, *, call: LLMCall, messages: int | None) -> None:
        # The call is stored when the answer arrives; its history was read before it started.
        self._inner = DatabaseHistorySource(
            before=call.created_at - timedelta(milliseconds=call.latency_ms)
        )
        self._messages = messages

    def history(self, session_id: int, limit: int) -> list[HistoryEntry]:
        if self._messages is not None:
            limit = min(limit, self._messages)
        return self._inner.history(session_id, limit)


class MemoryRecorder:
    """A `CallRecorder` that stores nothing: it keeps the replay's own calls (the format
    repair) in memory for its result, and never writes an `LLMCall`."""

    def __init__(self) -> None:
        self.calls: list[LLMCallResult] = []

    def record(self, call: CallRecord) -> None:
        if call.result is not None:
            self.calls.append(call.result)


class RecordedRepairLLM:
    """An `LLMClient` that answers the format repair with what the recorded turn's repair call
    answered (or failed with): the recorded answer is read as the turn read it, at no cost."""

    def __init__(self, repair: LLMCall | None) -> None:
        self._repair = repair

    def chat(
        self,
        *,
        model: str,
        instructions: str,
        messages: Sequence[ChatMessage],
        purpose: CallPurpose,
        cache_key: str = "",
    ) -> LLMCallResult:
        repair = self._repair
        if repair is None or repair.outcome != OK_OUTCOME:
            raise LLMProviderError(
                "no recorded repair call" if repair is None else repair.error or repair.outcome
            )
        return LLMCallResult(
            raw_response=repair.raw_response,
            model=repair.model,
            tokens_input=0,
            tokens_output=0,
            latency_ms=0,
        )


def replay_turn(recorded: RecordedCall | LLMCall, state: SessionState) -> Turn:
    """The `Turn` an answer is read under (only its ids are used: logs and the recorder)."""
    return Turn(
        session_id=recorded.session_id,
        turn_id=recorded.turn_id or uuid4(),
        token=uuid4(),
        state=state,
        inbound_ids=(),
        last_inbound_id=recorded.message_id or 0,
    )


def recorded_repair(call: LLMCall) -> LLMCall | None:
    """The format-repair call the recorded turn made for this answer, if any: the first repair
    of the same turn after it."""
    if call.turn_id is None:
        return None
    return (
        LLMCall.objects.filter(
            turn_id=call.turn_id,
            session_id=call.session_id,
            purpose=LLMCallPurpose.REPAIR,
            created_at__gte=call.created_at,
        )
        .exclude(pk=call.pk)
        .order_by("created_at", "id")
        .first()
    )


def recorded_outcome(
    call: LLMCall,
    *,
    agent: AgentName,
    context: SessionContext,
    catalog: CatalogSnapshot,
    config: PipelineConfig,
) -> AnswerOutcome:
    """What the recorded answer did, read now with the turn's code (the parse, its recorded
    repair, the validation against today's catalog, the dispatch on the snapshot's session)."""
    raw = call.raw_response
    repair: LLMCall | None = None
    # Only an answer the strict parser refuses had a repair: no query for the others.
    if not _parses(raw):
        repair = recorded_repair(call)
    read = agent_answer_read(
        raw,
        agent=agent,
        context=context,
        catalog=catalog,
        turn=replay_turn(call, context.state),
        llm=RecordedRepairLLM(repair),
        recorder=MemoryRecorder(),
        config=replace(config, repair_model=repair.model if repair is not None else ""),
    )
    return answer_outcome(read, before=context)


def _parses(raw: str) -> bool:
    try:
        parse_llm_response(raw)
    except LLMResponseParseError:
        return False
    return True
