"""A small run of bench/personas.py's path: two personas against the good draft, through the
fake model and the real openai SDK; each reaches its confirmed request, each conversation makes
the script's 11 model calls and sends the same number of queries as the other (a persona's
queries do not grow with the run's)."""

import pytest
from django.db import connection
from pytest_django import Settings

from bench.personas import personas_create, run_measure
from prompts_admin.models import PromptOverride
from tests.fakes.openai_server import FakeOpenAIServer
from tests.simulator import personas_script as script

pytestmark = pytest.mark.django_db(transaction=True)

# One farmer's conversation: its persona_play, on each database.
PERSONA_QUERIES = {"sqlite": 248, "postgresql": 199}


def test_two_personas_reach_their_request_with_the_same_queries_each(
    settings: Settings, openai_settings: FakeOpenAIServer
) -> None:
    script.world_prepare(settings, openai_settings)
    override = PromptOverride.objects.create(agent="coleta", content=script.GOOD_DRAFT)

    figures = run_measure(
        override_id=override.pk,
        persona_ids=personas_create(2),
        requests=lambda: openai_settings.request_count,
    )

    assert (figures.reached, figures.model_calls) == (2, 22)
    assert figures.persona_queries == [PERSONA_QUERIES[connection.vendor]] * 2
    assert len(figures.persona_seconds) == 2
    assert figures.seconds >= sum(figures.persona_seconds)
