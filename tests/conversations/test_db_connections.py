"""A Celery worker's PostgreSQL connection pool (conversations/db_connections.py): switched on at
the worker's start, and a thread's pooled connection goes back to the pool before each model
call, never inside a transaction; the next query takes one again. Without the pool (the web,
the embedded default) nothing is released."""

from collections.abc import Iterator, Sequence
from typing import Any, cast

import pytest
from django.db import connection, transaction
from django.db.backends.postgresql.base import DatabaseWrapper

from agents.llm import CallPurpose, ChatMessage, LLMCallResult
from conversations.db_connections import (
    ConnectionReleasingClient,
    pooled_connections_release,
    worker_connection_pool_enable,
)
from conversations.models import Session
from tests.helpers.fake_collaborators import FakeLLM

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def pooled() -> Iterator[None]:
    """This test process's connection switched to the pool as a worker's is; restored after."""
    database = connection.settings_dict
    saved = (database["CONN_MAX_AGE"], dict(database.get("OPTIONS", {})))
    assert worker_connection_pool_enable()
    yield
    connection.close()
    cast(DatabaseWrapper, connection).close_pool()
    database["CONN_MAX_AGE"], database["OPTIONS"] = saved


class ConnectionWatchingLLM(FakeLLM):
    """Records whether the thread held a database connection when the model was called."""

    def __init__(self) -> None:
        super().__init__()
        self.held: list[bool] = []

    def chat(
        self,
        *,
        model: str,
        instructions: str,
        messages: Sequence[ChatMessage],
        purpose: CallPurpose,
    ) -> LLMCallResult:
        self.held.append(connection.connection is not None)
        return super().chat(
            model=model, instructions=instructions, messages=messages, purpose=purpose
        )


def call(client: Any) -> LLMCallResult:
    result: LLMCallResult = client.chat(
        model="gpt-4o-mini", instructions="", messages=[], purpose="agent"
    )
    return result


def test_only_a_worker_pools_its_connections(pooled: None) -> None:
    assert connection.settings_dict["OPTIONS"]["pool"] == {
        "min_size": 1,
        "max_size": 8,
        "timeout": 30.0,
    }
    assert connection.settings_dict["CONN_MAX_AGE"] == 0
    Session.objects.count()
    assert cast(DatabaseWrapper, connection).pool is not None


def test_without_the_pool_nothing_is_released() -> None:
    inner = ConnectionWatchingLLM()
    Session.objects.count()

    call(ConnectionReleasingClient(inner))

    assert inner.held == [True]
    assert "pool" not in connection.settings_dict.get("OPTIONS", {})


@pytest.mark.usefixtures("pooled")
def test_the_connection_is_returned_before_the_model_call_and_taken_again_after() -> None:
    inner = ConnectionWatchingLLM()
    assert Session.objects.count() == 0
    assert connection.connection is not None

    call(ConnectionReleasingClient(inner))

    assert inner.held == [False]
    assert Session.objects.count() == 0  # the next query takes a connection from the pool
    assert connection.connection is not None


@pytest.mark.usefixtures("pooled")
def test_inside_a_transaction_the_connection_is_kept() -> None:
    inner = ConnectionWatchingLLM()
    with transaction.atomic():
        Session.objects.count()
        call(ConnectionReleasingClient(inner))
        assert pooled_connections_release() == 0

    assert inner.held == [True]


@pytest.mark.usefixtures("pooled")
def test_release_counts_only_open_pooled_connections() -> None:
    Session.objects.count()

    assert pooled_connections_release() == 1
    assert pooled_connections_release() == 0
