"""The vocabulary shared by the pure core and the models: agents, session states, handoff reasons.

Pure module (no Django import). Models use these values as their choices.
"""

from enum import StrEnum


class AgentName(StrEnum):
    TRIAGEM = "triagem"
    QUALIFICACAO = "qualificacao"
    COLETA = "coleta"
    # Used only in the log, never chosen by the state machine.
    ORCHESTRATOR = "orchestrator"
    SUMMARY = "summary"
    MEDIA = "media"  # the reading of a customer's media (transcription, image description)


PROMPT_AGENTS: tuple[AgentName, ...] = (
    AgentName.TRIAGEM,
    AgentName.QUALIFICACAO,
    AgentName.COLETA,
)


class SessionState(StrEnum):
    TRIAGE = "TRIAGE"
    QUALIFYING = "QUALIFYING"
    DATA_COLLECT = "DATA_COLLECT"
    CONFIRM = "CONFIRM"
    HUMAN = "HUMAN"
    CLOSED = "CLOSED"


BOT_STATES: frozenset[SessionState] = frozenset(
    {
        SessionState.TRIAGE,
        SessionState.QUALIFYING,
        SessionState.DATA_COLLECT,
        SessionState.CONFIRM,
    }
)

AGENT_FOR_STATE: dict[SessionState, AgentName] = {
    SessionState.TRIAGE: AgentName.TRIAGEM,
    SessionState.QUALIFYING: AgentName.QUALIFICACAO,
    SessionState.DATA_COLLECT: AgentName.COLETA,
    SessionState.CONFIRM: AgentName.COLETA,
}


class HandoffReason(StrEnum):
    MODEL_REQUESTED = "model_requested"
    QUALIFIED_LEAD = "qualified_lead"
    LLM_INVALID_JSON = "llm_invalid_json"
    LLM_INVALID_CONTRACT = "llm_invalid_contract"
    LLM_TIMEOUT = "llm_timeout"
    LLM_RATE_LIMITED = "llm_rate_limited"
    LLM_PROVIDER_ERROR = "llm_provider_error"
    UNKNOWN_PACKAGE = "unknown_package"
    ENRICHMENT_LIMIT = "enrichment_limit"
    ROUTING_LOOP = "routing_loop"
    STAFF_TAKEOVER = "staff_takeover"
    STRATEGIC_COMPANY = "strategic_company"
    MEDIA = "media"  # the customer sent only media the bot could not read
    TRANSCRIPTION_FAILED = "transcription_failed"


class HandoffMotive(StrEnum):
    """The `motivo` the model gives with code 98 (payload values stay in Portuguese)."""

    PEDIDO_CLIENTE = "pedido_cliente"
    FORA_ESCOPO = "fora_escopo"
    INCERTEZA = "incerteza"
    RECLAMACAO = "reclamacao"
    EMPRESA_ESTRATEGICA = "empresa_estrategica"
    LIMITE_SAUDE = "limite_saude"
    OUTRO = "outro"
