"""A delivery's transaction (conversations.inbound.deliveries): failures keep the raw body and
roll the events back, lock conflicts are retried once, failed deliveries reprocessed."""

from datetime import datetime
from typing import Any, NoReturn

import pytest
from django.db import OperationalError
from pytest_django import DjangoCaptureOnCommitCallbacks

from conversations.inbound import events
from conversations.inbound.deliveries import webhook_delivery_receive, webhook_delivery_reprocess
from conversations.models import (
    Instance,
    Message,
    Session,
    WebhookDelivery,
    WebhookOutcome,
)
from tests.helpers.inbound import Receiver
from tests.helpers.meta_payloads import (
    Recorder,
    encode,
    fixture_bytes,
    load_fixture,
)
from whatsapp.payload import MalformedBodyError

pytestmark = pytest.mark.django_db


# --- failures --------------------------------------------------------------------------------


def test_an_unreadable_status_is_reported_with_its_reason_and_the_rest_of_the_batch_applied(
    instance: Instance, receive: Receiver
) -> None:
    # Each item is read on its own: one unreadable status does not refuse the whole delivery.
    document = load_fixture("batch")
    document["entry"][1]["changes"][0]["value"]["statuses"][1]["timestamp"] = "soon"
    raw = encode(document)

    delivery = receive(raw)

    assert (delivery.outcome, bytes(delivery.raw_body), delivery.messages_count) == (
        "processed",
        raw,
        3,
    )
    assert delivery.error == (
        "entry[1].changes[messages].value.statuses[1]: timestamp: expected a Unix timestamp"
    )
    assert (Session.objects.count(), Message.objects.count()) == (2, 3)


def test_a_payload_nothing_of_which_can_be_read_keeps_the_raw_body_marks_it_failed(
    instance: Instance, receive: Receiver
) -> None:
    document = load_fixture("text")
    document["entry"][0]["changes"][0]["value"]["metadata"] = "lost"
    raw = encode(document)

    delivery = receive(raw)

    assert (delivery.outcome, bytes(delivery.raw_body), delivery.messages_count) == (
        "failed",
        raw,
        0,
    )
    assert delivery.error == (
        "entry[0].changes[messages].value: metadata: expected an object, got str"
    )
    assert (Session.objects.count(), Message.objects.count()) == (0, 0)
    assert (receive.turns.calls, receive.callbacks) == ([], [])


def test_an_unexpected_error_while_applying_rolls_back_every_event_but_keeps_the_body(
    instance: Instance, receive: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A bug cannot be produced with real data, so one step is made to fail after others wrote.
    def broken(statuses: Any, *, now: datetime) -> NoReturn:
        raise RuntimeError("boom")

    monkeypatch.setattr(events, "statuses_apply", broken)

    delivery = receive("batch")

    assert (delivery.outcome, delivery.error) == ("failed", "RuntimeError: boom")
    assert bytes(delivery.raw_body) == fixture_bytes("batch")
    assert (Session.objects.count(), Message.objects.count()) == (0, 0)
    assert (receive.turns.calls, receive.callbacks) == ([], [])


def test_the_stored_error_of_a_failed_delivery_is_redacted(
    instance: Instance, receive: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(statuses: Any, *, now: datetime) -> NoReturn:
        raise RuntimeError('duplicate key: Key (customer_phone)=(5511987654321) for "a@b.com"')

    monkeypatch.setattr(events, "statuses_apply", broken)

    delivery = receive("batch")

    assert delivery.error == (
        'RuntimeError: duplicate key: Key (customer_phone)=([phone]) for "[email]"'
    )


@pytest.mark.parametrize("raw", [b"not json", b'{"entry": [', b"\xff"])
def test_a_body_that_is_not_json_is_refused_and_nothing_is_stored(
    instance: Instance, raw: bytes
) -> None:
    with pytest.raises(MalformedBodyError):
        webhook_delivery_receive(
            raw_body=raw, headers={}, enqueue_turn=Recorder(), enqueue_send=Recorder()
        )

    assert WebhookDelivery.objects.count() == 0


def test_a_failed_delivery_is_applied_again_by_reprocessing(
    instance: Instance,
    receive: Receiver,
    monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    monkeypatch.setattr(events.Outbox, "enqueue_after_commit", lambda self: 1 / 0)
    failed = receive("text")
    monkeypatch.undo()
    turns = Recorder()

    with django_capture_on_commit_callbacks(execute=True):
        receipt = webhook_delivery_reprocess(
            delivery_id=failed.pk, enqueue_turn=turns, enqueue_send=Recorder()
        )

    failed.refresh_from_db()
    assert receipt is not None
    assert (receipt.outcome, failed.outcome, failed.error, failed.messages_count) == (
        "processed",
        "processed",
        "",
        1,
    )
    assert turns.calls == [Session.objects.get().pk]
    assert WebhookDelivery.objects.count() == 1


def test_reprocessing_a_delivery_that_did_not_fail_does_nothing(
    instance: Instance, receive: Receiver
) -> None:
    processed = receive("text")

    assert (
        webhook_delivery_reprocess(
            delivery_id=processed.pk, enqueue_turn=Recorder(), enqueue_send=Recorder()
        )
        is None
    )
    assert Message.objects.count() == 1
    assert WebhookDelivery.objects.get().outcome == WebhookOutcome.PROCESSED


def test_a_lock_conflict_is_retried_once_inside_the_same_transaction(
    instance: Instance, receive: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = events.Outbox.enqueue_after_commit
    calls: list[int] = []

    def deadlock_once(self: events.Outbox) -> None:
        calls.append(1)
        if len(calls) == 1:
            raise OperationalError("deadlock detected")
        real(self)

    monkeypatch.setattr(events.Outbox, "enqueue_after_commit", deadlock_once)

    delivery = receive("text")

    assert (delivery.outcome, delivery.messages_count, len(calls)) == ("processed", 1, 2)
    assert Message.objects.count() == 1
    assert receive.turns.calls == [Session.objects.get().pk]


def test_a_lock_conflict_that_persists_marks_the_delivery_failed(
    instance: Instance, receive: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    def deadlock(self: events.Outbox) -> NoReturn:
        raise OperationalError("deadlock detected")

    monkeypatch.setattr(events.Outbox, "enqueue_after_commit", deadlock)

    delivery = receive("text")

    assert (delivery.outcome, delivery.error) == ("failed", "OperationalError: deadlock detected")
    assert (Message.objects.count(), Session.objects.count()) == (0, 0)
