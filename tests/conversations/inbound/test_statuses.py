"""Delivery statuses (conversations.inbound.delivery_statuses): forward only, failures with Meta's code,
repeats stored once, unknown wamids kept unlinked."""

from datetime import timedelta

import pytest

from conversations.models import (
    DeliveryStatusEvent,
    Instance,
    Message,
)
from tests import baker_recipes as recipes
from tests.helpers.inbound import Receiver, T, make_session

pytestmark = pytest.mark.django_db


def outbound(instance: Instance, *, delivery_status: str) -> Message:
    """A part of an answer the status fixtures name (wamid.OUT01), in `delivery_status`."""
    return recipes.reply.make(
        session=make_session(instance),
        content="",
        delivery_status=delivery_status,
        wa_message_id="wamid.OUT01",
    )


@pytest.mark.parametrize(
    ("before", "fixture", "after"),
    [
        ("sent", "status_delivered", "delivered"),
        ("delivered", "status_read", "read"),
        ("read", "status_delivered", "read"),  # never backwards
        ("read", "status_sent", "read"),
        ("sent", "status_played", "played"),
        ("pending", "status_sent", "sent"),
        ("delivered", "status_failed", "delivered"),  # it reached the phone: not failed
    ],
)
def test_statuses_only_move_forward(
    instance: Instance, receive: Receiver, before: str, fixture: str, after: str
) -> None:
    message = outbound(instance, delivery_status=before)

    delivery = receive(fixture)

    message.refresh_from_db()
    assert message.delivery_status == after
    assert delivery.statuses_count == 1
    assert DeliveryStatusEvent.objects.get().message_id == message.pk


def test_a_failed_status_stores_meta_s_code_and_title(
    instance: Instance, receive: Receiver
) -> None:
    message = outbound(instance, delivery_status="sent")

    receive("status_failed")

    message.refresh_from_db()
    assert (
        message.delivery_status,
        message.delivery_error_code,
        message.delivery_error_title,
        message.delivery_status_at,
    ) == ("failed", 131047, "Re-engagement message", T + timedelta(seconds=5))
    event = DeliveryStatusEvent.objects.get()
    assert (event.status, event.error_code, event.error_details) == (
        "failed",
        131047,
        "Message failed to send because more than 24 hours have passed since the customer "
        "last replied to this number.",
    )


def test_a_repeated_status_is_stored_once(instance: Instance, receive: Receiver) -> None:
    outbound(instance, delivery_status="sent")

    receive("status_read")
    second = receive("status_read")

    assert DeliveryStatusEvent.objects.count() == 1
    assert (second.statuses_count, second.times_received) == (1, 2)


def test_a_status_for_an_unknown_wamid_is_kept_unlinked(
    instance: Instance, receive: Receiver, caplog: pytest.LogCaptureFixture
) -> None:
    receive("status_read")

    event = DeliveryStatusEvent.objects.get()
    assert (event.wa_message_id, event.status, event.message_id) == ("wamid.OUT01", "read", None)
    assert "whatsapp_status_unknown_message" in caplog.messages
