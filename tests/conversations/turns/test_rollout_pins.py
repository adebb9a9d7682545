"""A gradual release (docs/decisions/0057): a new conversation's first turn pins the agent's
candidate when its bucket is below the percent, the active override otherwise; stopping it sends
new conversations to the active one; a conversation keeps its pin through every change. Real
first turns through the pipeline (the in-process model) on the database."""

from typing import Any

import pytest

from conversations.models import Instance, LLMCall, Session
from prompts_admin.models import PromptOverride
from tests import baker_recipes as recipes
from tests.helpers.pipeline import inbound, pipeline

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("catalog")]


def version_of(override: PromptOverride) -> str:
    return f"override:{override.history.latest().history_id}"


def current_and_candidate(percent: int) -> tuple[str, str]:
    current = PromptOverride.objects.create(
        agent="triagem", content="Atual de {{ agent_name }}.", is_active=True
    )
    candidate = PromptOverride.objects.create(
        agent="triagem", content="Candidata de {{ agent_name }}.", rollout_percent=percent
    )
    return version_of(current), version_of(candidate)


def first_turn(instance: Instance, session_id: int, capture: Any) -> Session:
    """A new conversation with the id `session_id` and its first turn."""
    session: Session = recipes.session.make(instance=instance, pk=session_id)
    inbound(session, "Oi")
    pipeline('{"s":1}Certo!').run(session, capture=capture)
    session.refresh_from_db()
    return session


def test_at_50_percent_the_candidate_is_pinned_by_110_of_200_new_conversations(
    instance: Instance, capture: Any
) -> None:
    current, candidate = current_and_candidate(50)

    pins = [first_turn(instance, i, capture).prompt_versions["triagem"] for i in range(1, 201)]

    # By the rule: the ids 1 to 200 whose sha256 bucket is below 50.
    assert (pins.count(candidate), pins.count(current)) == (110, 90)
    # Each first turn's call used the version it pinned.
    calls = list(LLMCall.objects.order_by("session_id").values_list("prompt_version", flat=True))
    assert calls == pins
    assert pins[:7] == [candidate, current, current, candidate, current, candidate, candidate]


def test_the_candidate_and_the_current_text_reach_the_model(
    instance: Instance, capture: Any
) -> None:
    current_and_candidate(50)
    inbound(recipes.session.make(instance=instance, pk=1), "Oi")  # bucket 15
    inbound(recipes.session.make(instance=instance, pk=2), "Oi")  # bucket 61

    runs = [pipeline('{"s":1}Certo!') for _ in range(2)]
    for run, pk in zip(runs, (1, 2), strict=True):
        run.run(Session.objects.get(pk=pk), capture=capture)

    assert [run.llm.calls[0]["instructions"].split("\n")[0] for run in runs] == [
        "Candidata de Lia.",
        "Atual de Lia.",
    ]


def test_after_the_release_stops_new_conversations_get_the_current(
    instance: Instance, capture: Any
) -> None:
    current, candidate = current_and_candidate(50)
    before = first_turn(instance, 1, capture)  # bucket 15
    release = PromptOverride.objects.get(rollout_percent=50)
    release.rollout_percent = None
    release.save()

    after = first_turn(instance, 4, capture)  # bucket 22

    assert before.prompt_versions["triagem"] == candidate
    assert after.prompt_versions["triagem"] == current


def test_a_conversation_keeps_its_candidate_pin_after_the_release_stops(
    instance: Instance, capture: Any
) -> None:
    _current, candidate = current_and_candidate(50)
    session = first_turn(instance, 1, capture)  # bucket 15
    release = PromptOverride.objects.get(rollout_percent=50)
    release.rollout_percent = None
    release.save()

    inbound(session, "Quero um orçamento")
    second = pipeline('{"s":1}Certo!')
    second.run(session, capture=capture)

    assert second.llm.calls[0]["instructions"].startswith("Candidata de Lia.\n\n")
    session.refresh_from_db()
    assert session.prompt_versions == {
        "triagem": candidate,
        "qualificacao": "builtin",
        "coleta": "builtin",
    }


def test_a_conversation_pinned_to_the_current_keeps_it_when_the_share_rises(
    instance: Instance, capture: Any
) -> None:
    current, _candidate = current_and_candidate(10)
    session = first_turn(instance, 1, capture)  # bucket 15: above 10
    release = PromptOverride.objects.get(rollout_percent=10)
    release.rollout_percent = 99
    release.save()

    inbound(session, "Quero um orçamento")
    second = pipeline('{"s":1}Certo!')
    second.run(session, capture=capture)

    assert second.llm.calls[0]["instructions"].startswith("Atual de Lia.\n\n")
    assert list(LLMCall.objects.values_list("prompt_version", flat=True)) == [current, current]


def test_a_paused_candidate_is_pinned_by_no_new_conversation(
    instance: Instance, capture: Any
) -> None:
    current, _candidate = current_and_candidate(50)
    release = PromptOverride.objects.get(rollout_percent=50)
    release.rollout_paused_at = release.created_at
    release.save()

    session = first_turn(instance, 1, capture)  # bucket 15: the candidate's side

    assert session.prompt_versions["triagem"] == current
    release.refresh_from_db()
    assert release.rollout_percent == 50
