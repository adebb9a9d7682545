"""The automatic pause of a gradual release (governance.rollout_pause): 200 new conversations
at 50% (110 on the candidate's side, 90 on the current's, by the bucket rule)."""

import pytest
from pytest_django import Settings

from agents.rollout import rollout_bucket
from conversations.models import Instance, Session
from governance.rollout_pause import rollout_pauses_check
from governance.tasks import check_rollout_pauses
from prompts_admin.models import PromptOverride
from tests import baker_recipes as recipes

pytestmark = pytest.mark.django_db


def version_of(override: PromptOverride) -> str:
    return f"override:{override.history.latest().history_id}"


def release(
    instance: Instance,
    *,
    candidate_handoffs: int,
    current_handoffs: int,
    candidate_reason: str = "model_requested",
) -> PromptOverride:
    current = PromptOverride.objects.create(agent="triagem", content="Atual.", is_active=True)
    candidate = PromptOverride.objects.create(agent="triagem", content="Nova.", rollout_percent=50)
    handed = {"candidate": candidate_handoffs, "current": current_handoffs}
    for pk in range(1, 201):
        side = "candidate" if rollout_bucket(pk) < 50 else "current"
        version = version_of(candidate if side == "candidate" else current)
        kind = candidate_reason if side == "candidate" else "model_requested"
        reason = kind if handed[side] > 0 else ""
        handed[side] -= 1
        recipes.session.make(
            instance=instance, pk=pk, prompt_versions={"triagem": version}, handoff_reason=reason
        )
    return candidate


def test_a_candidate_that_hands_off_more_is_paused_with_the_numbers(instance: Instance) -> None:
    candidate = release(instance, candidate_handoffs=33, current_handoffs=9)  # 30% vs 10%

    assert rollout_pauses_check() == [candidate.pk]

    candidate.refresh_from_db()
    assert candidate.rollout_percent == 50
    assert candidate.rollout_pause_reason == (
        "Liberação aos poucos pausada automaticamente: transferências 30% (110 conversas) "
        "contra 10% (90 conversas), margem de 5 pontos"
    )
    assert candidate.history.latest().history_change_reason == candidate.rollout_pause_reason
    assert rollout_pauses_check() == []  # not paused twice


def test_a_candidate_that_is_not_worse_is_not_paused(instance: Instance) -> None:
    candidate = release(instance, candidate_handoffs=11, current_handoffs=9)  # 10% vs 10%

    assert rollout_pauses_check() == []

    candidate.refresh_from_db()
    assert candidate.rollout_paused_at is None
    assert Session.objects.count() == 200


def test_the_check_makes_three_queries_when_nothing_is_paused(
    instance: Instance, django_assert_num_queries: object
) -> None:
    release(instance, candidate_handoffs=11, current_handoffs=9)

    with django_assert_num_queries(3):  # type: ignore[operator]
        rollout_pauses_check()


def test_a_candidate_that_breaks_the_contract_more_is_paused_though_its_handoffs_are_not_worse(
    instance: Instance,
) -> None:
    # Handoffs 20/110 (18%) against 15/90 (17%): not worse; contract errors 18% against 0%.
    candidate = release(
        instance, candidate_handoffs=20, current_handoffs=15, candidate_reason="llm_invalid_json"
    )

    assert rollout_pauses_check() == [candidate.pk]

    candidate.refresh_from_db()
    assert candidate.rollout_pause_reason == (
        "Liberação aos poucos pausada automaticamente: erros de contrato 18% (110 conversas) "
        "contra 0% (90 conversas), margem de 5 pontos"
    )


def test_the_beat_task_pauses_and_counts(instance: Instance) -> None:
    release(instance, candidate_handoffs=33, current_handoffs=9)

    assert (check_rollout_pauses.delay().get(), check_rollout_pauses.delay().get()) == (1, 0)


# --- The rule's boundaries as the check counts the conversations --------------------------------


def sides(
    instance: Instance, *, candidate: tuple[int, int], current: tuple[int, int]
) -> PromptOverride:
    """A release whose candidate's side has `candidate` = (handed off, conversations), and the
    current's side `current`, each conversation pinned explicitly (not by its bucket)."""
    active = PromptOverride.objects.create(agent="triagem", content="Atual.", is_active=True)
    released = PromptOverride.objects.create(agent="triagem", content="Nova.", rollout_percent=50)
    for override, (handed_off, total) in ((released, candidate), (active, current)):
        version = version_of(override)
        for n in range(total):
            recipes.session.make(
                instance=instance,
                prompt_versions={"triagem": version},
                handoff_reason="model_requested" if n < handed_off else "",
            )
    return released


@pytest.mark.parametrize(
    ("candidate", "current", "paused"),
    [
        # Every candidate conversation handed off, none of the current's: only the count decides.
        ((29, 29), (0, 30), False),  # 29 on the candidate's side, one short of the minimum
        ((30, 30), (0, 29), False),  # 29 on the current's side
        ((30, 30), (0, 30), True),  # 30 each: at the minimum
        ((31, 31), (0, 31), True),
        # Past and short of the 5-point margin (z = 1.7445 and 1.5498, see the rule's tests).
        ((19, 100), (6, 100), True),
        ((18, 100), (6, 100), False),
        ((11, 100), (6, 100), False),  # exactly the margin: not past it
        ((0, 40), (0, 40), False),  # both rates zero
        ((0, 0), (0, 200), False),  # no conversation on the candidate's side yet
    ],
)
def test_the_check_pauses_at_the_rules_boundaries(
    instance: Instance, candidate: tuple[int, int], current: tuple[int, int], paused: bool
) -> None:
    released = sides(instance, candidate=candidate, current=current)

    result = rollout_pauses_check()

    released.refresh_from_db()
    assert (result, released.rollout_paused_at is not None) == (
        [released.pk] if paused else [],
        paused,
    )
    assert released.rollout_percent == 50


def test_simulated_conversations_count_on_neither_side(instance: Instance) -> None:
    released = sides(instance, candidate=(29, 29), current=(0, 30))
    recipes.session.make(
        instance=instance,
        is_simulated=True,
        prompt_versions={"triagem": version_of(released)},
        handoff_reason="model_requested",
    )

    assert rollout_pauses_check() == []


@pytest.mark.parametrize(("margin", "text"), [(2.5, "2,5"), (5.0, "5"), (10.0, "10")])
def test_the_reason_writes_the_margin_as_portuguese_does(
    instance: Instance, settings: Settings, margin: float, text: str
) -> None:
    settings.ROLLOUT_PAUSE_MARGIN = margin
    candidate = release(instance, candidate_handoffs=55, current_handoffs=9)  # 50% vs 10%

    assert rollout_pauses_check() == [candidate.pk]

    candidate.refresh_from_db()
    assert candidate.rollout_pause_reason == (
        "Liberação aos poucos pausada automaticamente: transferências 50% (110 conversas) "
        f"contra 10% (90 conversas), margem de {text} pontos"
    )
