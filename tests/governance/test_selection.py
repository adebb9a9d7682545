"""Which recorded calls a replay selects (`governance.replay.replay_calls`): the override's agent,
successful agent calls with a context snapshot, of real conversations, under the filters."""

from datetime import date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from model_bakery import baker

from conversations.models import Instance, LLMCall, Session
from governance.replay import ReplayFilters, replay_calls, replay_calls_count
from tests.helpers.recorded_calls import conversation

pytestmark = pytest.mark.django_db

SAO_PAULO = ZoneInfo("America/Sao_Paulo")
SNAPSHOT = {"state": "TRIAGE", "agent": "triagem"}


def call(session: Session, at: datetime, **fields: Any) -> LLMCall:
    values: dict[str, Any] = {
        "agent": "triagem",
        "purpose": "agent",
        "outcome": "ok",
        "model": "gpt-4o-mini",
        "context_snapshot": SNAPSHOT,
        "created_at": at,
        **fields,
    }
    result: LLMCall = baker.make(LLMCall, session=session, **values)
    return result


def selected(**filters: Any) -> list[int]:
    return list(
        replay_calls(agent="triagem", filters=ReplayFilters(**filters)).values_list(
            "id", flat=True
        )[: filters.get("last_n")]
    )


@pytest.fixture
def calls(instance: Instance) -> dict[str, LLMCall]:
    day = datetime(2026, 11, 10, 12, 0, tzinfo=SAO_PAULO)
    water = conversation(instance, segment="AMBIENTAL")
    food = conversation(instance, segment="ALIMENTOS", handoff_reason="model_requested")
    simulated = conversation(instance, is_simulated=True)
    result = {
        "water_1": call(water, day),
        "water_2": call(water, day + timedelta(days=1)),
        "food": call(food, day + timedelta(days=2)),
        # Just before midnight of 2026-11-12 in São Paulo (already the 13th in UTC).
        "late": call(water, datetime(2026, 11, 12, 23, 30, tzinfo=SAO_PAULO)),
    }
    # Never selected: another agent, a repair, a failed call, no snapshot, a simulated session.
    call(water, day, agent="coleta")
    call(water, day, purpose="repair")
    call(water, day, outcome="timeout")
    call(water, day, context_snapshot=None)
    call(simulated, day)
    return result


def test_without_filters_every_replayable_call_of_the_agent_newest_first(
    calls: dict[str, LLMCall],
) -> None:
    assert selected() == [calls[k].pk for k in ("late", "food", "water_2", "water_1")]


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ({"last_n": 2}, ["late", "food"]),
        ({"segment": "AMBIENTAL"}, ["late", "water_2", "water_1"]),
        ({"handoff_reason": "model_requested"}, ["food"]),
        ({"date_from": date(2026, 11, 11), "date_to": date(2026, 11, 11)}, ["water_2"]),
        ({"date_from": date(2026, 11, 12)}, ["late", "food"]),
        ({"date_to": date(2026, 11, 10)}, ["water_1"]),
        ({"segment": "AMBIENTAL", "last_n": 1}, ["late"]),
    ],
)
def test_the_filters(
    calls: dict[str, LLMCall], filters: dict[str, Any], expected: list[str]
) -> None:
    assert selected(**filters) == [calls[k].pk for k in expected]


def test_the_count_honours_last_n(calls: dict[str, LLMCall]) -> None:
    assert replay_calls_count(agent="triagem", filters=ReplayFilters()) == 4
    assert replay_calls_count(agent="triagem", filters=ReplayFilters(last_n=3)) == 3
    assert replay_calls_count(agent="triagem", filters=ReplayFilters(last_n=9)) == 4
