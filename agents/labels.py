"""The one label table of the shared vocabulary: agents, session states, handoff reasons and the
model's handoff motives, as staff read them.

The labels are gettext msgids (English, the project's convention), not display text: the
Django side translates them when shown — `choices` with ``translate=gettext_lazy`` builds a model
field's choices, `conversations.labels` renders them on the admin pages — and the pt-BR
translations are in ``locale/pt_BR/LC_MESSAGES/django.po``. Keeping the table here, beside the
enums, lets every app (``conversations`` and ``prompts_admin`` both) derive its choices from it
without importing another app, and keeps this package free of Django.

What the *model* reads about a stage is prompt text, not a label (``agents.prompts.common``).
"""

from collections.abc import Callable, Iterable, Mapping
from enum import StrEnum
from typing import TypeVar

from agents.states import AgentName, HandoffMotive, HandoffReason, SessionState

T = TypeVar("T")
E = TypeVar("E", bound=StrEnum)

AGENT_LABELS: Mapping[AgentName, str] = {
    AgentName.TRIAGEM: "triage",
    AgentName.QUALIFICACAO: "qualification",
    AgentName.COLETA: "collection",
    AgentName.ORCHESTRATOR: "orchestrator",
    AgentName.SUMMARY: "summary",
    AgentName.MEDIA: "media reading",
}

STATE_LABELS: Mapping[SessionState, str] = {
    SessionState.TRIAGE: "Triage",
    SessionState.QUALIFYING: "Qualifying",
    SessionState.DATA_COLLECT: "Data collection",
    SessionState.CONFIRM: "Confirmation",
    SessionState.HUMAN: "With a human",
    SessionState.CLOSED: "Closed",
}

# Why a session went to a human. `model_requested` is refined by the model's motive when it
# gave one (`HANDOFF_MOTIVE_LABELS`): a customer asking for a person reads as such.
HANDOFF_REASON_LABELS: Mapping[HandoffReason, str] = {
    HandoffReason.MODEL_REQUESTED: "requested by the model",
    HandoffReason.QUALIFIED_LEAD: "qualified lead",
    HandoffReason.LLM_INVALID_JSON: "model answer in an invalid format",
    HandoffReason.LLM_INVALID_CONTRACT: "model answer outside the contract",
    HandoffReason.LLM_TIMEOUT: "model timed out",
    HandoffReason.LLM_RATE_LIMITED: "model rate limited",
    HandoffReason.LLM_PROVIDER_ERROR: "model provider error",
    HandoffReason.UNKNOWN_PACKAGE: "unknown knowledge package",
    HandoffReason.ENRICHMENT_LIMIT: "enrichment limit",
    HandoffReason.ROUTING_LOOP: "routing loop",
    HandoffReason.STAFF_TAKEOVER: "taken over by staff",
    HandoffReason.STRATEGIC_COMPANY: "strategic company",
    HandoffReason.MEDIA: "media",
    HandoffReason.TRANSCRIPTION_FAILED: "the audio could not be transcribed",
}

HANDOFF_MOTIVE_LABELS: Mapping[HandoffMotive, str] = {
    HandoffMotive.PEDIDO_CLIENTE: "customer asked for a person",
    HandoffMotive.FORA_ESCOPO: "request outside the catalog",
    HandoffMotive.INCERTEZA: "the assistant was unsure",
    HandoffMotive.RECLAMACAO: "complaint",
    HandoffMotive.EMPRESA_ESTRATEGICA: "customer says their company has a dedicated contact",
    HandoffMotive.LIMITE_SAUDE: "medical question (diagnosis or results)",
    HandoffMotive.OUTRO: "only a person can help",
}


def choices(
    labels: Mapping[E, str],
    *,
    translate: Callable[[str], T],
    members: Iterable[E] | None = None,
) -> list[tuple[str, T]]:
    """A field's choices from a label table: ``(value, translate(label))`` in the enum's order,
    for `members` (default: every member the table labels)."""
    chosen = list(labels) if members is None else list(members)
    return [(member.value, translate(labels[member])) for member in chosen]


def handoff_label_msgid(reason: str, detail: str = "") -> str:
    """The msgid that names a handoff: the motive's for a model handoff that gave one (the
    dispatcher stores the motive as the detail), else the reason's; an unknown reason as is."""
    if reason == HandoffReason.MODEL_REQUESTED and detail in HandoffMotive._value2member_map_:
        return HANDOFF_MOTIVE_LABELS[HandoffMotive(detail)]
    if reason in HandoffReason._value2member_map_:
        return HANDOFF_REASON_LABELS[HandoffReason(reason)]
    return reason
