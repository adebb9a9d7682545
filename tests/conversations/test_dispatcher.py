"""The dispatcher: every code's effect on the session and what the turn does next (pure)."""

from dataclasses import replace
from typing import Any

import pytest

from agents.actions import Action
from agents.codes import Code
from agents.context import InstanceInfo, SessionContext
from agents.fields import InvalidValue
from agents.states import AgentName, HandoffMotive, HandoffReason, SessionState
from conversations.dispatcher import (
    Handoff,
    Next,
    Step,
    SystemEvent,
    dispatch,
    handoff_event,
)
from conversations.event_codes import EventCode
from whatsapp.interactive import Option

S = SessionState
CONTEXT = SessionContext(
    session_id=3,
    state=S.QUALIFYING,
    instance=InstanceInfo("Lab"),
    customer_phone="5511912345678",
    customer_name="Ana",
    segment="AMBIENTAL",
    intent="ORCAMENTO",
    service="AGUA_POTABILIDADE",
    technical_data={"tipo_amostra": "poço"},
    technical_extras={"cor": "turva"},
    registration_data={"nome": "Ana", "email": "ana@example.com"},
    registration_extras={"cargo": "química"},
    loaded_packages=("COMPANY_INFO",),
)


def action(code: Code, agent: AgentName, *, message: str = "", **changes: object) -> Action:
    values: dict[str, Any] = {
        "segment": CONTEXT.segment,
        "intent": CONTEXT.intent,
        "service": CONTEXT.service,
        "customer_name": CONTEXT.customer_name,
        "technical_data": CONTEXT.technical_data,
        "technical_extras": CONTEXT.technical_extras,
        "registration_data": CONTEXT.registration_data,
        "registration_extras": CONTEXT.registration_extras,
    }
    values.update(changes)
    return Action(code=code, agent=agent, message=message, **values)


def in_state(state: SessionState) -> SessionContext:
    return replace(CONTEXT, state=state)


def confirming() -> SessionContext:
    """CONFIRM after a code 4 that showed the session's registration."""
    return replace(CONTEXT, state=S.CONFIRM, confirmation_data=dict(CONTEXT.registration_data))


def transition(code: int, agent: AgentName, frm: SessionState, to: SessionState) -> SystemEvent:
    return SystemEvent(
        event=EventCode.STATE_CHANGED,
        agent=agent.value,
        code=code,
        action=Code(code).name.lower(),
        details={"from": frm.value, "to": to.value},
        raw_response="RAW",
    )


def test_1_replies_and_stays_with_the_merged_data() -> None:
    step = dispatch(
        action(
            Code.RESPOND,
            AgentName.QUALIFICACAO,
            message="Quantas amostras?",
            technical_data={"tipo_amostra": "rio"},
        ),
        context=CONTEXT,
        raw_response="RAW",
    )

    assert step == Step(
        context=replace(CONTEXT, technical_data={"tipo_amostra": "rio"}),
        next=Next.REPLY,
        reply="Quantas amostras?",
    )


def test_2_moves_to_qualifying_and_invokes_qualificacao_now() -> None:
    triage = replace(in_state(S.TRIAGE), segment="", intent="")

    step = dispatch(
        action(Code.TO_QUALIFICATION, AgentName.TRIAGEM, segment="AMBIENTAL", intent="ORCAMENTO"),
        context=triage,
        raw_response="RAW",
    )

    assert step == Step(
        context=replace(triage, state=S.QUALIFYING, segment="AMBIENTAL", intent="ORCAMENTO"),
        next=Next.INVOKE,
        agent=AgentName.QUALIFICACAO,
        events=(transition(2, AgentName.TRIAGEM, S.TRIAGE, S.QUALIFYING),),
    )


def test_3_moves_to_data_collection_and_invokes_coleta_now() -> None:
    step = dispatch(
        action(Code.TO_COLLECTION, AgentName.QUALIFICACAO), context=CONTEXT, raw_response="RAW"
    )

    assert step == Step(
        context=in_state(S.DATA_COLLECT),
        next=Next.INVOKE,
        agent=AgentName.COLETA,
        events=(transition(3, AgentName.QUALIFICACAO, S.QUALIFYING, S.DATA_COLLECT),),
    )


def test_4_moves_to_confirm_and_replies_with_the_confirmar_and_corrigir_buttons() -> None:
    step = dispatch(
        action(Code.ASK_CONFIRMATION, AgentName.COLETA, message="Confere?"),
        context=in_state(S.DATA_COLLECT),
        raw_response="RAW",
    )

    assert step == Step(
        context=confirming(),
        next=Next.REPLY,
        reply="Confere?",
        options=(Option("confirmar", "Confirmar"), Option("corrigir", "Corrigir")),
        events=(transition(4, AgentName.COLETA, S.DATA_COLLECT, S.CONFIRM),),
    )


def test_1_offers_the_answer_s_options_with_ids_by_position() -> None:
    step = dispatch(
        action(
            Code.RESPOND,
            AgentName.TRIAGEM,
            message="Qual é o segmento?",
            options=("Alimentos", "Ambiental"),
        ),
        context=in_state(S.TRIAGE),
        raw_response="RAW",
    )

    assert (step.reply, step.options) == (
        "Qual é o segmento?",
        (Option("opt1", "Alimentos"), Option("opt2", "Ambiental")),
    )


def test_6_offers_the_answer_s_options() -> None:
    step = dispatch(
        action(Code.CORRECT_DATA, AgentName.COLETA, message="O que mudou?", options=("E-mail",)),
        context=confirming(),
        raw_response="RAW",
    )

    assert (step.next, step.options) == (Next.REPLY, (Option("opt1", "E-mail"),))


def test_5_and_8_carry_no_options() -> None:
    confirmed = dispatch(
        action(Code.CONFIRMED, AgentName.COLETA, message="Registrado!"),
        context=confirming(),
        raw_response="RAW",
    )
    closed = dispatch(action(Code.END, AgentName.COLETA, message="Até logo!"), context=confirming())

    assert (confirmed.options, closed.options) == ((), ())


def test_5_hands_off_as_a_qualified_lead_with_the_model_message() -> None:
    step = dispatch(
        action(Code.CONFIRMED, AgentName.COLETA, message="Registrado!"),
        context=confirming(),
        raw_response="RAW",
    )

    assert step == Step(
        context=confirming(),
        next=Next.HANDOFF,
        reply="Registrado!",
        handoff=Handoff(HandoffReason.QUALIFIED_LEAD),
        create_lead=True,
        events=(
            SystemEvent(
                event=EventCode.LEAD_CREATED,
                agent="coleta",
                code=5,
                action="confirmed",
                raw_response="RAW",
            ),
        ),
    )


def test_6_goes_back_to_data_collection_and_replies() -> None:
    step = dispatch(
        action(Code.CORRECT_DATA, AgentName.COLETA, message="O que corrigir?"),
        context=confirming(),
        raw_response="RAW",
    )

    assert step == Step(
        context=in_state(S.DATA_COLLECT),
        next=Next.REPLY,
        reply="O que corrigir?",
        events=(transition(6, AgentName.COLETA, S.CONFIRM, S.DATA_COLLECT),),
    )


def test_5_with_the_data_code_4_showed_confirms_it() -> None:
    sent_again = {"nome": "Ana", "email": "ana@example.com"}

    step = dispatch(
        action(
            Code.CONFIRMED, AgentName.COLETA, message="Registrado!", registration_data=sent_again
        ),
        context=confirming(),
        raw_response="RAW",
    )

    assert (step.next, step.create_lead, step.context.confirmation_data) == (
        Next.HANDOFF,
        True,
        {"nome": "Ana", "email": "ana@example.com"},
    )


def test_5_that_changes_the_confirmed_data_is_a_correction_that_asks_coleta_again() -> None:
    changed = {"nome": "Ana", "email": "outra@example.com"}

    step = dispatch(
        action(Code.CONFIRMED, AgentName.COLETA, message="Registrado!", registration_data=changed),
        context=confirming(),
        raw_response="RAW",
    )

    assert step == Step(
        context=replace(
            CONTEXT, state=S.DATA_COLLECT, registration_data=changed, confirmation_data=None
        ),
        next=Next.INVOKE,
        agent=AgentName.COLETA,
        events=(
            SystemEvent(
                event=EventCode.CONFIRMATION_CHANGED,
                agent="coleta",
                code=5,
                action="confirmed",
                details={
                    "changed": ["cadastro.email"],
                    "shown": {"nome": "Ana", "email": "ana@example.com"},
                    "sent": changed,
                },
                raw_response="RAW",
            ),
            transition(5, AgentName.COLETA, S.CONFIRM, S.DATA_COLLECT),
        ),
    )


def test_5_carrying_a_refused_registration_value_is_a_correction_too() -> None:
    step = dispatch(
        action(
            Code.CONFIRMED,
            AgentName.COLETA,
            message="Registrado!",
            rejected={"cadastro.email": InvalidValue("x@", "email inválido: 'x@'")},
        ),
        context=confirming(),
        raw_response="RAW",
    )

    assert (step.next, step.agent, step.create_lead, step.reply) == (
        Next.INVOKE,
        AgentName.COLETA,
        False,
        "",
    )
    assert [e.event for e in step.events] == [
        "data_rejected",
        "confirmation_changed",
        "state_changed",
    ]
    assert step.events[1].details["changed"] == ["cadastro.email"]


def test_5_without_a_snapshot_of_what_code_4_showed_asks_for_confirmation_again() -> None:
    step = dispatch(
        action(Code.CONFIRMED, AgentName.COLETA, message="Registrado!"),
        context=in_state(S.CONFIRM),
        raw_response="RAW",
    )

    assert (step.next, step.context.state, step.create_lead) == (
        Next.INVOKE,
        S.DATA_COLLECT,
        False,
    )
    assert step.events[0].details["changed"] == ["cadastro"]


@pytest.mark.parametrize("state", [S.QUALIFYING, S.DATA_COLLECT, S.CONFIRM])
def test_7_clears_the_subject_keeps_the_registration_and_invokes_triagem(
    state: SessionState,
) -> None:
    agent = AgentName.QUALIFICACAO if state is S.QUALIFYING else AgentName.COLETA

    before = confirming() if state is S.CONFIRM else in_state(state)

    step = dispatch(action(Code.CHANGE_SUBJECT, agent), context=before, raw_response="RAW")

    assert step.context == replace(
        CONTEXT,
        state=S.TRIAGE,
        segment="",
        intent="",
        service="",
        technical_data={},
        technical_extras={},
    )
    assert step.context.registration_data == {"nome": "Ana", "email": "ana@example.com"}
    assert step.context.registration_extras == {"cargo": "química"}
    assert step.context.loaded_packages == ("COMPANY_INFO",)
    assert (step.next, step.agent) == (Next.INVOKE, AgentName.TRIAGEM)
    assert [e.details for e in step.events] == [{"from": state.value, "to": "TRIAGE"}]


def test_8_closes_with_the_model_goodbye() -> None:
    step = dispatch(
        action(Code.END, AgentName.QUALIFICACAO, message="Até logo!"),
        context=CONTEXT,
        raw_response="RAW",
    )

    assert step == Step(
        context=in_state(S.CLOSED),
        next=Next.CLOSE,
        reply="Até logo!",
        events=(
            SystemEvent(
                event=EventCode.SESSION_CLOSED,
                agent="qualificacao",
                code=8,
                action="end",
                details={"from": "QUALIFYING", "to": "CLOSED"},
                raw_response="RAW",
            ),
        ),
    )


def test_98_hands_off_with_its_motive_and_no_model_text() -> None:
    step = dispatch(
        replace(action(Code.HANDOFF, AgentName.QUALIFICACAO), motive=HandoffMotive.RECLAMACAO),
        context=CONTEXT,
        raw_response="RAW",
    )

    assert step == Step(
        context=CONTEXT,
        next=Next.HANDOFF,
        handoff=Handoff(HandoffReason.MODEL_REQUESTED, "reclamacao", HandoffMotive.RECLAMACAO),
    )


def test_99_adds_the_packages_and_invokes_the_same_agent_again() -> None:
    step = dispatch(
        replace(
            action(Code.CONTEXT_NEEDED, AgentName.QUALIFICACAO),
            packages=("PRAZOS_E_ENTREGA", "COMPANY_INFO"),
        ),
        context=CONTEXT,
        raw_response="RAW",
    )

    assert step.context == replace(CONTEXT, loaded_packages=("COMPANY_INFO", "PRAZOS_E_ENTREGA"))
    assert (step.next, step.agent, step.reply) == (Next.ENRICH, AgentName.QUALIFICACAO, "")
    assert step.events == (
        SystemEvent(
            event=EventCode.CONTEXT_LOADED,
            agent="qualificacao",
            code=99,
            action="context_needed",
            details={"packages": ["PRAZOS_E_ENTREGA", "COMPANY_INFO"]},
            raw_response="RAW",
        ),
    )


def test_rejected_values_are_logged_as_an_event_before_the_code_effect() -> None:
    rejected = {
        "cadastro.email": InvalidValue("x@", "email inválido: não tem a forma nome@domínio")
    }

    step = dispatch(
        replace(
            action(Code.ASK_CONFIRMATION, AgentName.COLETA, message="Confere?"), rejected=rejected
        ),
        context=in_state(S.DATA_COLLECT),
        raw_response="RAW",
    )

    assert [e.event for e in step.events] == ["data_rejected", "state_changed"]
    assert step.events[0] == SystemEvent(
        event=EventCode.DATA_REJECTED,
        agent="coleta",
        code=4,
        action="ask_confirmation",
        details={"cadastro.email": {"error": "email inválido: não tem a forma nome@domínio"}},
        raw_response="RAW",
    )


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        (Code.RESPOND, Next.REPLY),
        (Code.TO_QUALIFICATION, Next.INVOKE),
        (Code.TO_COLLECTION, Next.INVOKE),
        (Code.ASK_CONFIRMATION, Next.REPLY),
        (Code.CONFIRMED, Next.HANDOFF),
        (Code.CORRECT_DATA, Next.REPLY),
        (Code.CHANGE_SUBJECT, Next.INVOKE),
        (Code.END, Next.CLOSE),
        (Code.HANDOFF, Next.HANDOFF),
        (Code.CONTEXT_NEEDED, Next.ENRICH),
    ],
)
def test_what_each_code_does_next(code: Code, expected: Next) -> None:
    step = dispatch(action(code, AgentName.COLETA, message="m"), context=confirming())

    assert step.next is expected


def test_the_handoff_event() -> None:
    event = handoff_event(
        Handoff(HandoffReason.MODEL_REQUESTED, "reclamacao", HandoffMotive.RECLAMACAO),
        agent="triagem",
        raw_response="RAW",
    )

    assert event == SystemEvent(
        event=EventCode.HANDOFF,
        agent="triagem",
        action="model_requested",
        details={"reason": "model_requested", "detail": "reclamacao", "motive": "reclamacao"},
        raw_response="RAW",
    )
