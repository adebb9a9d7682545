"""Fixtures of the replay tests: the model (the fake OpenAI server, through the real SDK) and a
fake Graph API that must hear nothing from a replay."""

import pytest
from pytest_django import Settings

from conversations.models import Instance
from tests import baker_recipes as recipes
from tests.fakes.openai_server import FakeOpenAIServer


@pytest.fixture
def model(openai_settings: FakeOpenAIServer, settings: Settings) -> FakeOpenAIServer:
    """The fake OpenAI server; one model call at a time, so the queued answers meet the calls
    in the order the replay makes them (oldest recorded call first)."""
    settings.REPLAY_CONCURRENCY = 1
    return openai_settings


@pytest.fixture
def instance(db: None) -> Instance:
    result: Instance = recipes.instance.make()
    return result
