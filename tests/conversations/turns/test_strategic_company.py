"""The strategic-company rule of `conversations.turns.think`: a strategic company's contact goes to
a human before any model call, and a CNPJ or name the model collected hands off instead of the
reply."""

from typing import Any

import pytest

from conversations.models import Instance, LLMCall
from tests.helpers.pipeline import (
    COLLECTING,
    OPEN_TEXT,
    S,
    events,
    inbound,
    make_session,
    outbound,
    pipeline,
)

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("catalog")]


# --- Strategic companies ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("phones", "cnpj", "session_fields"),
    [
        ("+55 11 98888-7777", "", {}),
        ("", "11222333000181", {"customer_document": "11222333000181"}),
    ],
    ids=["by-phone", "by-cnpj"],
)
def test_a_strategic_company_is_handed_off_before_any_model_call(
    instance: Instance, capture: Any, phones: str, cnpj: str, session_fields: dict[str, Any]
) -> None:
    from prompts_admin.models import StrategicCompany

    StrategicCompany.objects.create(name="Indústria Parceira", cnpj=cnpj, phone_numbers=phones)
    session = make_session(instance, **session_fields)
    inbound(session, "Oi")
    run = pipeline()

    run.run(session, capture=capture)

    assert run.llm.calls == []
    session.refresh_from_db()
    assert (session.state, session.handoff_reason, session.handoff_detail) == (
        "HUMAN",
        "strategic_company",
        "Indústria Parceira",
    )
    assert [m.content for m in outbound(session)] == [OPEN_TEXT]
    assert events(session) == [("handoff", "strategic_company")]
    assert run.summaries == [session.pk]


def test_an_inactive_strategic_company_does_not_count(instance: Instance, capture: Any) -> None:
    from prompts_admin.models import StrategicCompany

    StrategicCompany.objects.create(
        name="Antiga", phone_numbers="+55 11 98888-7777", is_active=False
    )
    session = make_session(instance)
    inbound(session, "Oi")
    run = pipeline('{"s":1}Olá!')

    run.run(session, capture=capture)

    assert len(run.llm.calls) == 1
    session.refresh_from_db()
    assert session.state == "TRIAGE"


def test_a_strategic_cnpj_given_in_the_turn_hands_off_instead_of_the_reply(
    instance: Instance, capture: Any
) -> None:
    from prompts_admin.models import StrategicCompany

    StrategicCompany.objects.create(name="Indústria Parceira", cnpj="11222333000181")
    session = make_session(instance, S.DATA_COLLECT, **COLLECTING)
    # Written so that only the model reads it as a CNPJ: the rule after the model call decides.
    inbound(session, "O CNPJ é 11.222.333 barra 0001-81")
    run = pipeline('{"s":1,"cadastro":{"documento":"11.222.333/0001-81"}}E o nome da empresa?')

    run.run(session, capture=capture)

    assert len(run.llm.calls) == 1
    session.refresh_from_db()
    assert (session.state, session.handoff_reason, session.customer_document) == (
        "HUMAN",
        "strategic_company",
        "11222333000181",
    )
    assert [m.content for m in outbound(session)] == [OPEN_TEXT]


def test_a_strategic_cnpj_written_in_the_turn_hands_off_before_any_model_call(
    instance: Instance, capture: Any
) -> None:
    from prompts_admin.models import StrategicCompany

    StrategicCompany.objects.create(name="Indústria Parceira", cnpj="11222333000181")
    session = make_session(instance, S.DATA_COLLECT, **COLLECTING)
    inbound(session, "CNPJ 11.222.333/0001-81")
    run = pipeline('{"s":1}E o nome da empresa?')

    run.run(session, capture=capture)

    assert run.llm.calls == []
    session.refresh_from_db()
    assert (session.state, session.handoff_reason, session.handoff_detail) == (
        "HUMAN",
        "strategic_company",
        "Indústria Parceira",
    )
    assert [m.content for m in outbound(session)] == [OPEN_TEXT]
    assert LLMCall.objects.count() == 0


@pytest.mark.parametrize(
    "texts",
    [
        ["aqui é da acme"],
        ["Bom dia!", "Falo pela ACMÉ, do setor de qualidade"],
        ["Oi! Aqui é o Pedro, do setor de compras da Acme."],
    ],
)
def test_a_strategic_company_named_by_the_customer_is_handed_off_before_any_model_call(
    instance: Instance, capture: Any, texts: list[str]
) -> None:
    from prompts_admin.models import StrategicCompany

    StrategicCompany.objects.create(name="ACME S.A.", cnpj="11222333000181")
    session = make_session(instance)
    for text in texts:
        inbound(session, text)
    run = pipeline('{"s":1}Olá!')

    run.run(session, capture=capture)

    assert run.llm.calls == []
    session.refresh_from_db()
    assert (session.state, session.handoff_reason, session.handoff_detail) == (
        "HUMAN",
        "strategic_company",
        "ACME S.A.",
    )
    assert [m.content for m in outbound(session)] == [OPEN_TEXT]
    assert events(session) == [("handoff", "strategic_company")]
    assert run.summaries == [session.pk]
    assert LLMCall.objects.count() == 0


def test_a_name_inside_another_word_is_not_a_strategic_company(
    instance: Instance, capture: Any
) -> None:
    from prompts_admin.models import StrategicCompany

    StrategicCompany.objects.create(name="Alfa Ltda", cnpj="11222333000181")
    session = make_session(instance)
    inbound(session, "Oi, quero analisar a água da escola Alfabeto")
    run = pipeline('{"s":1}Olá! Como posso ajudar?')

    run.run(session, capture=capture)

    assert len(run.llm.calls) == 1
    session.refresh_from_db()
    assert (session.state, session.handoff_reason) == ("TRIAGE", "")
    assert [m.content for m in outbound(session)] == ["Olá! Como posso ajudar?"]


def test_a_strategic_company_collected_as_empresa_hands_off_instead_of_the_reply(
    instance: Instance, capture: Any
) -> None:
    from prompts_admin.models import StrategicCompany

    StrategicCompany.objects.create(name="Indústria Parceira Ltda-ME", cnpj="11222333000181")
    session = make_session(instance, S.DATA_COLLECT, **COLLECTING)
    inbound(session, "É a IP, Indústria Parceria")  # misspelt: only the model recognises it
    run = pipeline('{"s":1,"cadastro":{"empresa":"industria parceira"}}Qual é o CNPJ?')

    run.run(session, capture=capture)

    assert len(run.llm.calls) == 1
    session.refresh_from_db()
    assert (session.state, session.handoff_reason, session.handoff_detail) == (
        "HUMAN",
        "strategic_company",
        "Indústria Parceira Ltda-ME",
    )
    assert session.registration_data["empresa"] == "industria parceira"
    assert [m.content for m in outbound(session)] == [OPEN_TEXT]


def test_a_strategic_company_already_collected_as_empresa_hands_off_on_the_next_turn(
    instance: Instance, capture: Any
) -> None:
    from prompts_admin.models import StrategicCompany

    session = make_session(
        instance, S.DATA_COLLECT, **COLLECTING, registration_data={"empresa": "Parceira"}
    )
    # Registered after the customer named it (or activated again).
    StrategicCompany.objects.create(name="PARCEIRA EIRELI")
    inbound(session, "Pode seguir")
    run = pipeline('{"s":1}Qual é o CNPJ?')

    run.run(session, capture=capture)

    assert run.llm.calls == []
    session.refresh_from_db()
    assert (session.state, session.handoff_reason) == ("HUMAN", "strategic_company")
