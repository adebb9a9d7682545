"""The agent invoker: assemble one agent call from its collaborators, make it, record it.

Seed 001 and DESIGN.md §6: the invoker only assembles and calls; the pipeline parses, validates
and applies the answer. One invocation reads the runtime settings and the agent's prompt (prompt
source), the catalog and the session's loaded packages (KB source) and the session's history
(history source) — a fixed number of reads whatever the history length or catalog size — then
builds the request — the instructions (override or built-in text rendered with the agent's
variables → catalog block → fixed guards), the history, then the context item (this call's
facts and conversation guards, one ``developer`` item at the end, docs/decisions/0053) — calls
the model for the agent and records an `LLMCall` through the recorder for a success and for a
failure alike, with the prompt version it used.

Which prompt (docs/architecture.md, Each conversation keeps its prompt and knowledge versions),
first match wins: the `override` given to `prepare` (the preview, a replay); the source's chosen
override (the simulator's draft); the version the session pinned at its first turn
(`SessionContext.prompt_versions`: "builtin" is the built-in prompt even if an override is active
now, "override:<history_id>" that version's text even if edited or deactivated since); the active
override, or the built-in prompt, when the session pinned nothing. A pin that cannot be read (its
history row is gone, an unversioned override) falls back to the active one, logged once per invoker
as ``prompt_pin_unresolved``.

Which knowledge: each loaded package at the version the session pinned at its first turn
(`SessionContext.package_versions`), even if edited or deactivated since; a package it did not
pin (created since) or whose pinned version cannot be read, as it is now if active.
"""

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import Any
from uuid import UUID

from agents.business_hours import business_hours_status
from agents.context import PackageInfo, SessionContext
from agents.history import select_history
from agents.llm import ChatMessage, LLMCallResult, LLMClient, LLMError
from agents.prompts import builtin_template
from agents.prompts.assembly import assemble_instructions
from agents.prompts.cache import InstructionsCacheShare, instructions_cache_share
from agents.prompts.conversation import build_conversation_context, build_reference_item
from agents.prompts.inputs import PromptInputs
from agents.prompts.variables import VariableValue, prompt_variables
from agents.sources import (
    BUILTIN_PROMPT_VERSION,
    CallRecord,
    CallRecorder,
    HistorySource,
    KBSource,
    OverrideTemplate,
    PromptSource,
)
from agents.states import AGENT_FOR_STATE, AgentName
from agents.templating import PromptTemplateError, render_prompt_template

logger = logging.getLogger(__name__)


def _utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class InvokerConfig:
    # OPENAI_MODEL_TRIAGE / _QUALIFICATION / _COLLECTION, keyed by agent.
    models: Mapping[AgentName, str]
    max_history_messages: int = 50
    clock: Callable[[], datetime] = field(default=_utc_now)

    def model_for(self, agent: AgentName) -> str:
        return self.models[agent]


def request_input(
    history: tuple[ChatMessage, ...], context: str, reference: str = ""
) -> tuple[ChatMessage, ...]:
    """A call's input items, as sent (docs/decisions/0053): the conversation's reference item
    (its segment's services, its loaded packages) as a ``developer`` message when it has one,
    the history, then the context item as a ``developer`` message."""
    before = (ChatMessage(role="developer", content=reference),) if reference else ()
    return (*before, *history, ChatMessage(role="developer", content=context))


def cache_key_for(agent: AgentName, prompt_version: str) -> str:
    """The provider's prompt-cache routing key of a call: its agent and prompt version, the two
    things its instructions depend on — never personal data (docs/decisions/0053 says why not
    per conversation)."""
    return f"{agent.value}-{prompt_version}"


@dataclass(frozen=True, slots=True)
class PreparedCall:
    """Everything one agent call sends, before it is sent (the admin preview shows this)."""

    agent: AgentName
    model: str
    # The same bytes on every call of this agent and prompt version (unless the text uses a
    # per-call variable).
    instructions: str
    # The history, oldest first.
    messages: tuple[ChatMessage, ...]
    # This call's facts and conversation guards, sent after the history.
    context: str
    prompt_version: str
    context_snapshot: dict[str, Any]
    # What the conversation looked up of the catalog (its segment's services, its loaded
    # packages), sent before the history ("" when nothing).
    reference: str = ""
    cache_key: str = ""
    # Only when `prepare` was asked to measure it (the prompt editor's preview).
    cache_share: InstructionsCacheShare | None = None

    @property
    def input(self) -> tuple[ChatMessage, ...]:
        return request_input(self.messages, self.context, self.reference)


@dataclass(frozen=True, slots=True)
class AgentCall:
    agent: AgentName
    result: LLMCallResult
    # "builtin" or "override:<history_id>".
    prompt_version: str
    # JSON-serialisable: what the call was built from, so a recorded turn can be replayed.
    context_snapshot: dict[str, Any]
    instructions: str
    # The history, the context item sent after it and the reference item sent before it
    # (`input` is the three, as sent).
    messages: tuple[ChatMessage, ...]
    context: str
    reference: str = ""

    @property
    def input(self) -> tuple[ChatMessage, ...]:
        return request_input(self.messages, self.context, self.reference)


class AgentInvoker:
    def __init__(
        self,
        *,
        llm: LLMClient,
        prompts: PromptSource,
        kb: KBSource,
        history: HistorySource,
        recorder: CallRecorder,
        config: InvokerConfig,
    ) -> None:
        self._llm = llm
        self._prompts = prompts
        self._kb = kb
        self._history = history
        self._recorder = recorder
        self._config = config
        # (session, agent, version) of the pins already logged as unresolved.
        self._unresolved: set[tuple[int, str, str]] = set()

    def invoke(
        self,
        *,
        session: SessionContext,
        agent: AgentName,
        turn_id: UUID | None = None,
        message_id: int | None = None,
        current_message: str | None = None,
    ) -> AgentCall:
        """Call the agent for this session; raises the `LLMError` subclasses of the client.

        `current_message` is the newest inbound text when it may not be stored yet; it is not
        appended again when the history already ends with it. An `LLMCall` is recorded for a
        success and for a failure.
        """
        prepared = self.prepare(session=session, agent=agent, current_message=current_message)
        call = partial(
            CallRecord,
            session_id=session.session_id,
            agent=agent,
            purpose="agent",
            prompt_version=prepared.prompt_version,
            context_snapshot=prepared.context_snapshot,
            turn_id=turn_id,
            message_id=message_id,
        )
        try:
            result = self._llm.chat(
                model=prepared.model,
                instructions=prepared.instructions,
                messages=prepared.input,
                purpose="agent",
                cache_key=prepared.cache_key,
            )
        except LLMError as exc:
            self._recorder.record(call(model=prepared.model, error=exc))
            raise
        self._recorder.record(
            call(model=result.model, result=result, raw_response=result.raw_response)
        )
        logger.info(
            "agent_invoked",
            extra={
                "session_id": session.session_id,
                "agent": agent.value,
                "model": result.model,
                "prompt_version": prepared.prompt_version,
                # Key names avoid "token": the log formatter redacts such keys as secrets.
                "usage_input": result.tokens_input,
                "usage_cached": result.tokens_cached,
                "usage_output": result.tokens_output,
                "latency_ms": result.latency_ms,
            },
        )
        return AgentCall(
            agent=agent,
            result=result,
            prompt_version=prepared.prompt_version,
            context_snapshot=prepared.context_snapshot,
            instructions=prepared.instructions,
            messages=prepared.messages,
            context=prepared.context,
            reference=prepared.reference,
        )

    def prepare(
        self,
        *,
        session: SessionContext,
        agent: AgentName,
        current_message: str | None = None,
        override: OverrideTemplate | None = None,
        measure_cache: bool = False,
    ) -> PreparedCall:
        """Assemble the call without making it.

        `override` replaces the session's prompt (the admin preview of a draft, a replay);
        None uses the chosen, pinned or active one (see the module docstring).
        `measure_cache` also measures the instructions' share the prompt cache can reuse
        (`PreparedCall.cache_share`): a second render, for the preview only.
        """
        if AGENT_FOR_STATE.get(session.state) != agent:
            raise ValueError(f"agent {agent} does not serve session state {session.state}")
        runtime = self._prompts.runtime()
        if override is None:
            override = self._session_override(session, agent)
        catalog = self._kb.catalog()
        loaded: dict[str, PackageInfo] = {}
        if session.loaded_packages:
            found = self._kb.load_packages(list(session.loaded_packages), session.package_versions)
            loaded = {pid: found[pid] for pid in session.loaded_packages if pid in found}
        entries = self._history.history(session.session_id, self._config.max_history_messages)

        now = self._config.clock()
        inputs = PromptInputs(
            agent=agent,
            session=session,
            runtime=runtime,
            catalog=catalog,
            loaded_packages=loaded,
            hours=business_hours_status(runtime.business_hours, now),
            now=now,
        )
        values = prompt_variables(inputs)
        template, text, version = self._render_text(inputs, values, override)
        selection = select_history(
            entries,
            session_id=session.session_id,
            limit=self._config.max_history_messages,
            current_message=current_message,
        )
        if selection.foreign_dropped:
            logger.warning(
                "history_foreign_entries_dropped",
                extra={
                    "session_id": session.session_id,
                    "agent": agent.value,
                    "count": selection.foreign_dropped,
                },
            )
        model = self._config.model_for(agent)
        return PreparedCall(
            agent=agent,
            model=model,
            instructions=assemble_instructions(text, inputs),
            messages=selection.messages,
            context=build_conversation_context(inputs),
            reference=build_reference_item(inputs),
            cache_key=cache_key_for(agent, version),
            cache_share=(
                instructions_cache_share(template, values, inputs) if measure_cache else None
            ),
            prompt_version=version,
            context_snapshot=context_snapshot(
                session,
                agent=agent,
                model=model,
                prompt_version=version,
                loaded=loaded,
                history_messages=len(selection.messages),
            ),
        )

    def _session_override(
        self, session: SessionContext, agent: AgentName
    ) -> OverrideTemplate | None:
        """The override this session's call uses (None: the built-in prompt)."""
        chosen = self._prompts.chosen_override(agent)
        if chosen is not None:
            return chosen
        pinned = session.prompt_versions.get(agent.value)
        if pinned is None:
            return self._prompts.active_override(agent)
        if pinned == BUILTIN_PROMPT_VERSION:
            return None
        found = self._prompts.override_at(agent, pinned)
        if found is not None:
            return found
        key = (session.session_id, agent.value, pinned)
        if key not in self._unresolved:
            self._unresolved.add(key)
            logger.warning(
                "prompt_pin_unresolved",
                extra={
                    "session_id": session.session_id,
                    "agent": agent.value,
                    "prompt_version": pinned,
                },
            )
        return self._prompts.active_override(agent)

    def _render_text(
        self,
        inputs: PromptInputs,
        values: dict[str, VariableValue],
        override: OverrideTemplate | None,
    ) -> tuple[str, str, str]:
        """(template, its rendered text, version) of the prompt this call uses."""
        if override is not None:
            try:
                rendered = render_prompt_template(override.content, values)
                return override.content, rendered, override.version
            except PromptTemplateError as exc:
                # Saved overrides are validated; one that still fails (saved before a variable
                # was removed or before the allow-list, written around the form, or rendering
                # past the cap with this session's values) must not stop the customer's turn:
                # the built-in prompt serves, with the same guards, and the call records
                # "builtin".
                logger.error(
                    "prompt_override_render_failed",
                    extra={
                        "session_id": inputs.session.session_id,
                        "agent": inputs.agent.value,
                        "prompt_version": override.version,
                        "error": str(exc),
                    },
                )
        template = builtin_template(inputs.agent)
        return template, render_prompt_template(template, values), BUILTIN_PROMPT_VERSION


def context_snapshot(
    session: SessionContext,
    *,
    agent: AgentName,
    model: str,
    prompt_version: str,
    loaded: Mapping[str, PackageInfo],
    history_messages: int,
) -> dict[str, Any]:
    """What the call was built from, JSON-serialisable (kept on the LLMCall for replays)."""
    return {
        "session_id": session.session_id,
        "state": session.state.value,
        "agent": agent.value,
        "model": model,
        "prompt_version": prompt_version,
        "instance": {
            "name": session.instance.name,
            "health_sensitive": session.instance.health_sensitive,
        },
        "customer_name": session.customer_name,
        "customer_phone": session.customer_phone,
        "segment": session.segment,
        "intent": session.intent,
        "service": session.service,
        "technical_data": dict(session.technical_data),
        "registration_data": dict(session.registration_data),
        # What a code 5 in CONFIRM is checked against (a replay needs it to decide the same way).
        "confirmation_data": (
            dict(session.confirmation_data) if session.confirmation_data is not None else None
        ),
        "loaded_packages": [
            {"package_id": pid, "version": loaded[pid].version if pid in loaded else None}
            for pid in session.loaded_packages
        ],
        "history_messages": history_messages,
    }
