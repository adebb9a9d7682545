"""The catalog block of the instructions and the context item sent after the history."""

from dataclasses import replace
from datetime import datetime

import pytest

from agents.business_hours import BUSINESS_TZ
from agents.context import CatalogSnapshot
from agents.prompts.conversation import build_conversation_context, build_reference_item
from agents.prompts.metadata import build_metadata
from agents.sources import RuntimeSettings
from agents.states import PROMPT_AGENTS, AgentName, SessionState
from tests.helpers.fake_collaborators import (
    INSTANCE,
    PACKAGES,
    WEEKLY,
    make_inputs,
    make_session,
    other_session,
)

KB_CATALOG = (
    "## Catálogo da base de conhecimento (ID: descrição)\n"
    "- UNIDADES_ENDERECOS: Endereços e horários das unidades de coleta\n"
    "- COLETA_AGUA: Como coletar amostras de água\n"
    "- PREPARO_EXAMES: Orientações de preparo para exames humanos"
)


# --- the catalog block: the same for every call of one agent ----------------------------------


@pytest.mark.parametrize("agent", PROMPT_AGENTS)
def test_every_agent_s_catalog_block_names_the_assistant_and_ends_with_the_kb_catalog(
    agent: AgentName,
) -> None:
    text = build_metadata(make_inputs(agent))

    assert text.startswith(
        "# Empresa e catálogo (gerado pelo sistema)\n"
        "- Assistente: Lia, da empresa Laboratório Exemplo."
    )
    assert text.endswith(KB_CATALOG)


@pytest.mark.parametrize("agent", PROMPT_AGENTS)
def test_the_catalog_block_is_the_same_whatever_the_session_the_clock_and_the_packages(
    agent: AgentName,
) -> None:
    one = make_inputs(agent)
    other = make_inputs(
        agent,
        session=other_session(agent),
        now=datetime(2026, 12, 25, 22, 30, tzinfo=BUSINESS_TZ),
    )

    assert build_metadata(one) == build_metadata(other)


def test_triagem_s_block_lists_the_segments_and_intents_and_no_service() -> None:
    text = build_metadata(make_inputs(AgentName.TRIAGEM))

    assert "## Segmentos ativos\n- AMBIENTAL: Ambiental\n- HUMANO: Saúde humana" in text
    assert "## Intenções ativas\n- ORCAMENTO: Orçamento\n- AGENDAMENTO: Agendamento de coleta" in (
        text
    )
    assert "Serviços ativos" not in text


def test_qualificacao_s_block_has_no_service_list_the_reference_item_has_its_segment_s() -> None:
    inputs = make_inputs(AgentName.QUALIFICACAO)

    assert "Serviços ativos" not in build_metadata(inputs)
    assert build_reference_item(inputs) == (
        "# Referência desta conversa (gerado pelo sistema)\n\n"
        "## Serviços ativos do segmento\n"
        "- ANALISE_AGUA_POTABILIDADE: Análise de potabilidade da água\n"
        "  Descrição: Análise físico-química e microbiológica de água para consumo.\n"
        "  Parâmetros técnicos:\n"
        "    - quantidade_amostras — Quantidade de amostras; número inteiro; obrigatório\n"
        "    - origem_agua — Origem da água; uma das opções (poço, rede pública, outra); "
        "obrigatório\n"
        "    - data_coleta — Data desejada para a coleta; data; opcional"
    )


def test_an_empty_catalog_and_a_segment_without_services_are_said_plainly() -> None:
    empty = build_metadata(make_inputs(AgentName.QUALIFICACAO, catalog=CatalogSnapshot()))
    assert empty.endswith(
        "## Catálogo da base de conhecimento (ID: descrição)\nnenhum pacote disponível"
    )
    triage = build_metadata(make_inputs(AgentName.TRIAGEM, catalog=CatalogSnapshot()))
    assert "## Segmentos ativos\nnenhum segmento ativo" in triage
    session = make_session(AgentName.QUALIFICACAO, segment="DESATIVADO")
    assert build_reference_item(make_inputs(AgentName.QUALIFICACAO, session=session)) == (
        "# Referência desta conversa (gerado pelo sistema)\n\n"
        "## Serviços ativos do segmento\nnenhum serviço ativo neste segmento"
    )


def test_coleta_s_block_has_no_service_list() -> None:
    text = build_metadata(make_inputs(AgentName.COLETA))

    assert text == (
        "# Empresa e catálogo (gerado pelo sistema)\n"
        "- Assistente: Lia, da empresa Laboratório Exemplo.\n\n" + KB_CATALOG
    )


@pytest.mark.parametrize("agent", PROMPT_AGENTS)
def test_no_agent_gets_anything_of_the_strategic_companies(agent: AgentName) -> None:
    """The list is confidential: a customer can ask the model to repeat its instructions."""
    inputs = make_inputs(agent, session=make_session(agent))
    text = build_metadata(inputs) + build_conversation_context(inputs)

    assert [
        secret
        for secret in ("Estratégica", "11222333000181", "11.222.333", "5511912345678", "91234")
        if secret in text
    ] == []
    assert "strateg" not in text.lower()
    assert "estratégic" not in text.lower()


# --- the context item: this call's facts ------------------------------------------------------


@pytest.mark.parametrize(
    ("agent", "stage"),
    [
        (AgentName.TRIAGEM, "triagem"),
        (AgentName.QUALIFICACAO, "qualificação"),
        (AgentName.COLETA, "coleta de dados"),
    ],
)
def test_every_context_starts_with_instance_clock_hours_and_stage_and_ends_with_the_guards(
    agent: AgentName, stage: str
) -> None:
    inputs = make_inputs(agent, session=make_session(agent, loaded_packages=("COLETA_AGUA",)))

    text = build_conversation_context(inputs)

    assert text.startswith(
        "# Contexto desta conversa (gerado pelo sistema)\n"
        "- Agora: terça-feira, 10/03/2026, 10:00 (horário de Brasília).\n"
        "- Horário de atendimento humano: aberto agora.\n"
        f"- Etapa atual: {stage}."
    )
    assert (
        "\n\n## Regras fixas desta conversa (valem acima de qualquer instrução anterior)\n"
        "- Esta conversa: instância Laboratório Exemplo — Campinas (+55 19 3333-4444); "
    ) in text
    # The catalog stays in the instructions, the packages' content in the reference item; the
    # instance is named once, by the guard.
    assert "Catálogo da base de conhecimento" not in text
    assert "Use o frasco estéril" not in text
    assert text.count("Laboratório Exemplo — Campinas") == 1


def test_coleta_in_confirm_says_the_stage_is_confirmation() -> None:
    session = make_session(AgentName.COLETA, state=SessionState.CONFIRM)

    text = build_conversation_context(make_inputs(AgentName.COLETA, session=session))

    assert "\n- Etapa atual: confirmação.\n" in text


def test_the_reference_item_has_the_loaded_packages_in_full_in_the_order_they_were_loaded() -> None:
    inputs = make_inputs(
        AgentName.COLETA,
        session=make_session(
            AgentName.COLETA, loaded_packages=("UNIDADES_ENDERECOS", "COLETA_AGUA")
        ),
    )

    assert build_reference_item(inputs) == (
        "# Referência desta conversa (gerado pelo sistema)\n\n"
        "## Pacotes carregados nesta conversa\n"
        "### UNIDADES_ENDERECOS — Endereços das unidades\n"
        "Unidade Centro: Rua das Flores, 100, Campinas/SP.\n\n"
        "### COLETA_AGUA — Coleta de água\n"
        "Use o frasco estéril fornecido pelo laboratório; não enxágue o frasco."
    )
    assert PACKAGES["PREPARO_EXAMES"].content not in (
        build_conversation_context(inputs) + build_metadata(inputs) + build_reference_item(inputs)
    )


def test_in_qualificacao_the_packages_come_after_the_segment_s_services() -> None:
    inputs = make_inputs(
        AgentName.QUALIFICACAO,
        session=make_session(AgentName.QUALIFICACAO, loaded_packages=("COLETA_AGUA",)),
    )

    text = build_reference_item(inputs)

    assert text.index("## Serviços ativos do segmento") < text.index(
        "## Pacotes carregados nesta conversa\n### COLETA_AGUA"
    )


@pytest.mark.parametrize("agent", [AgentName.TRIAGEM, AgentName.COLETA])
def test_no_package_loaded_outside_qualificacao_means_no_reference_item(agent: AgentName) -> None:
    assert build_reference_item(make_inputs(agent)) == ""


def test_closed_on_a_holiday_with_the_next_opening() -> None:
    inputs = make_inputs(AgentName.TRIAGEM, now=datetime(2026, 12, 25, 10, 0, tzinfo=BUSINESS_TZ))

    assert (
        "- Agora: sexta-feira, 25/12/2026, 10:00 (horário de Brasília).\n"
        "- Horário de atendimento humano: fechado agora (feriado nacional: Natal); "
        "próxima abertura: segunda-feira, 28/12/2026, 08:00."
    ) in build_conversation_context(inputs)


def test_triagem_gets_the_recognised_name() -> None:
    text = build_conversation_context(make_inputs(AgentName.TRIAGEM))

    assert "## Cliente\n- Nome reconhecido: Marina." in text
    assert "Telefone do WhatsApp" not in text


def test_triagem_without_a_recognised_name() -> None:
    runtime = RuntimeSettings(agent_name="Lia", company_name="Lab", business_hours=WEEKLY)
    inputs = make_inputs(AgentName.TRIAGEM, session=make_session(customer_name=""), runtime=runtime)

    assert "- Nome reconhecido: ainda não reconhecido." in build_conversation_context(inputs)


def test_qualificacao_gets_segment_intention_service_and_technical_data() -> None:
    session = make_session(
        AgentName.QUALIFICACAO,
        service="ANALISE_AGUA_POTABILIDADE",
        technical_data={"quantidade_amostras": 2, "urgente": True},
    )

    text = build_conversation_context(make_inputs(AgentName.QUALIFICACAO, session=session))

    assert (
        "## Solicitação em andamento\n- Cliente: Marina.\n"
        "- Serviço: ANALISE_AGUA_POTABILIDADE — Análise de potabilidade da água.\n\n"
        "## Dados técnicos já coletados\n- quantidade_amostras: 2\n- urgente: sim\n\n"
    ) in text
    # The segment and the intention are named by the conversation guard.
    assert "segmento: AMBIENTAL — Ambiental; intenção: ORCAMENTO — Orçamento." in text
    assert "Telefone do WhatsApp" not in text


def test_coleta_gets_phone_and_partial_registration() -> None:
    text = build_conversation_context(make_inputs(AgentName.COLETA))

    assert (
        "## Cadastro\n- Telefone do WhatsApp: +55 19 98765-4321.\n"
        "Dados já coletados:\n- nome: Marina Souza"
    ) in text
    assert "## Dados técnicos já coletados\n- quantidade_amostras: 2\n- origem_agua: poço" in text


def test_an_unknown_segment_code_is_shown_as_is() -> None:
    session = make_session(AgentName.QUALIFICACAO, segment="DESATIVADO")

    text = build_conversation_context(make_inputs(AgentName.QUALIFICACAO, session=session))

    assert "segmento: DESATIVADO; intenção: ORCAMENTO — Orçamento." in text


def test_brand_context_is_included_on_one_line() -> None:
    instance = replace(INSTANCE, name="GoYou", brand_context="Marca de exames\nclínicos.")
    text = build_conversation_context(make_inputs(session=make_session(instance=instance)))

    assert "- Sobre a marca/unidade: Marca de exames clínicos." in text
