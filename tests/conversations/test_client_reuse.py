"""The HTTP clients are built once per process and configuration, not per task (issue 16,
item 3): every send, read receipt, turn and summary task of a worker reuses one keep-alive
connection pool to the Graph API and one to the model provider."""

from pytest_django import Settings

from conversations.provider_circuit import task_llm_client
from conversations.whatsapp.tasks import graph_client


def test_the_graph_client_is_shared_by_the_tasks_of_a_process(settings: Settings) -> None:
    settings.WHATSAPP_API_BASE_URL = "https://graph.example.test"
    first, second = graph_client(), graph_client()
    settings.WHATSAPP_API_BASE_URL = "https://other-graph.example.test"
    other = graph_client()

    assert first is second
    assert first.base_url == "https://graph.example.test"
    assert other is not first
    assert other.base_url == "https://other-graph.example.test"


def test_the_model_client_is_shared_behind_a_fresh_circuit_wrapper(settings: Settings) -> None:
    settings.OPENAI_BASE_URL = "https://llm.example.test/v1"
    first, second = task_llm_client(), task_llm_client()
    settings.OPENAI_API_KEY = "another-key"
    other = task_llm_client()

    assert first is not second  # the breaker's wrapper is per task; its state is in the DB
    assert first.inner is second.inner  # type: ignore[attr-defined]
    assert other.inner is not first.inner  # type: ignore[attr-defined]
