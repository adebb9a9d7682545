"""Simulated customers against a release (`simulate_personas --release ID`): the conversations
pin the release's prompt versions, the run names the release, and the release's page shows the
run; a release naming a broken draft misses the outcome. The scripted fake model answers the
customer and the agents (tests/simulator/personas_script.py)."""

import json

import pytest
from django.core.management.base import CommandError

from governance.models import PersonaRun
from governance.releases_admin import persona_report
from prompts_admin.models import Release
from tests.fakes.openai_server import FakeOpenAIServer
from tests.simulator import personas_script as script
from tests.simulator.test_personas import draft, farmer, simulate, world  # noqa: F401


def release_of(content: str) -> Release:
    """A draft release with a collection draft of `content` and the built-in triage and
    qualification prompts."""
    collection = draft(content)
    return Release.objects.create(
        name="Março",
        prompts={
            "triagem": None,
            "qualificacao": None,
            "coleta": collection.history.latest().history_id,
        },
        packages={},
    )


def test_a_release_is_played_with_its_prompt_versions_and_shown_on_its_page(
    world: FakeOpenAIServer,  # noqa: F811 (the fixture imported above)
) -> None:
    persona = farmer()
    release = release_of(script.GOOD_DRAFT)

    output, code = simulate("--release", str(release.pk), "--json")

    run = PersonaRun.objects.get()
    data = json.loads(output)
    assert code == 0
    assert (data["release"], data["override"], data["reached"], data["failed"]) == (
        release.pk,
        None,
        1,
        0,
    )
    assert data["results"][0]["persona"] == persona.pk
    assert run.release == release
    assert run.prompt_versions == {
        "triagem": "builtin",
        "qualificacao": "builtin",
        "coleta": f"override:{release.prompts['coleta']}",
    }
    assert persona_report(release) == run
    # The release's draft reached the collection agent.
    collection = [r for r in world.requests if r["model"] == script.COLLECTION_MODEL]
    assert collection[0]["instructions"].startswith("RASCUNHO BOM da coleta de Lia")


def test_a_release_of_a_broken_draft_misses_the_outcome(
    world: FakeOpenAIServer,  # noqa: F811
) -> None:
    farmer()
    release = release_of(script.BROKEN_DRAFT)

    output, code = simulate("--release", str(release.pk), "--json")

    assert code == 1
    assert (json.loads(output)["reached"], json.loads(output)["failed"]) == (0, 1)


def test_an_unknown_release_and_both_targets_are_refused(
    world: FakeOpenAIServer,  # noqa: F811
) -> None:
    with pytest.raises(CommandError, match="no release with id 999"):
        simulate("--release", "999")
    with pytest.raises(CommandError, match="not allowed with argument"):
        simulate("--release", "1", "--override", "1")
    assert PersonaRun.objects.count() == 0
