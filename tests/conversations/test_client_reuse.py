"""The HTTP clients are built once per process and configuration, not per task
(docs/operations.md, HTTP clients per process): every send, read receipt, turn and summary task of a worker
reuses one keep-alive connection pool to the Graph API and one to the model provider, built once
even when a threads worker's first burst asks for them from many threads at once."""

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from pytest_django import Settings

from conversations import provider_circuit
from conversations.provider_circuit import task_llm_client
from conversations.sending import worker as tasks_module
from conversations.sending.worker import graph_client


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


def test_a_burst_of_threads_on_a_fresh_process_builds_each_client_once(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As a threads worker's first burst: 20 tasks ask for the clients at the same moment.
    settings.WHATSAPP_API_BASE_URL = "https://burst-graph.example.test"
    settings.OPENAI_BASE_URL = "https://burst-llm.example.test/v1"
    built: list[str] = []
    real_graph = tasks_module.GraphClient  # type: ignore[attr-defined]
    real_openai = provider_circuit.OpenAIClient  # type: ignore[attr-defined]

    def slow(cls: Any, name: str) -> Any:
        def build(**kwargs: Any) -> Any:
            built.append(name)
            time.sleep(0.05)  # a client's TLS context takes this long to build, or longer
            return cls(**kwargs)

        return build

    monkeypatch.setattr(tasks_module, "GraphClient", slow(real_graph, "graph"))
    monkeypatch.setattr(provider_circuit, "OpenAIClient", slow(real_openai, "openai"))
    start = threading.Barrier(20)

    def task() -> tuple[Any, Any]:
        start.wait()
        return graph_client(), task_llm_client().inner  # type: ignore[attr-defined]

    with ThreadPoolExecutor(20) as pool:
        clients = list(pool.map(lambda _: task(), range(20)))

    assert sorted(built) == ["graph", "openai"]
    assert (len({id(g) for g, _ in clients}), len({id(m) for _, m in clients})) == (1, 1)
