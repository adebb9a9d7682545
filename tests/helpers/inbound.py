"""Helpers of the inbound tests: the fixtures' moment `T`, a receiver that calls the use case
as the view does, and the fixtures' customer's session."""

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from pytest_django import DjangoCaptureOnCommitCallbacks

from conversations.inbound.deliveries import webhook_delivery_receive
from conversations.models import Instance, Message, Session, WebhookDelivery
from tests import baker_recipes as recipes
from tests.helpers.meta_payloads import (
    Recorder,
    fixture_bytes,
)

T = datetime.fromtimestamp(1764500000, tz=UTC)
HEADERS = {"Content-Type": "application/json"}


class Receiver:
    """Calls the use case like the view does and runs the after-commit callbacks."""

    def __init__(self, capture: DjangoCaptureOnCommitCallbacks) -> None:
        self.capture = capture
        self.turns = Recorder()
        self.sends = Recorder()
        self.callbacks: list[Callable[[], Any]] = []

    def __call__(self, body: bytes | str) -> WebhookDelivery:
        raw = fixture_bytes(body) if isinstance(body, str) else body
        with self.capture(execute=True) as callbacks:
            receipt = webhook_delivery_receive(
                raw_body=raw, headers=HEADERS, enqueue_turn=self.turns, enqueue_send=self.sends
            )
        self.callbacks += callbacks
        return WebhookDelivery.objects.get(pk=receipt.delivery_id)


def make_session(on: Instance, **fields: Any) -> Session:
    """The fixtures' customer's conversation, with no name yet and a message five minutes before
    T; `fields` override any of it."""
    defaults: dict[str, Any] = {"customer_name": "", "last_message_at": T - timedelta(minutes=5)}
    # `**` of a dict[str, Any] could be `_quantity`: mypy cannot pick the overload that returns one.
    session: Session = recipes.known_customer.make(instance=on, **(defaults | fields))
    return session


def messages(session: Session, direction: str) -> list[Message]:
    return list(session.messages.filter(direction=direction).order_by("id"))
