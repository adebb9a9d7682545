"""A small run of bench/prompt_tests.py's path: three copies of a recorded triage turn saved as
test cases expecting code 1, run against a draft through the fake model and the real openai SDK;
all pass, one model call each, and the run reads the database six times whatever its cases."""

from typing import Any

import pytest
from pytest_django import Settings

from bench.prompt_tests import run_measure, suite_create
from tests.fakes.graph_server import FakeGraphAPI
from tests.fakes.openai_server import FakeOpenAIServer
from tests.helpers.recorded_calls import draft

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize("count", [1, 3])
def test_a_suite_passes_with_six_queries_whatever_its_cases(
    settings: Settings, openai_settings: FakeOpenAIServer, fake_graph: FakeGraphAPI, count: int
) -> None:
    settings.REPLAY_CONCURRENCY = 1
    cases: list[Any] = suite_create(count, model=openai_settings)

    figures = run_measure(cases, draft(), model=openai_settings)

    assert (figures.cases, figures.passed, figures.model_calls, figures.queries) == (
        count,
        count,
        count,
        6,
    )
