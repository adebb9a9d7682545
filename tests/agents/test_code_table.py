"""The code table says, for each code, who may use it and what it needs (DESIGN.md §7)."""

import pytest

from agents.codes import (
    CODE_TABLE,
    Code,
    MessageRule,
    code_spec,
    codes_allowed,
    is_allowed,
    states_of,
)
from agents.states import AgentName, SessionState

S = SessionState


def test_the_table_has_exactly_the_designed_codes() -> None:
    assert sorted(CODE_TABLE) == [1, 2, 3, 4, 5, 6, 7, 8, 98, 99]


@pytest.mark.parametrize(
    ("state", "codes"),
    [
        (S.TRIAGE, [1, 2, 8, 98, 99]),
        (S.QUALIFYING, [1, 3, 7, 8, 98, 99]),
        (S.DATA_COLLECT, [1, 4, 7, 8, 98, 99]),
        (S.CONFIRM, [1, 5, 6, 7, 8, 98, 99]),
        (S.HUMAN, []),
        (S.CLOSED, []),
    ],
)
def test_codes_allowed_per_state(state: SessionState, codes: list[int]) -> None:
    assert [spec.code.value for spec in codes_allowed(state)] == codes


@pytest.mark.parametrize(
    ("code", "rule"),
    [
        (1, MessageRule.REQUIRED),
        (2, MessageRule.IGNORED),
        (3, MessageRule.IGNORED),
        (4, MessageRule.REQUIRED),
        (5, MessageRule.REQUIRED),
        (6, MessageRule.REQUIRED),
        (7, MessageRule.IGNORED),
        (8, MessageRule.REQUIRED),
        (98, MessageRule.IGNORED),
        (99, MessageRule.IGNORED),
    ],
)
def test_message_rule_per_code(code: int, rule: MessageRule) -> None:
    spec = code_spec(code)
    assert spec is not None
    assert spec.message is rule


def test_routing_codes_are_2_3_and_7() -> None:
    assert sorted(spec.code.value for spec in CODE_TABLE.values() if spec.routes) == [2, 3, 7]


@pytest.mark.parametrize(
    ("value", "state", "allowed"),
    [(123, S.TRIAGE, False), (2, S.QUALIFYING, False), (2, S.TRIAGE, True), (5, S.CONFIRM, True)],
)
def test_is_allowed(value: int, state: SessionState, allowed: bool) -> None:
    assert is_allowed(value, state) is allowed


def test_unknown_code_has_no_spec() -> None:
    assert code_spec(123) is None
    spec = code_spec(Code.HANDOFF.value)
    assert spec is not None
    assert spec.name == "HANDOFF"


def test_coleta_serves_data_collection_and_confirmation() -> None:
    assert states_of(AgentName.COLETA) == [S.DATA_COLLECT, S.CONFIRM]
    assert states_of(AgentName.SUMMARY) == []
