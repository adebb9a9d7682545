"""Simulated customers (docs/architecture.md, Simulated customers): a persona (`governance.models.
Persona`) plays a whole conversation against a prompt personalizado, through the simulator's
pipeline. Here, above governance, because it drives the simulator.

`persona_run_start` stores a queued `PersonaRun` with the versions every conversation of the run
pins (`Session.prompt_versions`): the draft's for its agent, the prompts in use for the other two
(or for all three without a draft), and the knowledge package versions they pin
(`Session.package_versions`: the active ones, or a release's where it names one), fixed at the
start so an edit during the run changes nothing.
`persona_run_execute` (the ``governance.persona_run`` task in `simulator.tasks`, or
``python manage.py simulate_personas``) plays each persona in turn: the customer model
(`OPENAI_MODEL_PERSONA`) writes the customer's next message from the persona and the transcript
so far (`customer_request`), the simulator delivers it to a simulated session
(`simulator.simulation.simulated_message_deliver`) and runs the turn
(`simulated_turn_process`: every agent, routing, enrichment, repair, confirmation; nothing sent
to WhatsApp, nothing counted, no CRM delivery, no survey, no alert). A bot message with options
is answered by a tap when the customer model writes one option's exact title (`offered_tap`).
The conversation stops at the expected outcome, a handoff, a closed conversation, the customer's
[FIM], or the persona's message limit; `persona_outcome_check` then says whether the expected
outcome was reached.

Caps: the replay's. The run takes a run slot (`REPLAY_MAX_RUNNING`) and each model call a call
slot (`REPLAY_CONCURRENCY`, shared with every replay, `governance.slots`); one persona at a time
and one call at a time within it. Before each customer message the run's cost is compared with
`REPLAY_MAX_COST_USD`: at the limit the conversation in progress ends "stopped at the cost limit"
and the personas left are not played. A model with no listed price is refused at the start.
"""

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any
from uuid import UUID

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone
from django.utils.translation import gettext

from agents.llm import CallPurpose, ChatMessage, LLMCallResult, LLMClient, LLMError
from agents.sources import OverrideTemplate, package_versions_of, prompt_versions_of
from agents.states import AgentName, HandoffReason, SessionState
from conversations.db_connections import pooled_connections_release
from conversations.labels import handoff_label, usd_text
from conversations.models import SUPERSEDED, Direction, Instance, Lead, Message, Session
from governance.models import (
    Persona,
    PersonaGoal,
    PersonaOutcome,
    PersonaResult,
    PersonaRun,
    ReplaySlotPool,
    ReplayStatus,
)
from governance.replay import (
    ReplayDeps,
    answer_cost,
    replay_model,
    submit_once,
    unpriced_model_refusal,
)
from governance.slots import slot_acquire, slot_release, slots_release
from knowledge_base.selectors import DatabaseKBSource
from prompts_admin.models import PromptOverride, Release
from prompts_admin.releases import release_prompt_versions
from prompts_admin.selectors import ChosenOverridesPromptSource, DatabasePromptSource
from simulator.simulation import (
    SIMULATED_PHONE_PREFIX,
    SimulationError,
    offered_tap,
    simulated_message_deliver,
    simulated_session_reset,
    simulated_turn_process,
    simulation_instance,
)
from whatsapp.interactive import options_of

logger = logging.getLogger(__name__)

_DETAIL_CHARS = PersonaRun._meta.get_field("detail").max_length or 255
# What the customer model writes when it has nothing more to say.
CUSTOMER_END = "[FIM]"
# The simulated customers' phones: the simulator's reserved range, then 8 (not the simulator
# page's or command's numbers), then the result's id.
PERSONA_PHONE_PREFIX = SIMULATED_PHONE_PREFIX + "8"


class PersonaRunRefused(Exception):
    """A run that must not start; the message says why (pt-BR through gettext)."""


# --- The customer model (pure) ------------------------------------------------------------------

# The customer model's instructions, in the language of the conversation it plays. Not staff
# text: no gettext.
CUSTOMER_INSTRUCTIONS = """Você faz o papel de um cliente que conversa pelo WhatsApp com o \
atendimento automático de um laboratório. Nunca diga que é uma simulação, um teste ou um modelo.

Quem você é e o que quer:
{description}

Regras:
- Responda só com a próxima mensagem do cliente, em português do Brasil, sem aspas nem \
explicações.
- Escreva como no WhatsApp: mensagens curtas; não invente o que o cliente não saberia.
- Quando a mensagem do atendimento trouxer opções, para tocar em uma responda exatamente com o \
texto dela, sem mais nada.
- Quando o que você queria estiver resolvido, ou a conversa não tiver mais para onde ir, \
responda só {end}."""
CUSTOMER_FIRST = "(A conversa ainda não começou: escreva a primeira mensagem do cliente.)"


@dataclass(frozen=True, slots=True)
class Bubble:
    """One message of a persona's conversation as its transcript keeps it."""

    who: str  # "customer" or "bot"
    text: str
    code: int | None = None
    agent: str = ""
    options: tuple[str, ...] = ()
    tap: bool = False

    def as_json(self) -> dict[str, Any]:
        return {
            "who": self.who,
            "text": self.text,
            "code": self.code,
            "agent": self.agent,
            "options": list(self.options),
            "tap": self.tap,
        }

    @classmethod
    def from_json(cls, row: Mapping[str, Any]) -> "Bubble":
        code = row.get("code")
        return cls(
            who=str(row.get("who") or ""),
            text=str(row.get("text") or ""),
            code=int(code) if code is not None else None,
            agent=str(row.get("agent") or ""),
            options=tuple(str(o) for o in row.get("options") or ()),
            tap=bool(row.get("tap")),
        )


def customer_request(
    description: str, transcript: Sequence[Bubble]
) -> tuple[str, list[ChatMessage]]:
    """The customer model's instructions and input: the persona, then the conversation seen
    from the customer's side (the bot's messages as ``user``, with their options; the
    customer's own as ``assistant``)."""
    instructions = CUSTOMER_INSTRUCTIONS.format(description=description.strip(), end=CUSTOMER_END)
    messages: list[ChatMessage] = []
    for bubble in transcript:
        if bubble.who == "customer":
            messages.append(ChatMessage(role="assistant", content=bubble.text))
            continue
        text = bubble.text
        if bubble.options:
            text += "\nOpções: " + " ".join(f"[{title}]" for title in bubble.options)
        messages.append(ChatMessage(role="user", content=text))
    if not messages:
        messages.append(ChatMessage(role="user", content=CUSTOMER_FIRST))
    return instructions, messages


def customer_text(raw: str) -> str:
    """The customer model's answer as the message the customer sends (quotes trimmed)."""
    return raw.strip().strip('"“”').strip()


def chosen_option(text: str, options: Sequence[str]) -> str | None:
    """The option title the customer's text taps: the text is exactly one title (ignoring
    case and the spaces around); None when it is a typed message."""
    wanted = text.strip().casefold()
    for title in options:
        if title.strip().casefold() == wanted:
            return title
    return None


@dataclass(frozen=True, slots=True)
class Expectation:
    goal: str
    segment: str = ""
    service: str = ""
    required_fields: tuple[str, ...] = ()
    handoff_reason: str = ""

    @classmethod
    def of(cls, persona: Persona) -> "Expectation":
        return cls(
            goal=persona.goal,
            segment=persona.expected_segment,
            service=persona.expected_service,
            required_fields=tuple(str(f) for f in persona.required_fields or ()),
            handoff_reason=persona.expected_handoff_reason,
        )


def _field_of(data: Mapping[str, Any], path: str) -> Any:
    """The value at `path` ("servico", "cadastro.email") of a lead's data; None when absent."""
    value: Any = data
    for key in path.split("."):
        if not isinstance(value, Mapping) or key not in value:
            return None
        value = value[key]
    return value


def persona_outcome_check(
    expected: Expectation, *, outcome: str, handoff_reason: str, lead: Mapping[str, Any] | None
) -> list[str]:
    """How the conversation's end differs from what the persona expects, one pt-BR sentence
    each (empty: reached)."""
    if outcome == PersonaOutcome.COST_CAP:
        return [gettext("not finished: the run reached REPLAY_MAX_COST_USD")]
    if expected.goal == PersonaGoal.HANDOFF:
        if outcome == PersonaOutcome.HANDOFF and handoff_reason == expected.handoff_reason:
            return []
        return [
            gettext("expected a handoff (%(expected)s), got: %(got)s")
            % {
                "expected": handoff_label(expected.handoff_reason),
                "got": _ended(outcome, handoff_reason),
            }
        ]
    if outcome != PersonaOutcome.LEAD or lead is None:
        return [
            gettext("expected a confirmed request, got: %(got)s")
            % {"got": _ended(outcome, handoff_reason)}
        ]
    differences = []
    segment, service = _field_of(lead, "segmento"), _field_of(lead, "servico")
    if expected.segment and segment != expected.segment:
        differences.append(
            gettext("the request's segment is %(got)s, expected %(expected)s")
            % {"got": segment or "—", "expected": expected.segment}
        )
    if expected.service and service != expected.service:
        differences.append(
            gettext("the request's service is %(got)s, expected %(expected)s")
            % {"got": service or "—", "expected": expected.service}
        )
    for path in expected.required_fields:
        if _field_of(lead, path) in (None, "", [], {}):
            differences.append(gettext("the request lacks the field %(field)s") % {"field": path})
    return differences


def _ended(outcome: str, handoff_reason: str) -> str:
    if outcome in (PersonaOutcome.HANDOFF, PersonaOutcome.LEAD) and handoff_reason:
        return str(handoff_label(handoff_reason))
    return str(PersonaOutcome(outcome).label) if outcome in PersonaOutcome.values else outcome


# --- The model client of a run ------------------------------------------------------------------


class RunClient:
    """The run's `LLMClient`: each call takes a call slot of the replays' pool first (waiting
    for one, with no database connection held), and every result is kept for the cost."""

    def __init__(self, inner: LLMClient, *, run_id: int, deps: ReplayDeps) -> None:
        self._inner = inner
        self._run_id = run_id
        self._deps = deps
        self.results: list[LLMCallResult] = []
        self.repairs = 0

    def chat(
        self,
        *,
        model: str,
        instructions: str,
        messages: Sequence[ChatMessage],
        purpose: CallPurpose,
        cache_key: str = "",
    ) -> LLMCallResult:
        slot = self._slot()
        try:
            result = self._inner.chat(
                model=model,
                instructions=instructions,
                messages=messages,
                purpose=purpose,
                cache_key=cache_key,
            )
        finally:
            slot_release(pool=ReplaySlotPool.CALL, number=slot, persona_run_id=self._run_id)
        self.results.append(result)
        self.repairs += purpose == "repair"
        return result

    def _slot(self) -> int:
        while True:
            slot = slot_acquire(
                pool=ReplaySlotPool.CALL,
                cap=self._deps.concurrency,
                persona_run_id=self._run_id,
                now=timezone.now(),
                lease=self._deps.call_lease,
            )
            if slot is not None:
                return slot
            pooled_connections_release()
            time.sleep(self._deps.slot_poll_seconds)


# --- Playing one persona ------------------------------------------------------------------------


@dataclass(slots=True)
class Played:
    """What one persona's conversation did."""

    outcome: str
    session_id: int | None = None
    handoff_reason: str = ""
    turns: int = 0
    error: str = ""
    calls: list[LLMCallResult] = field(default_factory=list)
    repairs: int = 0


def persona_phone(result_id: int) -> str:
    return f"{PERSONA_PHONE_PREFIX}{result_id % 100_000_000:08d}"


def persona_play(
    persona: Persona,
    *,
    result_id: int,
    instance: Instance,
    pin: Mapping[str, str],
    packages: Mapping[str, int],
    client: RunClient,
    cost_left: Decimal,
    persona_model: str,
    release: Release | None = None,
) -> Played:
    """Play `persona`'s conversation on a new simulated session (see the module docstring).
    `pin` and `packages`: the prompt and knowledge package versions the conversation pins.
    `cost_left`: what the run may still spend; the conversation stops before the customer's
    next message once its calls have spent it."""
    phone = persona_phone(result_id)
    simulated_session_reset(instance=instance, phone=phone)
    first_call = len(client.results)
    first_repairs = client.repairs
    played = Played(outcome=PersonaOutcome.MAX_TURNS)
    transcript: list[Bubble] = []
    for _turn in range(persona.max_turns):
        spent = answer_cost(tuple(client.results[first_call:]), asked=persona_model)
        if spent >= cost_left:
            played.outcome = PersonaOutcome.COST_CAP
            break
        instructions, messages = customer_request(persona.description, transcript)
        try:
            # Purpose "agent": it plays a part of the conversation (the repairs are counted by
            # their own purpose).
            answer = client.chat(
                model=persona_model, instructions=instructions, messages=messages, purpose="agent"
            )
        except LLMError as exc:
            played.outcome, played.error = PersonaOutcome.ERROR, str(exc)[:200]
            break
        text = customer_text(answer.raw_response)
        if not text or text == CUSTOMER_END:
            played.outcome = PersonaOutcome.CUSTOMER_ENDED
            break
        last_options = transcript[-1].options if transcript and transcript[-1].who == "bot" else ()
        title = chosen_option(text, last_options)
        tap = None
        if title is not None and played.session_id is not None:
            tap = _tap(played.session_id, title)
        delivered = simulated_message_deliver(instance=instance, phone=phone, text=text, tap=tap)
        if played.session_id is None:
            played.session_id = delivered.session_id
            # The run's versions, pinned before the first turn reads them (it pins only an
            # unpinned session).
            Session.objects.filter(pk=delivered.session_id, is_simulated=True).update(
                prompt_versions=dict(pin),
                release=release,
                package_versions=dict(packages),
            )
        played.turns += 1
        transcript.append(Bubble("customer", text, tap=tap is not None))
        simulated_turn_process(session_id=delivered.session_id, llm=client)
        transcript.extend(_bot_bubbles(delivered.session_id, after=delivered.inbound_id))
        state, reason = (
            Session.objects.filter(pk=delivered.session_id)
            .values_list("state", "handoff_reason")
            .get()
        )
        if state == SessionState.HUMAN.value:
            played.handoff_reason = reason
            played.outcome = (
                PersonaOutcome.LEAD
                if reason == HandoffReason.QUALIFIED_LEAD.value
                else PersonaOutcome.HANDOFF
            )
            break
        if state == SessionState.CLOSED.value:
            played.outcome = PersonaOutcome.CLOSED
            break
    played.calls = client.results[first_call:]
    played.repairs = client.repairs - first_repairs
    return played


def _tap(session_id: int, title: str) -> Any:
    last = (
        Message.objects.filter(session_id=session_id, direction=Direction.OUTBOUND)
        .exclude(error=SUPERSEDED)
        .only("interactive")
        .order_by("-id")
        .first()
    )
    for option in options_of(last.interactive if last is not None else None):
        if option.title == title:
            return offered_tap(session_id, option.id)
    return None


def _bot_bubbles(session_id: int, *, after: int) -> list[Bubble]:
    rows = (
        Message.objects.filter(session_id=session_id, direction=Direction.OUTBOUND, pk__gt=after)
        .exclude(error=SUPERSEDED)
        .order_by("id")
        .values_list("content", "code", "agent", "interactive")
    )
    return [
        Bubble(
            "bot",
            content,
            code=code,
            agent=agent,
            options=tuple(o.title for o in options_of(interactive)),
        )
        for content, code, agent, interactive in rows
    ]


def session_transcript(session_id: int) -> list[Bubble]:
    """The conversation as its transcript keeps it: customer and bot messages in order."""
    rows = (
        Message.objects.filter(
            session_id=session_id, direction__in=(Direction.INBOUND, Direction.OUTBOUND)
        )
        .exclude(error=SUPERSEDED)
        .order_by("id")
        .values_list("direction", "content", "code", "agent", "interactive", "message_type")
    )
    bubbles = []
    for direction, content, code, agent, interactive, kind in rows:
        if direction == Direction.INBOUND:
            bubbles.append(Bubble("customer", content, tap=kind == "interactive"))
        else:
            options = tuple(o.title for o in options_of(interactive))
            bubbles.append(Bubble("bot", content, code=code, agent=agent, options=options))
    return bubbles


# --- A run --------------------------------------------------------------------------------------


def persona_models() -> tuple[str, ...]:
    """Every model a persona's conversation may call: the customer's, the three agents', the
    repair's and summary's."""
    agents = (
        replay_model(a.value) for a in (AgentName.TRIAGEM, AgentName.QUALIFICACAO, AgentName.COLETA)
    )
    return (settings.OPENAI_MODEL_PERSONA, *agents, settings.OPENAI_MODEL_SUMMARY)


def persona_refusal() -> str:
    """Why a run must not start ("" when it may): a model with no listed price."""
    for model in persona_models():
        refusal = unpriced_model_refusal(model)
        if refusal:
            return refusal
    return ""


def run_pin(override: PromptOverride | None) -> dict[str, str]:
    """The versions every conversation of the run pins: the prompts in use now (no gradual
    release: each agent's active override, or the built-in prompt), the draft's for its agent."""
    overrides: dict[AgentName, OverrideTemplate | None] = dict(
        DatabasePromptSource().active_overrides()
    )
    if override is not None:
        agent = AgentName(override.agent)
        overrides[agent] = ChosenOverridesPromptSource({agent: override.pk}).chosen_override(agent)
    return prompt_versions_of(overrides)


def run_package_pin(release: Release | None) -> dict[str, int]:
    """The knowledge package versions every conversation of the run pins: each active
    package's version now, with `release`'s named versions in their place (what a conversation
    would pin right after publishing it)."""
    live = package_versions_of(DatabaseKBSource().packages())
    named = {} if release is None else {pid: int(h) for pid, h in release.packages.items()}
    return {**live, **named}


def selected_personas(persona_ids: Sequence[int]) -> QuerySet[Persona]:
    """The chosen personas (active or not), or every active one when none is chosen."""
    if persona_ids:
        return Persona.objects.filter(pk__in=list(persona_ids))
    return Persona.objects.filter(is_active=True)


def persona_run_start(
    *,
    override: PromptOverride | None,
    persona_ids: Sequence[int] = (),
    user: Any = None,
    release: Release | None = None,
    task_id: str = "",
) -> PersonaRun:
    """A queued run of the chosen personas (none: every active one) against `override`'s text
    as it is now (None: the prompts in use), or against `release`'s prompt versions. Refused
    (`PersonaRunRefused`) with no persona to play or a model with no listed price. `task_id`:
    the id its task is published with (`persona_run_submit`; empty: a new one at the enqueue)."""
    refusal = persona_refusal()
    if refusal:
        raise PersonaRunRefused(refusal)
    try:
        simulation_instance(None)
    except SimulationError as exc:
        raise PersonaRunRefused(str(exc)) from None
    ids = sorted(set(persona_ids))
    count = selected_personas(ids).count()
    if count == 0:
        raise PersonaRunRefused(gettext("No simulated customer to play: create or activate one."))
    if ids and count != len(ids):
        raise PersonaRunRefused(gettext("A chosen simulated customer does not exist."))
    return PersonaRun.objects.create(
        override=override,
        release=release,
        agent=override.agent if override is not None else "",
        prompt_versions=(
            release_prompt_versions(release) if release is not None else run_pin(override)
        ),
        package_versions=run_package_pin(release),
        persona_ids=ids,
        personas_selected=count,
        created_by=user if getattr(user, "is_authenticated", False) else None,
        task_id=task_id,
    )


def persona_run_submit(
    *,
    override: PromptOverride | None,
    persona_ids: Sequence[int],
    user: Any,
    form_token: UUID,
    release: Release | None = None,
) -> tuple[PersonaRun, bool]:
    """The start form's submit (`governance.replay.submit_once`): a new run and True, or the
    run this form started already and False. The form's one-time token is the run's task id,
    so a run keeps no column of its own for it; the starter's row is locked meanwhile, so two
    submits of one form at once (a double click) are looked up one after the other."""
    token = str(form_token)
    with transaction.atomic():
        if getattr(user, "is_authenticated", False):
            list(get_user_model().objects.select_for_update().filter(pk=user.pk).values("pk"))
        return submit_once(
            lambda: PersonaRun.objects.filter(task_id=token).first(),
            lambda: persona_run_start(
                override=override,
                persona_ids=persona_ids,
                user=user,
                release=release,
                task_id=token,
            ),
        )


@dataclass(slots=True)
class _Totals:
    personas_done: int = 0
    reached: int = 0
    failed: int = 0
    tokens_input: int = 0
    cached_tokens: int = 0
    tokens_output: int = 0
    cost_usd: Decimal = field(default_factory=lambda: Decimal("0"))

    def as_fields(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


def persona_run_execute(
    *,
    run_id: int,
    deps: ReplayDeps | None = None,
    deadline_errors: tuple[type[BaseException], ...] = (),
) -> PersonaRun:
    """Play a queued run to its end when a run slot is free (see the module docstring);
    without one the run stays queued (the caller publishes it again). A run that is not queued
    is left as it is, so the task is safe to retry. `deadline_errors` (the task's soft time
    limit) end it FAILED with the results so far."""
    deps = deps or ReplayDeps.from_settings()
    run = PersonaRun.objects.select_related("override", "release").get(pk=run_id)
    if run.status != ReplayStatus.QUEUED:
        return run
    refusal = persona_refusal()
    if refusal:
        return _finish(run, ReplayStatus.FAILED, _Totals(), refusal)
    if not _claim(run, deps):
        run.refresh_from_db()
        return run
    totals = _Totals()
    try:
        status, detail = _execute(run, deps, totals)
    except deadline_errors:
        logger.warning("persona_run_deadline", extra={"run_id": run.pk})
        detail = gettext("Stopped at the task's time limit; the results so far are kept.")
        return _finish(run, ReplayStatus.FAILED, totals, detail)
    except Exception as exc:
        logger.exception("persona_run_failed", extra={"run_id": run.pk})
        detail = gettext("Unexpected error: %(error)s") % {"error": type(exc).__name__}
        return _finish(run, ReplayStatus.FAILED, totals, detail)
    return _finish(run, status, totals, detail)


def _claim(run: PersonaRun, deps: ReplayDeps) -> bool:
    now = timezone.now()
    slot = slot_acquire(
        pool=ReplaySlotPool.RUN,
        cap=deps.max_running,
        persona_run_id=run.pk,
        now=now,
        lease=deps.run_lease,
    )
    if slot is None:
        logger.info("persona_run_waits", extra={"run_id": run.pk})
        return False
    if not PersonaRun.objects.filter(pk=run.pk, status=ReplayStatus.QUEUED).update(
        status=ReplayStatus.RUNNING, started_at=now
    ):
        slot_release(pool=ReplaySlotPool.RUN, number=slot, persona_run_id=run.pk)
        return False
    run.status, run.started_at = ReplayStatus.RUNNING, now
    return True


def _execute(run: PersonaRun, deps: ReplayDeps, totals: _Totals) -> tuple[ReplayStatus, str]:
    instance = simulation_instance(None)
    personas = list(selected_personas(run.persona_ids).order_by("title", "id"))
    client = RunClient(deps.llm, run_id=run.pk, deps=deps)
    persona_model = settings.OPENAI_MODEL_PERSONA
    for persona in personas:
        if totals.cost_usd >= deps.max_cost_usd:
            return ReplayStatus.CAPPED, _capped(totals, deps)
        result = PersonaResult.objects.create(run=run, persona=persona, title=persona.title)
        played = persona_play(
            persona,
            result_id=result.pk,
            instance=instance,
            pin=run.prompt_versions,
            packages=run.package_versions,
            client=client,
            cost_left=deps.max_cost_usd - totals.cost_usd,
            persona_model=persona_model,
            release=run.release,
        )
        _result_write(run, result, persona, played, totals, persona_model=persona_model)
        if played.outcome == PersonaOutcome.COST_CAP:
            return ReplayStatus.CAPPED, _capped(totals, deps)
    return ReplayStatus.DONE, ""


def _capped(totals: _Totals, deps: ReplayDeps) -> str:
    return gettext("Stopped at REPLAY_MAX_COST_USD: the calls cost %(cost)s (limit %(max)s).") % {
        "cost": usd_text(totals.cost_usd),
        "max": usd_text(deps.max_cost_usd, 4),
    }


def _result_write(
    run: PersonaRun,
    result: PersonaResult,
    persona: Persona,
    played: Played,
    totals: _Totals,
    *,
    persona_model: str,
) -> None:
    """The persona's result and the run's totals, in one short transaction."""
    lead = None
    transcript: list[Bubble] = []
    if played.session_id is not None:
        transcript = session_transcript(played.session_id)
        if played.outcome == PersonaOutcome.LEAD:
            lead = (
                Lead.objects.filter(session_id=played.session_id)
                .values_list("data", flat=True)
                .first()
            )
    differences = persona_outcome_check(
        Expectation.of(persona),
        outcome=played.outcome,
        handoff_reason=played.handoff_reason,
        lead=lead,
    )
    if played.error:
        differences.append(
            gettext("the customer model failed: %(error)s") % {"error": played.error}
        )
    calls = tuple(played.calls)
    cost = answer_cost(calls, asked=persona_model)
    contract_errors = played.repairs + (
        played.handoff_reason == HandoffReason.LLM_INVALID_CONTRACT.value
    )
    reached = not differences
    tokens = (
        sum(c.tokens_input for c in calls),
        sum(c.tokens_cached for c in calls),
        sum(c.tokens_output for c in calls),
    )
    fields: dict[str, Any] = {
        "session_id": played.session_id,
        "reached": reached,
        "outcome": played.outcome,
        "handoff_reason": played.handoff_reason,
        "differences": differences,
        "turns": played.turns,
        "handoffs": int(played.outcome in (PersonaOutcome.LEAD, PersonaOutcome.HANDOFF)),
        "contract_errors": contract_errors,
        "tokens_input": tokens[0],
        "cached_tokens": tokens[1],
        "tokens_output": tokens[2],
        "cost_usd": cost,
        "transcript": [b.as_json() for b in transcript],
    }
    totals.personas_done += 1
    totals.reached += reached
    totals.failed += not reached
    totals.tokens_input += tokens[0]
    totals.cached_tokens += tokens[1]
    totals.tokens_output += tokens[2]
    totals.cost_usd += cost
    with transaction.atomic():
        PersonaResult.objects.filter(pk=result.pk).update(**fields)
        PersonaRun.objects.filter(pk=run.pk).update(**totals.as_fields())


def _finish(run: PersonaRun, status: ReplayStatus, totals: _Totals, detail: str) -> PersonaRun:
    PersonaRun.objects.filter(pk=run.pk).update(
        status=status,
        detail=detail[:_DETAIL_CHARS],
        finished_at=timezone.now(),
        **(totals.as_fields() if totals.personas_done else {}),
    )
    slots_release(persona_run_id=run.pk)
    run.refresh_from_db()
    return run


def persona_run_fail_waiting(*, run_id: int, now: datetime, older_than: timedelta) -> bool:
    """End FAILED a run still queued `older_than` after its creation (no run slot came free
    in time); False when it is not such a run."""
    detail = gettext(
        "No free replay slot within %(minutes)s minutes (REPLAY_MAX_RUNNING); start it again."
    ) % {"minutes": int(older_than.total_seconds() // 60)}
    return bool(
        PersonaRun.objects.filter(
            pk=run_id, status=ReplayStatus.QUEUED, created_at__lt=now - older_than
        ).update(status=ReplayStatus.FAILED, detail=detail[:_DETAIL_CHARS], finished_at=now)
    )


def run_report(run: PersonaRun) -> dict[str, Any]:
    """The run as the command's ``--json`` prints it."""
    results = list(run.results.order_by("id"))
    return {
        "run_id": run.pk,
        "status": str(run.status),
        "detail": run.detail,
        "override": run.override_id,
        "release": run.release_id,
        "personas": len(results),
        "reached": sum(r.reached for r in results),
        "failed": sum(not r.reached for r in results),
        "cost_usd": f"{run.cost_usd:.6f}",
        "results": [
            {
                "persona": r.persona_id,
                "title": r.title,
                "reached": r.reached,
                "outcome": r.outcome,
                "handoff_reason": r.handoff_reason,
                "differences": list(r.differences),
                "turns": r.turns,
                "handoffs": r.handoffs,
                "contract_errors": r.contract_errors,
                "tokens": {
                    "input": r.tokens_input,
                    "cached": r.cached_tokens,
                    "output": r.tokens_output,
                },
                "cost_usd": f"{r.cost_usd:.6f}",
                "session_id": r.session_id,
            }
            for r in results
        ],
    }
