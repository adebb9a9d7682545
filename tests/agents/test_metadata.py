"""The metadata block: identity, instance, hours, per-agent facts, KB catalog, loaded packages."""

from datetime import datetime

import pytest

from agents.business_hours import BUSINESS_TZ
from agents.context import CatalogSnapshot
from agents.prompts.metadata import build_metadata
from agents.sources import RuntimeSettings
from agents.states import PROMPT_AGENTS, AgentName
from tests.helpers.fake_collaborators import PACKAGES, WEEKLY, make_inputs, make_session


@pytest.mark.parametrize("agent", PROMPT_AGENTS)
def test_every_agent_gets_identity_instance_hours_catalog_and_loaded_packages(
    agent: AgentName,
) -> None:
    inputs = make_inputs(agent, session=make_session(agent, loaded_packages=("COLETA_AGUA",)))

    text = build_metadata(inputs)

    assert text.startswith(
        "# Contexto desta conversa (gerado pelo sistema)\n"
        "- Assistente: Lia, da empresa Laboratório Exemplo.\n"
        "- Instância (número de WhatsApp): Laboratório Exemplo — Campinas (+55 19 3333-4444).\n"
        "- Agora: terça-feira, 10/03/2026, 10:00 (horário de Brasília).\n"
        "- Horário de atendimento humano: aberto agora."
    )
    assert (
        "## Catálogo da base de conhecimento (ID: descrição)\n"
        "- UNIDADES_ENDERECOS: Endereços e horários das unidades de coleta\n"
        "- COLETA_AGUA: Como coletar amostras de água\n"
        "- PREPARO_EXAMES: Orientações de preparo para exames humanos"
    ) in text
    assert text.endswith(
        "## Pacotes carregados nesta conversa\n"
        "### COLETA_AGUA — Coleta de água\n"
        "Use o frasco estéril fornecido pelo laboratório; não enxágue o frasco."
    )


def test_only_loaded_packages_appear_in_full() -> None:
    inputs = make_inputs(
        AgentName.QUALIFICACAO,
        session=make_session(AgentName.QUALIFICACAO, loaded_packages=("UNIDADES_ENDERECOS",)),
    )

    text = build_metadata(inputs)

    assert PACKAGES["UNIDADES_ENDERECOS"].content in text
    assert PACKAGES["COLETA_AGUA"].content not in text
    assert PACKAGES["PREPARO_EXAMES"].content not in text


def test_no_package_loaded_and_an_empty_catalog_are_said_plainly() -> None:
    inputs = make_inputs(AgentName.TRIAGEM, catalog=CatalogSnapshot())

    text = build_metadata(inputs)

    assert "## Catálogo da base de conhecimento (ID: descrição)\nnenhum pacote disponível" in text
    assert text.endswith("## Pacotes carregados nesta conversa\nnenhum pacote carregado")
    assert "## Segmentos ativos\nnenhum segmento ativo" in text


def test_closed_on_a_holiday_with_the_next_opening() -> None:
    inputs = make_inputs(AgentName.TRIAGEM, now=datetime(2026, 12, 25, 10, 0, tzinfo=BUSINESS_TZ))

    assert (
        "- Agora: sexta-feira, 25/12/2026, 10:00 (horário de Brasília).\n"
        "- Horário de atendimento humano: fechado agora (feriado nacional: Natal); "
        "próxima abertura: segunda-feira, 28/12/2026, 08:00."
    ) in build_metadata(inputs)


def test_triagem_gets_the_recognised_name_segments_and_intents() -> None:
    text = build_metadata(make_inputs(AgentName.TRIAGEM))

    assert "## Cliente\n- Nome reconhecido: Marina." in text
    assert "## Segmentos ativos\n- AMBIENTAL: Ambiental\n- HUMANO: Saúde humana" in text
    assert "## Intenções ativas\n- ORCAMENTO: Orçamento\n- AGENDAMENTO: Agendamento de coleta" in (
        text
    )
    # The customer's phone and the services stay out of triage.
    assert "Telefone do WhatsApp" not in text
    assert "## Serviços ativos do segmento" not in text


@pytest.mark.parametrize("agent", PROMPT_AGENTS)
def test_no_agent_gets_anything_of_the_strategic_companies(agent: AgentName) -> None:
    """The list is confidential: a customer can ask the model to repeat its instructions."""
    text = build_metadata(make_inputs(agent, session=make_session(agent)))

    assert [
        secret
        for secret in ("Estratégica", "11222333000181", "11.222.333", "5511912345678", "91234")
        if secret in text
    ] == []
    assert "strateg" not in text.lower()
    assert "estratégic" not in text.lower()


def test_triagem_without_a_recognised_name() -> None:
    runtime = RuntimeSettings(agent_name="Lia", company_name="Lab", business_hours=WEEKLY)
    inputs = make_inputs(AgentName.TRIAGEM, session=make_session(customer_name=""), runtime=runtime)

    text = build_metadata(inputs)

    assert "- Nome reconhecido: ainda não reconhecido." in text


def test_qualificacao_gets_segment_intention_service_services_and_technical_data() -> None:
    session = make_session(
        AgentName.QUALIFICACAO,
        service="ANALISE_AGUA_POTABILIDADE",
        technical_data={"quantidade_amostras": 2, "urgente": True},
    )

    text = build_metadata(make_inputs(AgentName.QUALIFICACAO, session=session))

    assert (
        "## Solicitação em andamento\n- Cliente: Marina.\n- Segmento: AMBIENTAL — Ambiental.\n"
        "- Intenção: ORCAMENTO — Orçamento.\n"
        "- Serviço: ANALISE_AGUA_POTABILIDADE — Análise de potabilidade da água."
    ) in text
    assert (
        "## Serviços ativos do segmento\n"
        "- ANALISE_AGUA_POTABILIDADE: Análise de potabilidade da água\n"
        "  Descrição: Análise físico-química e microbiológica de água para consumo.\n"
        "  Parâmetros técnicos:\n"
        "    - quantidade_amostras — Quantidade de amostras; número inteiro; obrigatório\n"
        "    - origem_agua — Origem da água; uma das opções (poço, rede pública, outra); "
        "obrigatório\n"
        "    - data_coleta — Data desejada para a coleta; data; opcional"
    ) in text
    # Services of other segments are not offered.
    assert "EXAME_TOXICOLOGICO" not in text
    assert "## Dados técnicos já coletados\n- quantidade_amostras: 2\n- urgente: sim" in text
    assert "Telefone do WhatsApp" not in text


def test_coleta_gets_phone_and_partial_registration_but_not_the_service_list() -> None:
    text = build_metadata(make_inputs(AgentName.COLETA))

    assert (
        "## Cadastro\n- Telefone do WhatsApp: +55 19 98765-4321.\n"
        "Dados já coletados:\n- nome: Marina Souza"
    ) in text
    assert "## Dados técnicos já coletados\n- quantidade_amostras: 2\n- origem_agua: poço" in text
    assert "## Serviços ativos do segmento" not in text


def test_an_unknown_segment_code_is_shown_as_is() -> None:
    session = make_session(AgentName.QUALIFICACAO, segment="DESATIVADO")

    text = build_metadata(make_inputs(AgentName.QUALIFICACAO, session=session))

    assert "- Segmento: DESATIVADO." in text
    assert "## Serviços ativos do segmento\nnenhum serviço ativo neste segmento" in text


def test_brand_context_is_included_on_one_line() -> None:
    instance = make_session().instance.__class__(
        "GoYou", brand_context="Marca de exames\nclínicos.", health_sensitive=True
    )
    text = build_metadata(make_inputs(session=make_session(instance=instance)))

    assert "- Sobre a marca/unidade: Marca de exames clínicos." in text
