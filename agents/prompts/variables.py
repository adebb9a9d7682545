"""The template variables of each agent's prompt: the one place that names and documents them.

A built-in prompt and an admin's override are the same kind of text — a Django template rendered
with these variables — so "start from the built-in prompt" copies a working template. The admin
form lists `variables_for(agent)` as help text and refuses any other name; `prompt_variables`
computes the values for one call. Descriptions are pt-BR: prompt admins read them. There is no
variable for the strategic companies: their list is confidential (a customer can ask the model to
repeat its instructions) and is matched in code (`agents/strategic_companies.py`). Pure module.
"""

from collections.abc import Callable
from dataclasses import dataclass

from agents.prompts.inputs import (
    PromptInputs,
    describe_hours,
    describe_instance,
    describe_intent,
    describe_segment,
    describe_service,
    format_data,
    format_datetime,
    format_intents,
    format_kb_catalog,
    format_loaded_packages,
    format_phone,
    format_segments,
    format_services,
)
from agents.states import PROMPT_AGENTS, AgentName

VariableValue = str | bool
_A = AgentName


@dataclass(frozen=True, slots=True)
class PromptVariable:
    name: str
    description: str
    value: Callable[[PromptInputs], VariableValue]
    agents: frozenset[AgentName] = frozenset(PROMPT_AGENTS)
    # Its value may differ from one call to the next (the session, the clock, the instance):
    # a text that uses it is no longer the same bytes on every call, and the provider's prompt
    # cache stops where its value first appears (docs/decisions/0053).
    per_call: bool = True


VARIABLES: tuple[PromptVariable, ...] = (
    PromptVariable(
        "agent_name",
        "nome da assistente (Configuração de execução, ou AGENT_NAME)",
        lambda i: i.runtime.agent_name,
        per_call=False,
    ),
    PromptVariable(
        "company_name",
        "nome da empresa (Configuração de execução)",
        lambda i: i.runtime.company_name,
        per_call=False,
    ),
    PromptVariable(
        "instance_name",
        "instância (número de WhatsApp) desta conversa, com o telefone exibido",
        describe_instance,
    ),
    PromptVariable(
        "brand_context",
        "texto de contexto da marca ou unidade cadastrado na instância (pode ser vazio)",
        lambda i: i.session.instance.brand_context,
    ),
    PromptVariable(
        "business_hours",
        "situação do horário de atendimento agora, com a próxima abertura quando fechado "
        '(ex.: "fechado agora; próxima abertura: segunda-feira, 28/12/2026, 08:00")',
        lambda i: describe_hours(i.hours),
    ),
    PromptVariable(
        "is_open",
        "verdadeiro dentro do horário de atendimento; use em {% if is_open %}...{% endif %}",
        lambda i: i.hours.is_open,
    ),
    PromptVariable(
        "now",
        "data e hora atuais em Brasília (ex.: sexta-feira, 25/12/2026, 10:00)",
        lambda i: format_datetime(i.now),
    ),
    PromptVariable(
        "customer_name",
        "nome do cliente já reconhecido (perfil do WhatsApp ou informado), ou vazio",
        lambda i: i.session.customer_name,
    ),
    PromptVariable(
        "kb_catalog",
        "catálogo compacto da base de conhecimento: uma linha por pacote ativo (ID: descrição)",
        lambda i: format_kb_catalog(i.catalog),
        per_call=False,
    ),
    PromptVariable(
        "loaded_packages",
        "conteúdo completo dos pacotes já carregados nesta conversa",
        lambda i: format_loaded_packages(i.loaded_packages),
    ),
    PromptVariable(
        "segments",
        "segmentos ativos, um por linha (CÓDIGO: nome)",
        lambda i: format_segments(i.catalog),
        frozenset({_A.TRIAGEM}),
        per_call=False,
    ),
    PromptVariable(
        "intents",
        "intenções ativas, uma por linha (CÓDIGO: nome)",
        lambda i: format_intents(i.catalog),
        frozenset({_A.TRIAGEM}),
        per_call=False,
    ),
    PromptVariable(
        "segment",
        "segmento desta conversa (CÓDIGO — nome)",
        describe_segment,
        frozenset({_A.QUALIFICACAO, _A.COLETA}),
    ),
    PromptVariable(
        "intent",
        "intenção desta conversa (CÓDIGO — nome)",
        describe_intent,
        frozenset({_A.QUALIFICACAO, _A.COLETA}),
    ),
    PromptVariable(
        "service",
        "serviço identificado (CÓDIGO — nome), ou 'ainda não identificado'",
        describe_service,
        frozenset({_A.QUALIFICACAO, _A.COLETA}),
    ),
    PromptVariable(
        "services",
        "serviços ativos do segmento, com descrição e parâmetros técnicos",
        lambda i: format_services(i.catalog.services_of(i.session.segment)),
        frozenset({_A.QUALIFICACAO}),
    ),
    PromptVariable(
        "technical_data",
        "dados técnicos já coletados, um por linha (chave: valor)",
        lambda i: format_data(i.session.technical_data),
        frozenset({_A.QUALIFICACAO, _A.COLETA}),
    ),
    PromptVariable(
        "customer_phone",
        "telefone do WhatsApp do cliente (+55 11 91234-5678)",
        lambda i: format_phone(i.session.customer_phone),
        frozenset({_A.COLETA}),
    ),
    PromptVariable(
        "registration_data",
        "dados cadastrais já coletados, um por linha (chave: valor)",
        lambda i: format_data(i.session.registration_data),
        frozenset({_A.COLETA}),
    ),
)


def variables_for(agent: AgentName) -> tuple[PromptVariable, ...]:
    return tuple(v for v in VARIABLES if agent in v.agents)


def variable_names(agent: AgentName) -> frozenset[str]:
    return frozenset(v.name for v in variables_for(agent))


def prompt_variables(inputs: PromptInputs) -> dict[str, VariableValue]:
    """The values of the agent's variables for one call."""
    return {v.name: v.value(inputs) for v in variables_for(inputs.agent)}


def per_call_names(agent: AgentName) -> frozenset[str]:
    """The agent's variables whose value may change from one call to the next."""
    return frozenset(v.name for v in variables_for(agent) if v.per_call)


def sample_variables(agent: AgentName) -> dict[str, VariableValue]:
    """Stand-in values (each variable's description) to try-render a template while editing."""
    return {v.name: (True if v.name == "is_open" else v.description) for v in variables_for(agent)}
