"""One delivery = one transaction (one commit) and a bounded number of queries."""

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import pytest
from django.db import connection
from model_bakery import baker

from conversations.inbound import webhook_delivery_receive
from conversations.models import Session
from tests.conversations.whatsapp.conftest import (
    CUSTOMER_PHONE,
    CUSTOMER_USER_ID,
    Recorder,
    encode,
    fixture_bytes,
    load_fixture,
)

pytestmark = pytest.mark.django_db(transaction=True)


@dataclass
class Trace:
    statements: list[tuple[str, bool]] = field(default_factory=list)
    commits: int = 0

    @property
    def queries(self) -> list[str]:
        # SQLite's explicit BEGIN is the transaction itself, not a query of ours.
        return [sql for sql, _ in self.statements if sql != "BEGIN"]

    @property
    def outside_the_transaction(self) -> list[str]:
        return [sql for sql, atomic in self.statements if not atomic and sql != "BEGIN"]


@contextmanager
def traced() -> Iterator[Trace]:
    trace = Trace()
    commit = connection.commit

    def counting_commit() -> None:
        trace.commits += 1
        commit()

    def record(execute, sql, params, many, context):
        trace.statements.append((sql, connection.in_atomic_block))
        return execute(sql, params, many, context)

    connection.commit = counting_commit  # a spy: the real commit still runs
    try:
        with connection.execute_wrapper(record):
            yield trace
    finally:
        del connection.commit


def receive(raw: bytes) -> None:
    webhook_delivery_receive(
        raw_body=raw, headers={}, enqueue_turn=Recorder(), enqueue_send=Recorder()
    )


def texts(count: int) -> bytes:
    document = load_fixture("text")
    value = document["entry"][0]["changes"][0]["value"]
    first = value["messages"][0]
    value["messages"] = [first | {"id": f"wamid.MANY{n}"} for n in range(count)]
    return encode(document)


def test_a_first_message_is_one_commit_and_thirteen_queries(instance):
    with traced() as trace:
        receive(fixture_bytes("text"))

    assert trace.commits == 1
    assert trace.outside_the_transaction == []
    # instance, known wamids, session lookup, session insert (+savepoint), message insert
    # (+savepoint), session times, the outer savepoint's pair, the delivery insert.
    assert len(trace.queries) == 13


def test_a_message_of_a_known_customer_is_one_commit_and_ten_queries(instance):
    baker.make(
        Session,
        instance=instance,
        customer_phone=CUSTOMER_PHONE,
        customer_user_id=CUSTOMER_USER_ID,
        customer_name="Maria Silva",
    )

    with traced() as trace:
        receive(fixture_bytes("text"))

    assert (trace.commits, trace.outside_the_transaction, len(trace.queries)) == (1, [], 10)


def test_each_further_message_of_a_batch_costs_three_queries(instance):
    with traced() as one:
        receive(texts(1))
    with traced() as six:
        receive(texts(6).replace(b"wamid.MANY", b"wamid.MORE"))

    assert (one.commits, six.commits) == (1, 1)
    # The second delivery finds the session the first opened (no insert): 10 + 5 * 3.
    assert (len(one.queries), len(six.queries)) == (13, 25)


def test_a_refused_payload_is_still_one_commit(instance):
    with traced() as trace:
        receive(encode({"entry": "nope"}))

    assert (trace.commits, trace.outside_the_transaction) == (1, [])
    # The savepoint, rolled back and released, and the delivery insert.
    assert [sql.split()[0] for sql in trace.queries] == [
        "SAVEPOINT",
        "ROLLBACK",
        "RELEASE",
        "INSERT",
    ]
