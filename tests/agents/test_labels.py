"""The one label table (agents.labels) and the choices derived from it."""

from agents.labels import (
    AGENT_LABELS,
    HANDOFF_MOTIVE_LABELS,
    HANDOFF_REASON_LABELS,
    STATE_LABELS,
    choices,
    handoff_label_msgid,
)
from agents.states import (
    PROMPT_AGENTS,
    AgentName,
    HandoffMotive,
    HandoffReason,
    SessionState,
)


def test_every_member_of_the_vocabulary_has_a_label() -> None:
    assert set(AGENT_LABELS) == set(AgentName)
    assert set(STATE_LABELS) == set(SessionState)
    assert set(HANDOFF_REASON_LABELS) == set(HandoffReason)
    assert set(HANDOFF_MOTIVE_LABELS) == set(HandoffMotive)


def test_choices_are_the_values_with_their_translated_labels_in_order() -> None:
    assert choices(AGENT_LABELS, translate=str.upper, members=PROMPT_AGENTS) == [
        ("triagem", "TRIAGE"),
        ("qualificacao", "QUALIFICATION"),
        ("coleta", "COLLECTION"),
    ]
    assert [value for value, _ in choices(STATE_LABELS, translate=str)] == [
        "TRIAGE",
        "QUALIFYING",
        "DATA_COLLECT",
        "CONFIRM",
        "HUMAN",
        "CLOSED",
    ]


def test_a_model_handoff_is_named_by_its_motive_when_it_gave_one() -> None:
    assert handoff_label_msgid("model_requested", "pedido_cliente") == (
        "customer asked for a person"
    )
    assert handoff_label_msgid("model_requested", "") == "requested by the model"
    assert handoff_label_msgid("model_requested", "texto livre") == "requested by the model"
    assert handoff_label_msgid("llm_timeout", "pedido_cliente") == "model timed out"
    assert handoff_label_msgid("gone_reason") == "gone_reason"
