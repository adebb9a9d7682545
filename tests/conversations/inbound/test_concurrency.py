"""Concurrent deliveries on PostgreSQL: the database's unique constraints settle every race."""

import threading

import pytest
from django.db import connections
from django.test import Client
from pytest_django import Settings

from conversations import publishers
from conversations.inbound import tasks as inbound_tasks
from conversations.inbound.tasks import apply_webhook_delivery
from conversations.models import (
    DeliveryStatusEvent,
    Direction,
    Instance,
    Message,
    Session,
    WebhookDelivery,
)
from tests.helpers.meta_payloads import (
    Recorder,
    encode,
    fixture_bytes,
    load_fixture,
    signed_post,
)

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

DELIVERIES = 20


def deliver_concurrently(bodies: list[bytes]) -> list[int]:
    """POST every body from its own thread (own connection), all released at once."""
    barrier = threading.Barrier(len(bodies))
    statuses: list[int] = []

    def post(body: bytes) -> None:
        try:
            barrier.wait()
            statuses.append(signed_post(Client(), body).status_code)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=post, args=(body,)) for body in bodies]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return statuses


@pytest.fixture
def turns(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    recorder = Recorder()
    monkeypatch.setattr(publishers, "enqueue_turn", recorder)
    monkeypatch.setattr(publishers, "enqueue_send", Recorder())
    return recorder


def test_twenty_concurrent_deliveries_of_one_wamid_make_one_row_and_one_turn(
    instance: Instance, turns: Recorder
) -> None:
    statuses = deliver_concurrently([fixture_bytes("text")] * DELIVERIES)

    assert statuses == [200] * DELIVERIES
    session = Session.objects.get()
    assert Message.objects.filter(direction=Direction.INBOUND).count() == 1
    assert turns.calls == [session.pk]
    # The identical body is stored once and counted; the duplicates simply found the message stored.
    assert list(
        WebhookDelivery.objects.values_list("outcome", "messages_count", "times_received")
    ) == [("processed", 1, DELIVERIES)]


def test_concurrent_first_messages_of_one_customer_open_one_session(
    instance: Instance, turns: Recorder
) -> None:
    bodies = []
    for n in range(DELIVERIES):
        document = load_fixture("text")
        document["entry"][0]["changes"][0]["value"]["messages"][0]["id"] = f"wamid.RACE{n}"
        bodies.append(encode(document))

    statuses = deliver_concurrently(bodies)

    assert statuses == [200] * DELIVERIES
    session = Session.objects.get()
    assert session.messages.count() == DELIVERIES
    assert set(turns.calls) == {session.pk}
    assert WebhookDelivery.objects.filter(outcome="processed").count() == DELIVERIES


def test_concurrent_deliveries_of_one_status_store_one_event(
    instance: Instance, turns: Recorder
) -> None:
    statuses = deliver_concurrently([fixture_bytes("status_read")] * DELIVERIES)

    assert statuses == [200] * DELIVERIES
    assert DeliveryStatusEvent.objects.count() == 1


def test_concurrent_batches_naming_two_customers_in_opposite_orders_all_apply(
    instance: Instance, turns: Recorder
) -> None:
    template = load_fixture("batch")
    value = template["entry"][0]["changes"][0]["value"]
    maria, carlos = value["messages"][0], value["messages"][1]
    bodies = []
    for n in range(DELIVERIES):
        # In WhatsApp time, half the deliveries name Maria first and half Carlos first.
        first, second = (maria, carlos) if n % 2 else (carlos, maria)
        value["messages"] = [
            first | {"id": f"wamid.A{n}", "timestamp": "1764500000"},
            second | {"id": f"wamid.B{n}", "timestamp": "1764500001"},
        ]
        bodies.append(encode({"object": template["object"], "entry": template["entry"][:1]}))

    statuses = deliver_concurrently(bodies)

    assert statuses == [200] * DELIVERIES
    assert (
        sorted(WebhookDelivery.objects.values_list("outcome", flat=True))
        == ["processed"] * DELIVERIES
    )
    assert Session.objects.count() == 2
    assert Message.objects.filter(direction=Direction.INBOUND).count() == 2 * DELIVERIES


def test_concurrent_tasks_of_one_deferred_delivery_apply_it_once(
    instance: Instance, turns: Recorder, monkeypatch: pytest.MonkeyPatch, settings: Settings
) -> None:
    # The webhook's task and a sweep's extra one (or a redelivery after a worker died) at once:
    # the delivery's row lock lets one apply it; the others find it applied.
    monkeypatch.setattr(inbound_tasks, "enqueue_delivery", Recorder())
    settings.WEBHOOK_INLINE_MAX_EVENTS = 1
    assert signed_post(Client(), fixture_bytes("batch")).status_code == 200
    delivery = WebhookDelivery.objects.get()
    assert delivery.outcome == "received"
    barrier = threading.Barrier(4)
    results: list[str] = []

    def run() -> None:
        try:
            barrier.wait()
            results.append(apply_webhook_delivery(delivery.pk))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert sorted(results) == ["processed", "skipped", "skipped", "skipped"]
    delivery.refresh_from_db()
    assert (delivery.outcome, delivery.messages_count) == ("processed", 3)
    assert Message.objects.filter(direction=Direction.INBOUND).count() == 3
    assert sorted(turns.calls) == sorted(Session.objects.values_list("pk", flat=True))
