"""Action mapping: code allowed per agent and state, required fields, merges, extras, errors."""

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import pytest

from agents.actions import Action, ContractError, map_action
from agents.codes import Code
from agents.context import (
    CatalogSnapshot,
    InstanceInfo,
    IntentInfo,
    PackageInfo,
    SegmentInfo,
    ServiceInfo,
    SessionContext,
)
from agents.contract import parse_llm_response
from agents.fields import InvalidValue
from agents.parameters import ParameterSpec
from agents.states import AGENT_FOR_STATE, AgentName, HandoffMotive, HandoffReason, SessionState

S = SessionState
VALID_CPF = "52998224725"
VALID_CNPJ = "11222333000181"

CATALOG = CatalogSnapshot(
    segments={
        "AMBIENTAL": SegmentInfo("AMBIENTAL", "Ambiental"),
        "HUMANO": SegmentInfo("HUMANO", "Humano", health_sensitive=True),
    },
    intents={
        "ORCAMENTO": IntentInfo("ORCAMENTO", "Orçamento"),
        "DUVIDA_TECNICA": IntentInfo("DUVIDA_TECNICA", "Dúvida técnica"),
    },
    services={
        "AGUA_POTABILIDADE": ServiceInfo(
            "AGUA_POTABILIDADE",
            "Potabilidade da água",
            "AMBIENTAL",
            parameters=(
                ParameterSpec("tipo_amostra", "Tipo de amostra", "text", required=True),
                ParameterSpec("quantidade_amostras", "Quantidade", "integer", required=True),
                ParameterSpec("cidade_coleta", "Cidade da coleta", "text"),
            ),
        ),
        "SOLO_METAIS": ServiceInfo(
            "SOLO_METAIS",
            "Metais em solo",
            "AMBIENTAL",
            parameters=(
                ParameterSpec("quantidade_amostras", "Quantidade", "integer", required=True),
                ParameterSpec("urgente", "Urgente", "boolean"),
            ),
        ),
        "HEMOGRAMA": ServiceInfo("HEMOGRAMA", "Hemograma", "HUMANO"),
    },
    packages={
        "COMPANY_INFO": PackageInfo("COMPANY_INFO", "Empresa", "Quem somos"),
        "PRAZOS_E_ENTREGA": PackageInfo("PRAZOS_E_ENTREGA", "Prazos", "Prazos de entrega"),
    },
)


def context(state: SessionState = S.TRIAGE, **values: Any) -> SessionContext:
    return SessionContext(session_id=7, state=state, instance=InstanceInfo("Lab"), **values)


QUALIFYING = context(S.QUALIFYING, segment="AMBIENTAL", intent="ORCAMENTO")
COLLECTING = context(
    S.DATA_COLLECT,
    segment="AMBIENTAL",
    intent="ORCAMENTO",
    service="AGUA_POTABILIDADE",
    technical_data={"tipo_amostra": "poço", "quantidade_amostras": 2},
)


def act(raw: str, ctx: SessionContext) -> Action:
    return map_action(
        parse_llm_response(raw), agent=AGENT_FOR_STATE[ctx.state], context=ctx, catalog=CATALOG
    )


def refused(raw: str, ctx: SessionContext) -> ContractError:
    with pytest.raises(ContractError) as excinfo:
        act(raw, ctx)
    return excinfo.value


# --- Which code in which state (DESIGN.md §7) ---------------------------------------------------

ALLOWED: dict[int, set[SessionState]] = {
    1: {S.TRIAGE, S.QUALIFYING, S.DATA_COLLECT, S.CONFIRM},
    2: {S.TRIAGE},
    3: {S.QUALIFYING},
    4: {S.DATA_COLLECT},
    5: {S.CONFIRM},
    6: {S.CONFIRM},
    7: {S.QUALIFYING, S.DATA_COLLECT, S.CONFIRM},
    8: {S.TRIAGE, S.QUALIFYING, S.DATA_COLLECT, S.CONFIRM},
    98: {S.TRIAGE, S.QUALIFYING, S.DATA_COLLECT, S.CONFIRM},
    99: {S.TRIAGE, S.QUALIFYING, S.DATA_COLLECT, S.CONFIRM},
}


@pytest.mark.parametrize(
    ("code", "state"),
    [
        (code, state)
        for code, states in ALLOWED.items()
        for state in (S.TRIAGE, S.QUALIFYING, S.DATA_COLLECT, S.CONFIRM)
        if state not in states
    ],
)
def test_a_code_outside_its_states_is_an_invalid_contract(code: int, state: SessionState) -> None:
    error = refused(f'{{"s":{code}}}Texto', context(state))

    assert error.problem == "code_not_allowed"
    assert error.reason is HandoffReason.LLM_INVALID_CONTRACT
    assert error.field == "s"
    assert str(error) == (
        f"code {code} ({Code(code).name}) is not allowed for {AGENT_FOR_STATE[state]} "
        f"in state {state}"
    )


@pytest.mark.parametrize("code", [0, 9, 97, 100, 123, -1])
def test_an_unknown_code_is_an_invalid_contract(code: int) -> None:
    error = refused(f'{{"s":{code}}}Texto', context())

    assert (error.problem, error.field, str(error)) == (
        "unknown_code",
        "s",
        f"code {code} is not in the code table",
    )


def test_the_agent_must_be_the_one_of_the_state() -> None:
    with pytest.raises(ValueError, match="agent coleta does not serve state TRIAGE"):
        map_action(
            parse_llm_response('{"s":1}Oi'),
            agent=AgentName.COLETA,
            context=context(),
            catalog=CATALOG,
        )


# --- Messages: required or ignored ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "ctx"),
    [
        (1, context()),
        (4, COLLECTING),
        (5, context(S.CONFIRM)),
        (6, context(S.CONFIRM)),
        (8, context()),
    ],
)
@pytest.mark.parametrize("message", ["", "   \n "])
def test_a_required_message_that_is_empty_is_an_invalid_contract(
    code: int, ctx: SessionContext, message: str
) -> None:
    error = refused(f'{{"s":{code}}}{message}', ctx)

    assert error.problem == "empty_message"
    assert str(error) == f"code {code} ({Code(code).name}) requires a message for the customer"


@pytest.mark.parametrize(
    ("raw", "ctx"),
    [
        ('{"s":2,"segmento":"AMBIENTAL","intencao":"ORCAMENTO"}Vou te passar...', context()),
        ('{"s":7}Claro, vamos mudar de assunto.', QUALIFYING),
        ('{"s":98,"motivo":"pedido_cliente"}Vou chamar alguém agora!', context()),
        ('{"s":99,"context_needed":"COMPANY_INFO"}Um momento.', context()),
    ],
)
def test_the_message_of_an_ignored_code_is_dropped(raw: str, ctx: SessionContext) -> None:
    assert act(raw, ctx).message == ""


def test_a_required_message_is_kept_without_surrounding_whitespace() -> None:
    assert act('{"s":1}  Olá! Como posso ajudar?\n\n', context()).message == (
        "Olá! Como posso ajudar?"
    )


# --- triagem ---------------------------------------------------------------------------------------


def test_code_2_sets_segment_and_intent() -> None:
    action = act('{"s":2,"segmento":"ambiental","intencao":" ORCAMENTO "}', context())

    assert action == Action(
        code=Code.TO_QUALIFICATION,
        agent=AgentName.TRIAGEM,
        message="",
        segment="AMBIENTAL",
        intent="ORCAMENTO",
        service="",
        customer_name="",
        technical_data={},
        technical_extras={},
        registration_data={},
        registration_extras={},
    )


@pytest.mark.parametrize(
    ("raw", "problem", "field", "detail"),
    [
        (
            '{"s":2,"intencao":"ORCAMENTO"}',
            "missing_field",
            "segmento",
            "code 2 requires segmento (an active segment)",
        ),
        (
            '{"s":2,"segmento":"AMBIENTAL"}',
            "missing_field",
            "intencao",
            "code 2 requires intencao (an active intent)",
        ),
        (
            '{"s":2,"segmento":"VETERINARIO","intencao":"ORCAMENTO"}',
            "invalid_field",
            "segmento",
            "code 2: invalid segmento: segmento inexistente ou inativo",
        ),
        (
            '{"s":2,"segmento":"AMBIENTAL","intencao":7}',
            "invalid_field",
            "intencao",
            "code 2: invalid intencao: intenção inexistente ou inativa",
        ),
    ],
)
def test_code_2_requires_an_active_segment_and_intent(
    raw: str, problem: str, field: str, detail: str
) -> None:
    error = refused(raw, context())

    assert (error.problem, error.field, str(error)) == (problem, field, detail)


def test_code_2_accepts_a_segment_identified_earlier_in_the_session() -> None:
    action = act('{"s":2,"intencao":"ORCAMENTO"}', context(segment="AMBIENTAL"))

    assert (action.segment, action.intent) == ("AMBIENTAL", "ORCAMENTO")


def test_code_2_refuses_a_segment_deactivated_since_it_was_identified() -> None:
    error = refused('{"s":2,"intencao":"ORCAMENTO"}', context(segment="ANTIGO"))

    assert (error.problem, str(error)) == (
        "invalid_field",
        "code 2: segmento 'ANTIGO' is no longer active",
    )


def test_code_1_of_triagem_merges_valid_fields_and_reports_invalid_ones() -> None:
    action = act(
        '{"s":1,"segmento":"NAO_EXISTE","intencao":"DUVIDA_TECNICA","nome_cliente":" Ana  Lima "}'
        "Prazer, Ana!",
        context(segment="AMBIENTAL"),
    )

    assert (action.segment, action.intent, action.customer_name) == (
        "AMBIENTAL",
        "DUVIDA_TECNICA",
        "Ana Lima",
    )
    assert action.rejected == {
        "segmento": InvalidValue("NAO_EXISTE", "segmento inexistente ou inativo")
    }
    assert action.message == "Prazer, Ana!"


def test_triagem_keys_of_other_agents_are_ignored_and_reported() -> None:
    action = act(
        '{"s":1,"servico":"AGUA_POTABILIDADE","cadastro":{"nome":"Ana"},"motivo":"outro",'
        '"humor":"feliz"}Oi',
        context(),
    )

    assert action.ignored_keys == ("cadastro", "humor", "motivo", "servico")
    assert (action.service, action.registration_data, action.motive) == ("", {}, None)


# --- qualificacao -----------------------------------------------------------------------------------


def test_code_3_types_the_parameters_per_the_schema() -> None:
    action = act(
        '{"s":3,"servico":"AGUA_POTABILIDADE","qualification_data":'
        '{"tipo_amostra":" água de poço ","quantidade_amostras":"3","cidade_coleta":"Campinas"}}',
        QUALIFYING,
    )

    assert action.service == "AGUA_POTABILIDADE"
    assert action.technical_data == {
        "tipo_amostra": "água de poço",
        "quantidade_amostras": 3,
        "cidade_coleta": "Campinas",
    }
    assert (action.technical_extras, action.rejected) == ({}, {})


def test_code_3_merges_with_parameters_collected_before() -> None:
    ctx = replace(
        QUALIFYING, service="AGUA_POTABILIDADE", technical_data={"tipo_amostra": "torneira"}
    )

    action = act('{"s":3,"qualification_data":{"quantidade_amostras":2}}', ctx)

    assert action.technical_data == {"tipo_amostra": "torneira", "quantidade_amostras": 2}


def test_undeclared_parameters_go_to_the_extras_never_into_the_data() -> None:
    action = act(
        '{"s":1,"servico":"AGUA_POTABILIDADE","qualification_data":'
        '{"tipo_amostra":"poço","cor_da_agua":"turva"}}Quantas amostras?',
        QUALIFYING,
    )

    assert action.technical_data == {"tipo_amostra": "poço"}
    assert action.technical_extras == {"cor_da_agua": "turva"}


def test_the_flat_form_is_read_as_parameters_with_reserved_keys_filtered() -> None:
    action = act(
        '{"s":3,"servico":"AGUA_POTABILIDADE","tipo_amostra":"poço","quantidade_amostras":1,'
        '"segmento":"HUMANO","motivo":"outro"}',
        QUALIFYING,
    )

    assert action.technical_data == {"tipo_amostra": "poço", "quantidade_amostras": 1}
    assert action.technical_extras == {}
    assert action.segment == "AMBIENTAL"
    assert action.ignored_keys == ("motivo", "segmento")


def test_the_nested_form_wins_over_the_flat_form() -> None:
    action = act(
        '{"s":1,"servico":"AGUA_POTABILIDADE","tipo_amostra":"plano",'
        '"qualification_data":{"tipo_amostra":"aninhado"}}Certo',
        QUALIFYING,
    )

    assert action.technical_data == {"tipo_amostra": "aninhado"}


def test_parameters_sent_before_the_service_wait_in_extras_and_are_promoted_later() -> None:
    first = act('{"s":1,"qualification_data":{"quantidade_amostras":"4"}}Qual análise?', QUALIFYING)
    assert (first.technical_data, first.technical_extras) == ({}, {"quantidade_amostras": "4"})

    ctx = replace(QUALIFYING, technical_extras=first.technical_extras)
    second = act('{"s":3,"servico":"AGUA_POTABILIDADE","tipo_amostra":"poço"}', ctx)

    assert second.technical_data == {"tipo_amostra": "poço", "quantidade_amostras": 4}
    assert second.technical_extras == {}


def test_a_new_service_moves_parameters_it_does_not_declare_back_to_the_extras() -> None:
    ctx = replace(
        QUALIFYING,
        service="AGUA_POTABILIDADE",
        technical_data={"tipo_amostra": "poço", "quantidade_amostras": 2},
    )

    action = act('{"s":1,"servico":"SOLO_METAIS"}Entendi, solo então.', ctx)

    assert action.service == "SOLO_METAIS"
    assert action.technical_data == {"quantidade_amostras": 2}
    assert action.technical_extras == {"tipo_amostra": "poço"}


def test_code_1_keeps_the_old_value_of_a_parameter_sent_with_a_wrong_type() -> None:
    ctx = replace(
        QUALIFYING, service="AGUA_POTABILIDADE", technical_data={"quantidade_amostras": 2}
    )

    action = act('{"s":1,"qualification_data":{"quantidade_amostras":"muitas"}}Quantas?', ctx)

    assert action.technical_data == {"quantidade_amostras": 2}
    assert action.rejected == {
        "qualification_data.quantidade_amostras": InvalidValue(
            "muitas", "'quantidade_amostras' deve ser um número inteiro"
        )
    }


@pytest.mark.parametrize(
    ("raw", "problem", "field", "detail"),
    [
        (
            '{"s":3,"qualification_data":{"tipo_amostra":"poço"}}',
            "missing_field",
            "servico",
            "code 3 requires servico (an active service)",
        ),
        (
            '{"s":3,"servico":"NAO_EXISTE"}',
            "invalid_field",
            "servico",
            "code 3: invalid servico: serviço inexistente ou inativo",
        ),
        (
            '{"s":3,"servico":"HEMOGRAMA"}',
            "invalid_field",
            "servico",
            "code 3: invalid servico: serviço do segmento HUMANO, "
            "não do segmento da conversa (AMBIENTAL)",
        ),
        (
            '{"s":3,"servico":"AGUA_POTABILIDADE","qualification_data":{"tipo_amostra":"poço"}}',
            "missing_parameter",
            "qualification_data.quantidade_amostras",
            "code 3: service AGUA_POTABILIDADE requires quantidade_amostras",
        ),
        (
            '{"s":3,"servico":"AGUA_POTABILIDADE"}',
            "missing_parameter",
            "qualification_data.tipo_amostra",
            "code 3: service AGUA_POTABILIDADE requires tipo_amostra, quantidade_amostras",
        ),
        (
            '{"s":3,"servico":"AGUA_POTABILIDADE","qualification_data":'
            '{"tipo_amostra":"poço","quantidade_amostras":2.5}}',
            "invalid_parameter",
            "qualification_data.quantidade_amostras",
            "code 3: invalid parameter quantidade_amostras: "
            "'quantidade_amostras' deve ser um número inteiro",
        ),
        (
            '{"s":3,"servico":"AGUA_POTABILIDADE","qualification_data":'
            '{"tipo_amostra":"poço","quantidade_amostras":2,"cidade_coleta":["a"]}}',
            "invalid_parameter",
            "qualification_data.cidade_coleta",
            "code 3: invalid parameter cidade_coleta: 'cidade_coleta' deve ser um texto",
        ),
    ],
)
def test_code_3_requires_an_active_service_of_the_segment_and_its_parameters(
    raw: str, problem: str, field: str, detail: str
) -> None:
    error = refused(raw, QUALIFYING)

    assert (error.problem, error.field, str(error)) == (problem, field, detail)
    assert error.reason is HandoffReason.LLM_INVALID_CONTRACT


def test_a_required_parameter_that_is_blank_counts_as_missing() -> None:
    error = refused(
        '{"s":3,"servico":"AGUA_POTABILIDADE","tipo_amostra":"poço","quantidade_amostras":""}',
        QUALIFYING,
    )

    assert error.problem == "missing_parameter"


def test_a_non_object_qualification_data_is_rejected_on_code_1() -> None:
    action = act('{"s":1,"qualification_data":"poço"}Pode detalhar?', QUALIFYING)

    assert action.rejected == {
        "qualification_data": InvalidValue("poço", "qualification_data deve ser um objeto")
    }
    assert action.technical_data == {}


# --- coleta ----------------------------------------------------------------------------------------

FULL_CADASTRO = (
    '{"nome":"Ana Lima","documento":"529.982.247-25","email":"ana@example.com","uf":"SP"}'
)


def test_code_4_with_a_complete_registration() -> None:
    action = act(f'{{"s":4,"cadastro":{FULL_CADASTRO}}}Confere os dados?', COLLECTING)

    assert action.code is Code.ASK_CONFIRMATION
    assert action.registration_data == {
        "nome": "Ana Lima",
        "documento": VALID_CPF,
        "email": "ana@example.com",
        "uf": "SP",
    }
    assert action.customer_name == "Ana Lima"
    assert action.message == "Confere os dados?"
    # The subject data is untouched by coleta.
    assert action.technical_data == {"tipo_amostra": "poço", "quantidade_amostras": 2}


def test_code_4_merges_with_registration_collected_before() -> None:
    ctx = replace(COLLECTING, registration_data={"nome": "Ana Lima", "documento": VALID_CPF})

    action = act('{"s":4,"email":"ana@example.com"}Confere?', ctx)

    assert action.registration_data == {
        "nome": "Ana Lima",
        "documento": VALID_CPF,
        "email": "ana@example.com",
    }


@pytest.mark.parametrize(
    ("cadastro", "problem", "field", "detail"),
    [
        (
            '{"nome":"Ana","documento":"52998224725"}',
            "missing_field",
            "cadastro.email",
            "code 4 requires cadastro fields email",
        ),
        (
            '{"nome":"Ana","documento":"11222333000181","email":"a@example.com"}',
            "missing_field",
            "cadastro.empresa",
            "code 4 requires cadastro fields empresa",
        ),
        (
            '{"nome":"Ana","documento":"52998224724","email":"a@example.com"}',
            "invalid_field",
            "cadastro.documento",
            "code 4: invalid cadastro.documento: documento: CPF inválido (dígitos verificadores)",
        ),
        (
            '{"nome":"Ana","documento":"52998224725","email":"a@example.com","telefone":"12"}',
            "invalid_field",
            "cadastro.telefone",
            "code 4: invalid cadastro.telefone: "
            "telefone inválido: número inexistente no plano de numeração",
        ),
    ],
)
def test_code_4_requires_a_complete_and_valid_registration(
    cadastro: str, problem: str, field: str, detail: str
) -> None:
    error = refused(f'{{"s":4,"cadastro":{cadastro}}}Confere?', COLLECTING)

    assert (error.problem, error.field, str(error)) == (problem, field, detail)


def test_code_1_of_coleta_merges_valid_fields_rejects_invalid_and_keeps_unknown_as_extras() -> None:
    ctx = replace(COLLECTING, registration_data={"email": "velho@example.com"})

    action = act(
        '{"s":1,"cadastro":{"nome":"Ana","email":"sem-arroba","cargo":"química"},'
        '"uf":"rj"}E o seu CPF?',
        ctx,
    )

    assert action.registration_data == {"email": "velho@example.com", "nome": "Ana", "uf": "RJ"}
    assert action.registration_extras == {"cargo": "química"}
    assert action.rejected == {
        "cadastro.email": InvalidValue("sem-arroba", "email inválido: não tem a forma nome@domínio")
    }


# --- 98 and 99 -------------------------------------------------------------------------------------


@pytest.mark.parametrize("motive", list(HandoffMotive))
def test_code_98_carries_its_motive(motive: HandoffMotive) -> None:
    action = act(f'{{"s":98,"motivo":"{motive.value}"}}', QUALIFYING)

    assert (action.code, action.motive, action.message) == (Code.HANDOFF, motive, "")


@pytest.mark.parametrize(
    ("payload", "problem"),
    [
        ('{"s":98}', "missing_field"),
        ('{"s":98,"motivo":""}', "missing_field"),
        ('{"s":98,"motivo":"cansado"}', "invalid_field"),
        ('{"s":98,"motivo":["outro"]}', "invalid_field"),
    ],
)
def test_code_98_requires_a_known_motive(payload: str, problem: str) -> None:
    error = refused(payload, context())

    assert (error.problem, error.field) == (problem, "motivo")
    assert str(error) == (
        "code 98 requires motivo, one of pedido_cliente, fora_escopo, incerteza, reclamacao, "
        "empresa_estrategica, limite_saude, outro"
    )


@pytest.mark.parametrize(
    ("context_needed", "packages"),
    [
        ('"COMPANY_INFO"', ("COMPANY_INFO",)),
        (
            '["prazos_e_entrega", "COMPANY_INFO", "PRAZOS_E_ENTREGA"]',
            ("PRAZOS_E_ENTREGA", "COMPANY_INFO"),
        ),
    ],
)
def test_code_99_takes_one_id_or_a_list_of_ids(
    context_needed: str, packages: tuple[str, ...]
) -> None:
    action = act(f'{{"s":99,"context_needed":{context_needed}}}', COLLECTING)

    assert (action.code, action.packages) == (Code.CONTEXT_NEEDED, packages)


@pytest.mark.parametrize(
    "value", ["null", "[]", "7", '{"id":"COMPANY_INFO"}', '["COMPANY_INFO", 3]']
)
def test_code_99_refuses_a_malformed_context_needed(value: str) -> None:
    error = refused(f'{{"s":99,"context_needed":{value}}}', context())

    assert (error.problem, error.field, error.reason, str(error)) == (
        "invalid_field",
        "context_needed",
        HandoffReason.LLM_INVALID_CONTRACT,
        "code 99 requires context_needed: a package ID or a list of IDs",
    )


def test_code_99_with_an_unknown_package_leads_to_the_unknown_package_reason() -> None:
    error = refused('{"s":99,"context_needed":["COMPANY_INFO","TABELA_PRECOS"]}', context())

    assert (error.problem, error.reason, str(error)) == (
        "unknown_package",
        HandoffReason.UNKNOWN_PACKAGE,
        "code 99: unknown or inactive package 'TABELA_PRECOS'",
    )


# --- Codes with no fields of their own -------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "ctx", "code"),
    [
        ('{"s":5}Perfeito, registrado!', context(S.CONFIRM), Code.CONFIRMED),
        ('{"s":6}O que deseja corrigir?', context(S.CONFIRM), Code.CORRECT_DATA),
        ('{"s":7}', context(S.DATA_COLLECT), Code.CHANGE_SUBJECT),
        ('{"s":8}Até logo!', context(S.TRIAGE), Code.END),
    ],
)
def test_codes_without_required_fields_keep_the_session_data(
    raw: str, ctx: SessionContext, code: Code
) -> None:
    ctx = replace(ctx, segment="AMBIENTAL", registration_data={"nome": "Ana"})

    action = act(raw, ctx)

    assert action.code is code
    assert (action.segment, action.registration_data) == ("AMBIENTAL", {"nome": "Ana"})


def test_the_session_context_is_not_mutated() -> None:
    data: Mapping[str, Any] = {"tipo_amostra": "poço"}
    ctx = replace(QUALIFYING, service="AGUA_POTABILIDADE", technical_data=data)

    act('{"s":1,"quantidade_amostras":3}Ok', ctx)

    assert ctx.technical_data == {"tipo_amostra": "poço"}


# --- Options ("opcoes") -------------------------------------------------------------------------

CONFIRMING = replace(COLLECTING, state=S.CONFIRM)


@pytest.mark.parametrize(
    ("raw", "ctx"),
    [
        ('{"s":1,"opcoes":["Alimentos","Ambiental"]}Qual é o segmento?', context()),
        ('{"s":1,"opcoes":["Alimentos","Ambiental"]}Qual?', QUALIFYING),
        ('{"s":1,"opcoes":["Alimentos","Ambiental"]}Qual?', COLLECTING),
        ('{"s":6,"opcoes":["Alimentos","Ambiental"]}O que mudou?', CONFIRMING),
    ],
    ids=["1-triagem", "1-qualificacao", "1-coleta", "6-coleta"],
)
def test_codes_1_and_6_offer_the_answer_s_options(raw: str, ctx: SessionContext) -> None:
    action = act(raw, ctx)

    assert (action.options, action.ignored_keys) == (("Alimentos", "Ambiental"), ())


@pytest.mark.parametrize(
    ("raw", "ctx"),
    [
        (
            '{"s":4,"opcoes":["Sim","Não"],"cadastro":{"nome":"Ana Lima","documento":"'
            + VALID_CPF
            + '","email":"ana@example.com"}}Confere?',
            COLLECTING,
        ),
        ('{"s":5,"opcoes":["Sim"]}Registrado!', CONFIRMING),
        ('{"s":8,"opcoes":["Sim"]}Até logo!', context()),
        ('{"s":98,"motivo":"outro","opcoes":["Sim"]}', context()),
    ],
    ids=["4", "5", "8", "98"],
)
def test_other_codes_ignore_and_report_the_options(raw: str, ctx: SessionContext) -> None:
    action = act(raw, ctx)

    assert (action.options, action.ignored_keys) == ((), ("opcoes",))


def test_options_are_never_read_as_flat_form_data() -> None:
    qualifying = act('{"s":1,"opcoes":["Poço"]}Qual?', QUALIFYING)
    collecting = act('{"s":1,"opcoes":["Poço"]}Qual?', COLLECTING)

    assert (qualifying.technical_extras, collecting.registration_extras) == ({}, {})
