"""The dispatcher: what a validated `Action` does to the session, and what runs next (DESIGN.md §7).

`dispatch(action, context=...)` is a pure function from the session as the turn sees it (a
`SessionContext`) to a `Step`: the session after the action, the SYSTEM events to log, and what
the turn does next — reply, invoke another agent (codes 2, 3, 7), load packages and invoke the
same agent again (99), hand off (5, 98) or close (8). Code 4 keeps the registration it shows
(`SessionContext.confirmation_data`); a code 5 whose data differs from it is a correction, not a
confirmation: back to DATA_COLLECT and ``coleta`` again (`_confirmation_changed`), so the lead
holds exactly what the customer confirmed. The dispatcher, not the model, decides the interactive
elements of a reply (`Step.options`): code 4's message always carries the buttons Confirmar and
Corrigir (`CONFIRMATION_OPTIONS`); a code 1 or 6 carries the options the answer offered, ids
``opt1``..``optN`` (`offered_options`). Nothing is written here: the pipeline
applies a turn's steps in one transaction at its end, so a turn whose draft is superseded leaves
no trace but the draft.

One handler per code, in a table; what a code *is* (states, fields, message rule) stays in
`agents/codes.py` and has already been checked by `agents.actions.map_action`.
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from agents.actions import Action
from agents.codes import CONFIRM_BUTTON, CORRECT_BUTTON, Code
from agents.context import SessionContext
from agents.states import AgentName, HandoffMotive, HandoffReason, SessionState
from conversations.event_codes import EventCode
from whatsapp.interactive import Option

# Code 4's buttons (their titles: `agents.codes`); their ids are stable words, never the
# customer's data.
CONFIRM_OPTION = Option("confirmar", CONFIRM_BUTTON)
CORRECT_OPTION = Option("corrigir", CORRECT_BUTTON)
CONFIRMATION_OPTIONS: tuple[Option, ...] = (CONFIRM_OPTION, CORRECT_OPTION)


class Next(StrEnum):
    REPLY = "reply"  # send the model's message and end the turn (1, 4, 6)
    INVOKE = "invoke"  # invoke `Step.agent` now, in the same turn (2, 3, 7)
    ENRICH = "enrich"  # packages loaded: invoke the same agent again (99)
    HANDOFF = "handoff"  # to HUMAN (5 with the model's message, 98 with the fixed text)
    CLOSE = "close"  # to CLOSED with the model's goodbye (8)


@dataclass(frozen=True, slots=True)
class Handoff:
    reason: HandoffReason
    detail: str = ""
    motive: HandoffMotive | None = None


@dataclass(frozen=True, slots=True)
class SystemEvent:
    """A SYSTEM row of the message log: `event` is its message_type; staff read a sentence
    rendered from it and its parameters when shown (`conversations.labels.event_text`)."""

    event: EventCode
    agent: str = ""
    code: int | None = None
    action: str = ""
    details: Mapping[str, Any] = field(default_factory=dict)
    raw_response: str = ""


@dataclass(frozen=True, slots=True)
class Step:
    """The session after one action, and what the turn does next."""

    context: SessionContext
    next: Next
    agent: AgentName | None = None  # who is invoked next (INVOKE, ENRICH)
    reply: str = ""  # the model's customer text (REPLY, CLOSE, code 5)
    # The buttons or list rows sent with `reply` (REPLY only; a fallback to text drops them).
    options: tuple[Option, ...] = ()
    handoff: Handoff | None = None
    create_lead: bool = False
    events: tuple[SystemEvent, ...] = ()


def action_name(code: Code) -> str:
    """The `Message.action` value of a code: its table name in lower case (``to_collection``)."""
    return code.name.lower()


def dispatch(action: Action, *, context: SessionContext, raw_response: str = "") -> Step:
    """Apply `action` to `context` (pure); see the module docstring."""
    merged = replace(
        context,
        segment=action.segment,
        intent=action.intent,
        service=action.service,
        customer_name=action.customer_name,
        technical_data=dict(action.technical_data),
        technical_extras=dict(action.technical_extras),
        registration_data=dict(action.registration_data),
        registration_extras=dict(action.registration_extras),
    )
    events: list[SystemEvent] = []
    if action.rejected:
        events.append(_rejected_event(action, raw_response))
    step = _HANDLERS[action.code](action, merged, raw_response)
    return replace(step, events=(*events, *step.events))


def _transition(
    action: Action, context: SessionContext, to: SessionState, raw_response: str
) -> tuple[SessionContext, SystemEvent]:
    event = SystemEvent(
        event=EventCode.STATE_CHANGED,
        agent=action.agent.value,
        code=action.code.value,
        action=action_name(action.code),
        details={"from": context.state.value, "to": to.value},
        raw_response=raw_response,
    )
    return replace(context, state=to), event


def _rejected_event(action: Action, raw_response: str) -> SystemEvent:
    # Each field and the rule it broke, not the value: the value is the customer's data (a CPF,
    # an e-mail) and the event is shown and logged; the raw answer is kept beside it.
    return SystemEvent(
        event=EventCode.DATA_REJECTED,
        agent=action.agent.value,
        code=action.code.value,
        action=action_name(action.code),
        details={path: {"error": invalid.error} for path, invalid in action.rejected.items()},
        raw_response=raw_response,
    )


def offered_options(titles: tuple[str, ...]) -> tuple[Option, ...]:
    """The options an answer offered, with ids by position: the title is the customer's text
    when tapped, and an id made from it could carry what the customer wrote."""
    return tuple(Option(f"opt{number}", title) for number, title in enumerate(titles, 1))


def _respond(action: Action, context: SessionContext, raw: str) -> Step:
    return Step(
        context=context,
        next=Next.REPLY,
        reply=action.message,
        options=offered_options(action.options),
    )


def _route(to: SessionState, agent: AgentName) -> Callable[[Action, SessionContext, str], Step]:
    def handler(action: Action, context: SessionContext, raw: str) -> Step:
        moved, event = _transition(action, context, to, raw)
        return Step(context=moved, next=Next.INVOKE, agent=agent, events=(event,))

    return handler


def _ask_confirmation(action: Action, context: SessionContext, raw: str) -> Step:
    # What the code-4 message shows is what a code 5 may confirm (see `_confirmed`).
    shown = replace(context, confirmation_data=dict(action.registration_data))
    moved, event = _transition(action, shown, SessionState.CONFIRM, raw)
    return Step(
        context=moved,
        next=Next.REPLY,
        reply=action.message,
        options=CONFIRMATION_OPTIONS,
        events=(event,),
    )


def _correct_data(action: Action, context: SessionContext, raw: str) -> Step:
    moved, event = _transition(
        action, replace(context, confirmation_data=None), SessionState.DATA_COLLECT, raw
    )
    return Step(
        context=moved,
        next=Next.REPLY,
        reply=action.message,
        options=offered_options(action.options),
        events=(event,),
    )


def _change_subject(action: Action, context: SessionContext, raw: str) -> Step:
    # The subject goes; who the customer is (the registration) stays.
    cleared = replace(
        context,
        segment="",
        intent="",
        service="",
        technical_data={},
        technical_extras={},
        confirmation_data=None,
    )
    moved, event = _transition(action, cleared, SessionState.TRIAGE, raw)
    return Step(context=moved, next=Next.INVOKE, agent=AgentName.TRIAGEM, events=(event,))


def confirmation_changes(action: Action, context: SessionContext) -> list[str]:
    """The registration fields a code 5 would change in what the code-4 message showed.

    Compared after this answer's data is merged: a value the answer carries that differs, a
    value it carries that was refused (``cadastro.email`` with a bad e-mail), or a change made
    after code 4 (a code 1 in CONFIRM). No snapshot at all (a session in CONFIRM from before
    snapshots were kept) counts as a change: nothing proves what the customer saw.
    """
    shown = context.confirmation_data
    if shown is None:
        return ["cadastro"]
    now = action.registration_data
    changed = {f"cadastro.{k}" for k in {*shown, *now} if shown.get(k) != now.get(k)}
    changed |= {path for path in action.rejected if path.startswith("cadastro")}
    return sorted(changed)


def _confirmation_changed(
    action: Action, context: SessionContext, raw: str, changed: list[str]
) -> Step:
    """A code 5 that changes the confirmed data is a correction: back to DATA_COLLECT, where
    ``coleta`` runs again in the same turn and asks the customer to confirm the new data (code
    4). No lead, and the model's closing text is not sent: it announced a registration that did
    not happen."""
    event = SystemEvent(
        event=EventCode.CONFIRMATION_CHANGED,
        agent=action.agent.value,
        code=action.code.value,
        action=action_name(action.code),
        details={
            "changed": changed,
            "shown": dict(context.confirmation_data or {}),
            "sent": dict(action.registration_data),
        },
        raw_response=raw,
    )
    moved, transition = _transition(
        action, replace(context, confirmation_data=None), SessionState.DATA_COLLECT, raw
    )
    return Step(
        context=moved,
        next=Next.INVOKE,
        agent=AgentName.COLETA,
        events=(event, transition),
    )


def _confirmed(action: Action, context: SessionContext, raw: str) -> Step:
    changed = confirmation_changes(action, context)
    if changed:
        return _confirmation_changed(action, context, raw, changed)
    event = SystemEvent(
        event=EventCode.LEAD_CREATED,
        agent=action.agent.value,
        code=action.code.value,
        action=action_name(action.code),
        raw_response=raw,
    )
    return Step(
        context=context,
        next=Next.HANDOFF,
        reply=action.message,
        handoff=Handoff(HandoffReason.QUALIFIED_LEAD),
        create_lead=True,
        events=(event,),
    )


def _end(action: Action, context: SessionContext, raw: str) -> Step:
    event = SystemEvent(
        event=EventCode.SESSION_CLOSED,
        agent=action.agent.value,
        code=action.code.value,
        action=action_name(action.code),
        details={"from": context.state.value, "to": SessionState.CLOSED.value},
        raw_response=raw,
    )
    return Step(
        context=replace(context, state=SessionState.CLOSED),
        next=Next.CLOSE,
        reply=action.message,
        events=(event,),
    )


def _handoff(action: Action, context: SessionContext, raw: str) -> Step:
    motive = action.motive
    return Step(
        context=context,
        next=Next.HANDOFF,
        handoff=Handoff(
            HandoffReason.MODEL_REQUESTED, detail=motive.value if motive else "", motive=motive
        ),
    )


def _context_needed(action: Action, context: SessionContext, raw: str) -> Step:
    loaded = tuple(dict.fromkeys((*context.loaded_packages, *action.packages)))
    event = SystemEvent(
        event=EventCode.CONTEXT_LOADED,
        agent=action.agent.value,
        code=action.code.value,
        action=action_name(action.code),
        details={"packages": list(action.packages)},
        raw_response=raw,
    )
    return Step(
        context=replace(context, loaded_packages=loaded),
        next=Next.ENRICH,
        agent=action.agent,
        events=(event,),
    )


_HANDLERS: dict[Code, Callable[[Action, SessionContext, str], Step]] = {
    Code.RESPOND: _respond,
    Code.TO_QUALIFICATION: _route(SessionState.QUALIFYING, AgentName.QUALIFICACAO),
    Code.TO_COLLECTION: _route(SessionState.DATA_COLLECT, AgentName.COLETA),
    Code.ASK_CONFIRMATION: _ask_confirmation,
    Code.CONFIRMED: _confirmed,
    Code.CORRECT_DATA: _correct_data,
    Code.CHANGE_SUBJECT: _change_subject,
    Code.END: _end,
    Code.HANDOFF: _handoff,
    Code.CONTEXT_NEEDED: _context_needed,
}


def handoff_event(handoff: Handoff, *, agent: str = "", raw_response: str = "") -> SystemEvent:
    """The SYSTEM event of a handoff, whatever caused it (action, failure, pre-check)."""
    return SystemEvent(
        event=EventCode.HANDOFF,
        agent=agent,
        action=handoff.reason.value,
        details={
            "reason": handoff.reason.value,
            "detail": handoff.detail,
            "motive": handoff.motive.value if handoff.motive else "",
        },
        raw_response=raw_response,
    )
