"""Every code's effect through a whole turn: the dispatcher's step, the rows and the lead that
`conversations.turns.commit` writes, what is sent."""

from typing import Any

import pytest
from pytest_django import Settings

from conversations.labels import event_text
from conversations.models import CrmStatus, Direction, Instance, Lead, LLMCall
from tests.fakes.webhook_receiver import WebhookReceiver, receiver  # noqa: F401 (fixture)
from tests.helpers.fake_collaborators import NOW
from tests.helpers.pipeline import (
    COLLECTING,
    CUSTOMER_PHONE,
    OPEN_TEXT,
    QUALIFYING,
    REGISTRATION,
    VALID_CPF,
    S,
    confirming,
    events,
    inbound,
    llm_calls,
    make_session,
    outbound,
    pipeline,
)

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("catalog")]


# --- Every code's effect ------------------------------------------------------------------------------


def test_routing_2_invokes_qualificacao_in_the_same_turn_with_one_reply(
    instance: Instance, capture: Any
) -> None:
    session = make_session(instance)
    inbound(session, "Quero um orçamento de análise de água")
    run = pipeline(
        '{"s":2,"segmento":"AMBIENTAL","intencao":"ORCAMENTO"}Vou te passar para a qualificação!',
        '{"s":1}Qual é a origem da água: poço ou rede pública?',
    )

    run.run(session, capture=capture)

    assert [c["model"] for c in run.llm.calls] == ["gpt-4o-mini", "gpt-4o-mini"]
    assert "qualificação" in run.llm.calls[1]["instructions"]
    assert "AMBIENTAL" in run.llm.calls[1]["instructions"]
    [reply] = outbound(session)
    assert (reply.content, reply.agent, reply.code) == (
        "Qual é a origem da água: poço ou rede pública?",
        "qualificacao",
        1,
    )
    assert run.sent == [reply.pk]
    session.refresh_from_db()
    assert (session.state, session.segment, session.intent) == (
        "QUALIFYING",
        "AMBIENTAL",
        "ORCAMENTO",
    )
    assert events(session) == [("state_changed", "to_qualification")]
    assert event_text(session.messages.get(direction=Direction.SYSTEM)) == (
        "Mudou para Qualificação (código 2)."
    )
    assert llm_calls(session) == [
        ("agent", "triagem", "gpt-4o-mini", "ok"),
        ("agent", "qualificacao", "gpt-4o-mini", "ok"),
    ]
    assert len({c.turn_id for c in LLMCall.objects.all()} | {reply.turn_id}) == 1


def test_routing_3_types_the_parameters_and_invokes_coleta(
    instance: Instance, capture: Any
) -> None:
    session = make_session(instance, S.QUALIFYING, **QUALIFYING)
    inbound(session, "São 3 amostras de poço")
    run = pipeline(
        '{"s":3,"servico":"AGUA_POTABILIDADE","qualification_data":'
        '{"tipo_amostra":"poço","quantidade_amostras":"3","cor":"turva"}}',
        '{"s":1}Ótimo! Qual é o seu nome completo?',
    )

    run.run(session, capture=capture)

    session.refresh_from_db()
    assert (session.state, session.service) == ("DATA_COLLECT", "AGUA_POTABILIDADE")
    assert session.technical_data == {"tipo_amostra": "poço", "quantidade_amostras": 3}
    assert session.technical_extras == {"cor": "turva"}
    assert [(m.agent, m.content) for m in outbound(session)] == [
        ("coleta", "Ótimo! Qual é o seu nome completo?")
    ]
    assert events(session) == [("state_changed", "to_collection")]


def test_code_4_asks_confirmation_and_syncs_name_and_document(
    instance: Instance, capture: Any
) -> None:
    session = make_session(instance, S.DATA_COLLECT, **COLLECTING)
    inbound(session, "ana@example.com")
    run = pipeline(
        '{"s":4,"cadastro":{"nome":"Ana Lima","documento":"529.982.247-25",'
        '"email":"ana@example.com","setor":"qualidade"}}Confere: **Ana Lima**, CPF 529.982.247-25?'
    )

    run.run(session, capture=capture)

    session.refresh_from_db()
    assert session.state == "CONFIRM"
    assert session.registration_data == REGISTRATION
    assert session.confirmation_data == REGISTRATION
    assert session.registration_extras == {"setor": "qualidade"}
    assert (session.customer_name, session.customer_document) == ("Ana Lima", VALID_CPF)
    assert [m.content for m in outbound(session)] == ["Confere: *Ana Lima*, CPF 529.982.247-25?"]
    assert events(session) == [("state_changed", "ask_confirmation")]


def test_code_5_creates_the_lead_and_hands_off_with_the_model_message(
    instance: Instance, capture: Any
) -> None:
    session = confirming(instance)
    inbound(session, "Sim, está tudo certo")
    run = pipeline('{"s":5}Perfeito, Ana! Sua solicitação foi registrada.')

    run.run(session, capture=capture)

    session.refresh_from_db()
    assert (session.state, session.handoff_reason, session.handoff_detail) == (
        "HUMAN",
        "qualified_lead",
        "",
    )
    lead = Lead.objects.get(session=session)
    assert lead.crm_status == CrmStatus.NOT_CONFIGURED
    assert lead.data == {
        "nome_cliente": "Ana Lima",
        "telefone": CUSTOMER_PHONE,
        "segmento": "AMBIENTAL",
        "intencao": "ORCAMENTO",
        "servico": "AGUA_POTABILIDADE",
        "qualification_data": {"tipo_amostra": "poço", "quantidade_amostras": 2},
        "cadastro": REGISTRATION,
    }
    assert [m.content for m in outbound(session)] == [
        "Perfeito, Ana! Sua solicitação foi registrada."
    ]
    assert events(session) == [("lead_created", "confirmed"), ("handoff", "qualified_lead")]
    assert run.summaries == [session.pk]


def test_code_5_with_the_crm_configured_posts_the_lead_after_the_commit(
    instance: Instance,
    capture: Any,
    settings: Settings,
    receiver: WebhookReceiver,  # noqa: F811
) -> None:
    settings.CRM_WEBHOOK_URL, settings.CRM_WEBHOOK_SECRET = receiver.url, "crm-secret"
    session = confirming(instance)
    inbound(session, "Sim, está tudo certo")

    pipeline('{"s":5}Perfeito, Ana! Sua solicitação foi registrada.').run(session, capture=capture)

    lead = Lead.objects.get(session=session)
    assert (lead.crm_status, lead.crm_attempts) == (CrmStatus.SENT, 1)
    assert [(r.json["lead_id"], r.json["cadastro"]) for r in receiver.received] == [
        (lead.pk, REGISTRATION)
    ]


def test_code_5_with_the_confirmed_data_repeated_creates_the_lead_with_it(
    instance: Instance, capture: Any
) -> None:
    session = confirming(instance)
    inbound(session, "Sim, pode registrar")
    run = pipeline(
        '{"s":5,"cadastro":{"nome":"Ana Lima","documento":"529.982.247-25",'
        '"email":"ana@example.com"}}Perfeito, Ana! Sua solicitação foi registrada.'
    )

    run.run(session, capture=capture)

    assert Lead.objects.get(session=session).data["cadastro"] == REGISTRATION
    session.refresh_from_db()
    assert (session.state, session.handoff_reason) == ("HUMAN", "qualified_lead")


def test_code_5_with_a_changed_e_mail_creates_no_lead_and_asks_to_confirm_the_new_data(
    instance: Instance, capture: Any
) -> None:
    session = confirming(instance)
    inbound(session, "Sim! Ah, use o e-mail novo: ana.lima@novo.com.br")
    run = pipeline(
        '{"s":5,"cadastro":{"email":"ana.lima@novo.com.br"}}Perfeito! Solicitação registrada.',
        '{"s":4,"cadastro":{}}Confere: *Ana Lima*, CPF 529.982.247-25, e-mail '
        "ana.lima@novo.com.br?",
    )

    run.run(session, capture=capture)

    assert not Lead.objects.exists()
    new_registration = REGISTRATION | {"email": "ana.lima@novo.com.br"}
    session.refresh_from_db()
    assert (session.state, session.handoff_reason) == ("CONFIRM", "")
    assert session.registration_data == new_registration
    assert session.confirmation_data == new_registration
    assert [m.content for m in outbound(session)] == [
        "Confere: *Ana Lima*, CPF 529.982.247-25, e-mail ana.lima@novo.com.br?"
    ]
    assert events(session) == [
        ("confirmation_changed", "confirmed"),
        ("state_changed", "confirmed"),
        ("state_changed", "ask_confirmation"),
    ]
    assert [call[1] for call in llm_calls(session)] == ["coleta", "coleta"]
    assert run.summaries == []


def test_a_change_made_after_code_4_must_be_confirmed_before_a_lead_exists(
    instance: Instance, capture: Any
) -> None:
    session = confirming(instance)
    inbound(session, "Troca o e-mail para ana.lima@novo.com.br")
    pipeline('{"s":1,"cadastro":{"email":"ana.lima@novo.com.br"}}Anotado! Posso registrar?').run(
        session, capture=capture
    )
    inbound(session, "Pode")
    run = pipeline(
        '{"s":5}Perfeito! Solicitação registrada.',
        '{"s":4}Confere o e-mail novo: ana.lima@novo.com.br?',
    )

    run.run(session, capture=capture)

    assert not Lead.objects.exists()
    session.refresh_from_db()
    assert session.state == "CONFIRM"
    assert session.confirmation_data == REGISTRATION | {"email": "ana.lima@novo.com.br"}
    inbound(session, "Isso")
    pipeline('{"s":5}Registrado!').run(session, capture=capture)
    assert Lead.objects.get(session=session).data["cadastro"] == REGISTRATION | {
        "email": "ana.lima@novo.com.br"
    }


def test_code_6_goes_back_to_data_collection(instance: Instance, capture: Any) -> None:
    session = confirming(instance)
    inbound(session, "O e-mail está errado")
    run = pipeline('{"s":6}Sem problema! Qual é o e-mail correto?')

    run.run(session, capture=capture)

    session.refresh_from_db()
    assert (session.state, session.confirmation_data) == ("DATA_COLLECT", None)
    assert session.registration_data == REGISTRATION
    assert [m.content for m in outbound(session)] == ["Sem problema! Qual é o e-mail correto?"]


def test_code_7_clears_the_subject_keeps_the_registration_and_invokes_triagem(
    instance: Instance, capture: Any
) -> None:
    session = make_session(
        instance,
        S.DATA_COLLECT,
        **COLLECTING,
        technical_extras={"cor": "turva"},
        registration_data=REGISTRATION,
        loaded_packages=["COMPANY_INFO"],
    )
    inbound(session, "Na verdade quero falar de outra coisa")
    run = pipeline('{"s":7}', '{"s":1}Claro! Sobre o que você quer falar?')

    run.run(session, capture=capture)

    session.refresh_from_db()
    assert (session.state, session.segment, session.intent, session.service) == (
        "TRIAGE",
        "",
        "",
        "",
    )
    assert (session.technical_data, session.technical_extras) == ({}, {})
    assert session.registration_data == REGISTRATION
    assert session.loaded_packages == ["COMPANY_INFO"]
    assert [(m.agent, m.content) for m in outbound(session)] == [
        ("triagem", "Claro! Sobre o que você quer falar?")
    ]
    assert events(session) == [("state_changed", "change_subject")]


def test_code_8_closes_the_session_with_the_goodbye(instance: Instance, capture: Any) -> None:
    session = make_session(instance)
    inbound(session, "Era só isso, obrigado")
    run = pipeline('{"s":8}Por nada! Até logo.')

    run.run(session, capture=capture)

    session.refresh_from_db()
    assert (session.state, session.closed_at, session.handoff_reason) == ("CLOSED", NOW, "")
    assert [m.content for m in outbound(session)] == ["Por nada! Até logo."]
    assert events(session) == [("session_closed", "end")]
    assert run.summaries == []


def test_code_98_hands_off_with_the_motive_and_the_fixed_text(
    instance: Instance, capture: Any
) -> None:
    session = make_session(instance, S.QUALIFYING, **QUALIFYING)
    inbound(session, "Quero reclamar do último laudo")
    run = pipeline('{"s":98,"motivo":"reclamacao"}Já vou chamar alguém em 5 minutos!')

    run.run(session, capture=capture)

    session.refresh_from_db()
    assert (session.state, session.handoff_reason, session.handoff_detail) == (
        "HUMAN",
        "model_requested",
        "reclamacao",
    )
    # The model's text (with its promise of a time) is never sent.
    assert [(m.content, m.action) for m in outbound(session)] == [(OPEN_TEXT, "model_requested")]
    handoff = session.messages.get(direction=Direction.SYSTEM)
    assert (handoff.agent, handoff.json_part) == (
        "qualificacao",
        {"reason": "model_requested", "detail": "reclamacao", "motive": "reclamacao"},
    )
    assert run.summaries == [session.pk]


def test_rejected_values_are_logged_and_not_merged(instance: Instance, capture: Any) -> None:
    session = make_session(instance, S.DATA_COLLECT, **COLLECTING)
    inbound(session, "meu email é ana arroba exemplo")
    run = pipeline(
        '{"s":1,"cadastro":{"nome":"Ana","email":"ana arroba exemplo"}}Pode confirmar o e-mail?'
    )

    run.run(session, capture=capture)

    session.refresh_from_db()
    assert session.registration_data == {"nome": "Ana"}
    assert events(session) == [("data_rejected", "respond")]
    event = session.messages.get(direction=Direction.SYSTEM)
    # The field and the rule, not the value: the event's details are shown and logged.
    assert (event.content, event.json_part) == (
        "",
        {"cadastro.email": {"error": "email inválido: não tem a forma nome@domínio"}},
    )
    assert event_text(event) == (
        "Valores recusados (não gravados): cadastro.email "
        "(email inválido: não tem a forma nome@domínio)."
    )
    assert [m.content for m in outbound(session)] == ["Pode confirmar o e-mail?"]
