"""One delivery = one transaction (one commit) and a bounded number of queries."""

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, NoReturn

import pytest
from django.db import connection
from django.utils import timezone
from pytest_django import DjangoCaptureOnCommitCallbacks

from conversations.inbound import events
from conversations.inbound.deliveries import webhook_delivery_receive
from conversations.models import Instance, Message, Session, WebhookDelivery
from tests.helpers.meta_payloads import (
    Recorder,
    encode,
    fixture_bytes,
    load_fixture,
)

pytestmark = pytest.mark.django_db(transaction=True)


SQLITE_BEGIN = ("BEGIN", "BEGIN IMMEDIATE")


@dataclass
class Trace:
    statements: list[tuple[str, bool]] = field(default_factory=list)
    commits: int = 0
    rollbacks: int = 0

    @property
    def queries(self) -> list[str]:
        # SQLite's explicit BEGIN (IMMEDIATE: config/settings.py) is the transaction itself, not
        # a query of ours.
        return [sql for sql, _ in self.statements if sql not in SQLITE_BEGIN]

    @property
    def outside_the_transaction(self) -> list[str]:
        return [sql for sql, atomic in self.statements if not atomic and sql not in SQLITE_BEGIN]


@contextmanager
def traced() -> Iterator[Trace]:
    trace = Trace()
    commit = connection.commit

    def counting_commit() -> None:
        trace.commits += 1
        commit()

    def record(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        trace.statements.append((sql, connection.in_atomic_block))
        return execute(sql, params, many, context)

    rollback = connection.rollback

    def counting_rollback() -> None:
        trace.rollbacks += 1
        rollback()

    # Spies on the instance, deleted below: the real commit and rollback still run.
    connection.commit = counting_commit  # type: ignore[method-assign]
    connection.rollback = counting_rollback  # type: ignore[method-assign]
    try:
        with connection.execute_wrapper(record):
            yield trace
    finally:
        del connection.commit
        del connection.rollback


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


def test_a_known_customer_s_message_is_one_commit_and_four_statements(
    known_customer: Session,
) -> None:
    with traced() as trace:
        receive(fixture_bytes("text"))

    assert (trace.commits, trace.rollbacks, trace.outside_the_transaction) == (1, 0, [])
    # Find the open session and move its times (one UPDATE ... RETURNING); insert the message
    # (ON CONFLICT DO NOTHING); queue its turn (UPDATE turn_queued_at); insert the delivery.
    # No savepoint.
    assert kinds(trace) == ["UPDATE", "INSERT", "UPDATE", "INSERT"]
    assert Message.objects.count() == 1
    assert WebhookDelivery.objects.get().messages_count == 1


def test_a_known_customer_whose_turn_is_queued_costs_three_statements(
    known_customer: Session, django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks
) -> None:
    # A burst: the previous message queued the turn a second ago and no worker has started it.
    Session.objects.filter(pk=known_customer.pk).update(
        turn_queued_at=timezone.now() - timedelta(seconds=1)
    )

    turns = Recorder()

    with traced() as trace, django_capture_on_commit_callbacks(execute=True):
        webhook_delivery_receive(
            raw_body=fixture_bytes("text"), headers={}, enqueue_turn=turns, enqueue_send=Recorder()
        )

    assert (trace.commits, trace.rollbacks, trace.outside_the_transaction) == (1, 0, [])
    # The touch returns the queued turn's mark with the row it locked: no statement to queue it,
    # and no second task.
    assert kinds(trace) == ["UPDATE", "INSERT", "INSERT"]
    assert turns.calls == []
    assert Message.objects.filter(processed_at=None).count() == 1


def test_a_new_customer_s_first_message_is_one_commit_and_eight_statements(
    instance: Instance,
) -> None:
    with traced() as trace:
        receive(fixture_bytes("text"))

    assert (trace.commits, trace.outside_the_transaction) == (1, [])
    # The session touch finds none; the instance; the session insert (with its times) in its
    # own savepoint (a concurrent first message may win it); the message; the turn; the delivery.
    assert kinds(trace) == [
        "UPDATE",
        "SELECT",
        "SAVEPOINT",
        "INSERT",
        "RELEASE",
        "INSERT",
        "UPDATE",
        "INSERT",
    ]


def test_each_further_message_of_a_batch_costs_one_insert(instance: Instance) -> None:
    receive(texts(1))  # opens the session

    with traced() as six:
        receive(texts(6).replace(b"wamid.MANY", b"wamid.MORE"))

    assert (six.commits, six.outside_the_transaction) == (1, [])
    # The session's UPDATE ... RETURNING, six messages, the delivery: the first delivery's turn
    # is still queued (no worker ran), so none is queued again.
    assert kinds(six) == ["UPDATE", *["INSERT"] * 6, "INSERT"]


def test_a_refused_payload_is_still_one_commit(instance: Instance) -> None:
    with traced() as trace:
        receive(encode({"entry": "nope"}))

    assert (trace.commits, trace.outside_the_transaction) == (1, [])
    # Parsing is pure and refused it before any write: the delivery insert alone.
    assert kinds(trace) == ["INSERT"]


def test_an_apply_failure_rolls_everything_back_and_commits_the_body_alone(
    known_customer: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    document = json.loads(texts(2))

    def broken(self: events.Outbox) -> NoReturn:
        raise RuntimeError("boom")

    monkeypatch.setattr(events.Outbox, "enqueue_after_commit", broken)

    with traced() as trace:
        receive(encode(document))

    # The events' transaction (the session's UPDATE ... RETURNING, the messages) is rolled back
    # whole; then the delivery, marked failed, is the one commit.
    assert (trace.commits, trace.rollbacks, trace.outside_the_transaction) == (1, 1, [])
    assert kinds(trace) == ["UPDATE", "INSERT", "INSERT", "INSERT"]
    assert list(WebhookDelivery.objects.values_list("outcome", "error", "messages_count")) == [
        ("failed", "RuntimeError: boom", 0)
    ]
    assert Message.objects.count() == 0


def test_a_customer_s_burst_moves_the_session_times_once_to_the_newest_message(
    instance: Instance,
) -> None:
    receive(texts(1))  # opens the session
    document = json.loads(texts(3).replace(b"wamid.MANY", b"wamid.BURST"))
    for offset, message in enumerate(document["entry"][0]["changes"][0]["value"]["messages"]):
        message["timestamp"] = str(1764500000 + 60 * offset)

    with traced() as trace:
        receive(encode(document))

    assert kinds(trace) == ["UPDATE", "INSERT", "INSERT", "INSERT", "INSERT"]
    newest = datetime.fromtimestamp(1764500120, tz=UTC)
    assert list(Session.objects.values_list("last_message_at", "last_inbound_at")) == [
        (newest, newest)
    ]


# Message's columns, in the model's order: the literal insert writes each one.
MESSAGE_COLUMNS = [
    "session_id",
    "direction",
    "message_type",
    "agent",
    "content",
    "raw_response",
    "json_part",
    "code",
    "action",
    "error",
    "turn_id",
    "part_index",
    "wa_message_id",
    "wa_timestamp",
    "processed_at",
    "delivery_status",
    "delivery_status_at",
    "delivery_error_code",
    "delivery_error_title",
    "send_attempts",
    "last_send_attempt_at",
    "staff_user_id",
    "created_at",
    "interactive",
    "reply_to_wamid",
    "reaction",
    "reaction_at",
]


def test_the_message_insert_writes_every_column_of_the_message_model() -> None:
    # A column added to Message fails here until MESSAGE_STORE_SQL writes it.
    columns, values = events.MESSAGE_STORE_SQL.split(") VALUES (", 1)
    listed = [name.strip() for name in columns.split("(", 1)[1].split(",")]
    placeholders = [value.strip() for value in values.split(")\nON CONFLICT", 1)[0].split(",")]

    assert [f.column for f in Message._meta.concrete_fields if not f.primary_key] == MESSAGE_COLUMNS
    assert listed == MESSAGE_COLUMNS
    assert placeholders == [f"%({name})s" for name in MESSAGE_COLUMNS]


def test_a_stored_message_is_saved_with_its_id_and_a_repeated_wamid_is_not_stored(
    known_customer: Session,
) -> None:
    first = Message(
        session=known_customer, direction="INBOUND", content="oi", wa_message_id="wamid.ONCE"
    )
    again = Message(
        session=known_customer, direction="INBOUND", content="de novo", wa_message_id="wamid.ONCE"
    )

    assert events.message_store_once(first) is True
    assert (first._state.adding, first.pk) == (False, Message.objects.get().pk)
    assert events.message_store_once(again) is False
    assert (again._state.adding, list(Message.objects.values_list("content", flat=True))) == (
        True,
        ["oi"],
    )
