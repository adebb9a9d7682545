"""One delivery = one transaction (one commit) and a bounded number of queries."""

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime

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


def kinds(trace: Trace) -> list[str]:
    return [sql.split()[0] for sql in trace.queries]


def test_a_known_customer_s_message_is_one_commit_and_five_statements(instance):
    baker.make(
        Session,
        instance=instance,
        customer_phone=CUSTOMER_PHONE,
        customer_user_id=CUSTOMER_USER_ID,
        customer_name="Maria Silva",
    )

    with traced() as trace:
        receive(fixture_bytes("text"))

    assert (trace.commits, trace.outside_the_transaction) == (1, [])
    # savepoint; find the open session and move its times (one UPDATE ... RETURNING); insert the
    # message (ON CONFLICT DO NOTHING); release; insert the delivery.
    assert kinds(trace) == ["SAVEPOINT", "UPDATE", "INSERT", "RELEASE", "INSERT"]


def test_a_new_customer_s_first_message_is_one_commit_and_eleven_statements(instance):
    with traced() as trace:
        receive(fixture_bytes("text"))

    assert (trace.commits, trace.outside_the_transaction) == (1, [])
    # The fast path misses by user id and by phone; the session lookup and the instance; the
    # session insert (with its times) in its own savepoint; the message; the delivery.
    assert kinds(trace) == [
        "SAVEPOINT",
        "UPDATE",
        "UPDATE",
        "SELECT",
        "SELECT",
        "SAVEPOINT",
        "INSERT",
        "RELEASE",
        "INSERT",
        "RELEASE",
        "INSERT",
    ]


def test_each_further_message_of_a_batch_costs_one_insert(instance):
    receive(texts(1))  # opens the session

    with traced() as six:
        receive(texts(6).replace(b"wamid.MANY", b"wamid.MORE"))

    assert (six.commits, six.outside_the_transaction) == (1, [])
    assert kinds(six) == ["SAVEPOINT", "UPDATE", *["INSERT"] * 6, "RELEASE", "INSERT"]


def test_a_refused_payload_is_still_one_commit(instance):
    with traced() as trace:
        receive(encode({"entry": "nope"}))

    assert (trace.commits, trace.outside_the_transaction) == (1, [])
    # The savepoint, rolled back and released, and the delivery insert.
    assert kinds(trace) == ["SAVEPOINT", "ROLLBACK", "RELEASE", "INSERT"]


def test_a_customer_s_burst_moves_the_session_times_once_to_the_newest_message(instance):
    receive(texts(1))  # opens the session
    document = json.loads(texts(3).replace(b"wamid.MANY", b"wamid.BURST"))
    for offset, message in enumerate(document["entry"][0]["changes"][0]["value"]["messages"]):
        message["timestamp"] = str(1764500000 + 60 * offset)

    with traced() as trace:
        receive(encode(document))

    assert kinds(trace) == [
        "SAVEPOINT",
        "UPDATE",
        "INSERT",
        "INSERT",
        "INSERT",
        "RELEASE",
        "INSERT",
    ]
    newest = datetime.fromtimestamp(1764500120, tz=UTC)
    assert list(Session.objects.values_list("last_message_at", "last_inbound_at")) == [
        (newest, newest)
    ]
