"""Fixtures and helpers of the inbound tests. The webhook's instance and the fake Graph API come
from tests/conversations/conftest.py, its known customer from tests/conversations/whatsapp/
conftest.py, beside the payload fixtures they replay."""

from datetime import UTC, datetime, timedelta

import pytest
from model_bakery import baker

from conversations.inbound.deliveries import webhook_delivery_receive
from conversations.models import Instance, Message, Session, WebhookDelivery
from tests.conversations.whatsapp.conftest import (  # noqa: F401 (fixtures, by name)
    CUSTOMER_PHONE,
    CUSTOMER_USER_ID,
    Recorder,
    fixture_bytes,
    known_customer,
)

T = datetime.fromtimestamp(1764500000, tz=UTC)
HEADERS = {"Content-Type": "application/json"}


class Receiver:
    """Calls the use case like the view does and runs the after-commit callbacks."""

    def __init__(self, capture) -> None:
        self.capture = capture
        self.turns = Recorder()
        self.sends = Recorder()
        self.callbacks: list = []

    def __call__(self, body: bytes | str) -> WebhookDelivery:
        raw = fixture_bytes(body) if isinstance(body, str) else body
        with self.capture(execute=True) as callbacks:
            receipt = webhook_delivery_receive(
                raw_body=raw, headers=HEADERS, enqueue_turn=self.turns, enqueue_send=self.sends
            )
        self.callbacks += callbacks
        return WebhookDelivery.objects.get(pk=receipt.delivery_id)


@pytest.fixture
def receive(django_capture_on_commit_callbacks) -> Receiver:
    return Receiver(django_capture_on_commit_callbacks)


def make_session(on: Instance, **fields) -> Session:
    defaults = {
        "customer_phone": CUSTOMER_PHONE,
        "customer_user_id": CUSTOMER_USER_ID,
        "last_message_at": T - timedelta(minutes=5),
    }
    return baker.make(Session, instance=on, **(defaults | fields))


def messages(session: Session, direction: str) -> list[Message]:
    return list(session.messages.filter(direction=direction).order_by("id"))
