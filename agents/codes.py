"""The code table: the single source of what each `s` means (DESIGN.md §7).

The prompts, the contract guard, the action mapping and the docs read this table; nothing else
lists the codes by hand. The model proposes a code; the dispatcher decides, so a code that is not
allowed for the session state is an invalid contract. Pure module (no Django import).
"""

from dataclasses import dataclass
from enum import IntEnum, StrEnum

from agents.states import AGENT_FOR_STATE, BOT_STATES, AgentName, HandoffMotive, SessionState


class Code(IntEnum):
    RESPOND = 1
    TO_QUALIFICATION = 2
    TO_COLLECTION = 3
    ASK_CONFIRMATION = 4
    CONFIRMED = 5
    CORRECT_DATA = 6
    CHANGE_SUBJECT = 7
    END = 8
    HANDOFF = 98
    CONTEXT_NEEDED = 99


class MessageRule(StrEnum):
    REQUIRED = "required"
    IGNORED = "ignored"


@dataclass(frozen=True, slots=True)
class CodeSpec:
    code: Code
    allowed_states: frozenset[SessionState]
    message: MessageRule
    # Required payload fields, as the prompt states them to the model (pt-BR).
    required_fields: tuple[str, ...]
    # When to use the code and what happens, told to the model (pt-BR).
    when: str

    @property
    def name(self) -> str:
        return self.code.name

    @property
    def routes(self) -> bool:
        """Whether the code hands the turn to another agent at once (no customer text)."""
        return self.code in ROUTING_CODES


ALL_BOT_STATES = BOT_STATES
_S = SessionState
HANDOFF_MOTIVES: tuple[str, ...] = tuple(m.value for m in HandoffMotive)

CODE_TABLE: dict[Code, CodeSpec] = {
    spec.code: spec
    for spec in (
        CodeSpec(
            Code.RESPOND,
            ALL_BOT_STATES,
            MessageRule.REQUIRED,
            (),
            "responder ao cliente e continuar nesta etapa (pode incluir os dados já coletados)",
        ),
        CodeSpec(
            Code.TO_QUALIFICATION,
            frozenset({_S.TRIAGE}),
            MessageRule.IGNORED,
            ('"segmento": código de um segmento ativo', '"intencao": código de uma intenção ativa'),
            "segmento e intenção identificados: passar para a qualificação do serviço",
        ),
        CodeSpec(
            Code.TO_COLLECTION,
            frozenset({_S.QUALIFYING}),
            MessageRule.IGNORED,
            (
                '"servico": código de um serviço ativo do segmento',
                '"qualification_data": todos os parâmetros obrigatórios do serviço',
            ),
            "serviço e parâmetros técnicos obrigatórios identificados: "
            "passar para a coleta de dados",
        ),
        CodeSpec(
            Code.ASK_CONFIRMATION,
            frozenset({_S.DATA_COLLECT}),
            MessageRule.REQUIRED,
            (
                '"cadastro": nome, documento (CPF ou CNPJ válido) e email; '
                "empresa também quando o documento é um CNPJ",
            ),
            "cadastro completo: mostrar o resumo dos dados ao cliente e pedir confirmação",
        ),
        CodeSpec(
            Code.CONFIRMED,
            frozenset({_S.CONFIRM}),
            MessageRule.REQUIRED,
            (),
            "o cliente confirmou os dados: registrar a solicitação e encaminhar à equipe",
        ),
        CodeSpec(
            Code.CORRECT_DATA,
            frozenset({_S.CONFIRM}),
            MessageRule.REQUIRED,
            (),
            "o cliente quer corrigir algum dado: voltar à coleta e perguntar o que mudar",
        ),
        CodeSpec(
            Code.CHANGE_SUBJECT,
            frozenset({_S.QUALIFYING, _S.DATA_COLLECT, _S.CONFIRM}),
            MessageRule.IGNORED,
            (),
            "o cliente confirmou que quer tratar de outro assunto: voltar à triagem "
            "(segmento, intenção, serviço e dados técnicos são descartados; o cadastro é mantido)",
        ),
        CodeSpec(
            Code.END,
            ALL_BOT_STATES,
            MessageRule.REQUIRED,
            (),
            "o cliente encerrou a conversa: despedir-se e encerrar",
        ),
        CodeSpec(
            Code.HANDOFF,
            ALL_BOT_STATES,
            MessageRule.IGNORED,
            ('"motivo": um de ' + ", ".join(HANDOFF_MOTIVES),),
            "transferir para um atendente humano (o sistema envia a mensagem de transferência)",
        ),
        CodeSpec(
            Code.CONTEXT_NEEDED,
            ALL_BOT_STATES,
            MessageRule.IGNORED,
            ('"context_needed": o ID de um pacote do catálogo ou uma lista de IDs',),
            "carregar pacotes da base de conhecimento antes de responder",
        ),
    )
}

# The buttons the dispatcher puts under code 4's message. A tap comes back as the title, as if
# typed, so the titles are what a customer would type: the prompts tell the model so.
CONFIRM_BUTTON = "Confirmar"
CORRECT_BUTTON = "Corrigir"

ROUTING_CODES: frozenset[Code] = frozenset(
    {Code.TO_QUALIFICATION, Code.TO_COLLECTION, Code.CHANGE_SUBJECT}
)


def code_spec(value: int) -> CodeSpec | None:
    """The spec of a code, or None for a number the table does not know."""
    try:
        return CODE_TABLE[Code(value)]
    except ValueError:
        return None


def codes_allowed(state: SessionState) -> list[CodeSpec]:
    """Codes the agent of this state may use, in numeric order."""
    return [spec for spec in CODE_TABLE.values() if state in spec.allowed_states]


def is_allowed(value: int, state: SessionState) -> bool:
    spec = code_spec(value)
    return spec is not None and state in spec.allowed_states


def states_of(agent: AgentName) -> list[SessionState]:
    """The session states an agent serves (coleta serves DATA_COLLECT and CONFIRM)."""
    return [state for state, owner in AGENT_FOR_STATE.items() if owner == agent]
