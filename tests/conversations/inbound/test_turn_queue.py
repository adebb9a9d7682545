"""A session's queued turn (`Session.turn_queued_at`): enqueued once until a worker starts it.

`conversations.inbound.session_rules.turn_queue` marks the turn queued unless one was queued
less than `turn_queued_ttl()` ago (judged on the session as read, without a statement); the lease
clears the mark when a worker claims or releases it. The webhook's general path enqueues a turn only when it marked it.
"""

from datetime import UTC, datetime, timedelta
from uuid import UUID, uuid4

import pytest
from django.utils import timezone
from pytest_django import DjangoCaptureOnCommitCallbacks, Settings

from agents.states import SessionState
from conversations.inbound.deliveries import webhook_delivery_receive
from conversations.inbound.session_rules import turn_queue, turn_queued_ttl
from conversations.lease import lease_claim, lease_release
from conversations.models import Instance, Message, Session, WebhookDelivery
from tests import baker_recipes as recipes
from tests.helpers.meta_payloads import (
    Recorder,
    encode,
    load_fixture,
    ttl_boundary_cases,
)

pytestmark = pytest.mark.django_db

NOW = datetime(2025, 11, 30, 12, 0, tzinfo=UTC)
LEASE_TTL = timedelta(minutes=5)
TURN_QUEUED_TTL = turn_queued_ttl()  # the settings' TTL, for the boundary tables below


def queue_state(session: Session) -> tuple[UUID | None, datetime | None, datetime | None]:
    session.refresh_from_db()
    return (session.lease_token, session.lease_expires_at, session.turn_queued_at)


# --- turn_queue ------------------------------------------------------------------------------


def test_a_session_without_a_queued_turn_gets_it_marked_and_the_caller_must_enqueue(
    instance: Instance,
) -> None:
    session = recipes.known_customer.make(instance=instance)

    assert turn_queue(session, now=NOW) is True
    assert queue_state(session) == (None, None, NOW)


@pytest.mark.parametrize(
    ("queued_ago", "marked"),
    ttl_boundary_cases(TURN_QUEUED_TTL),
)
def test_a_queued_turn_spares_another_until_it_is_older_than_the_ttl(
    instance: Instance, queued_ago: timedelta, marked: bool
) -> None:
    before = NOW - queued_ago
    session = recipes.known_customer.make(instance=instance, turn_queued_at=before)

    assert turn_queue(session, now=NOW) is marked
    assert queue_state(session) == (None, None, NOW if marked else before)


@pytest.mark.parametrize(
    ("ttl_seconds", "queued_ago", "marked"),
    [
        pytest.param(60, timedelta(seconds=59, microseconds=999_999), False, id="60 s: 1 µs less"),
        pytest.param(60, timedelta(seconds=60), False, id="60 s: exactly"),
        pytest.param(60, timedelta(seconds=60, microseconds=1), True, id="60 s: 1 µs more"),
        pytest.param(45, timedelta(seconds=45), False, id="45 s: exactly"),
        pytest.param(45, timedelta(seconds=45, microseconds=1), True, id="45 s: 1 µs more"),
    ],
)
def test_the_queued_turn_s_ttl_is_the_setting_in_seconds(
    instance: Instance,
    settings: Settings,
    ttl_seconds: int,
    queued_ago: timedelta,
    marked: bool,
) -> None:
    settings.TURN_QUEUED_TTL_SECONDS = ttl_seconds
    session = recipes.known_customer.make(instance=instance, turn_queued_at=NOW - queued_ago)

    assert turn_queue(session, now=NOW) is marked


def test_queuing_the_turn_of_a_session_that_does_not_exist_marks_nothing() -> None:
    assert turn_queue(Session(pk=999_999), now=NOW) is False


# --- the lease clears it ---------------------------------------------------------------------


def test_claiming_the_lease_clears_the_queued_turn(instance: Instance) -> None:
    session = recipes.known_customer.make(
        instance=instance, turn_queued_at=NOW - timedelta(seconds=5)
    )

    token = lease_claim(session_id=session.pk, now=NOW, ttl=LEASE_TTL)

    assert token is not None
    assert queue_state(session) == (token, NOW + LEASE_TTL, None)


def test_claiming_an_expired_lease_clears_the_queued_turn(instance: Instance) -> None:
    session = recipes.known_customer.make(
        instance=instance,
        lease_token=uuid4(),
        lease_expires_at=NOW,
        turn_queued_at=NOW - timedelta(seconds=5),
    )

    token = lease_claim(session_id=session.pk, now=NOW, ttl=LEASE_TTL)

    assert token is not None
    assert queue_state(session) == (token, NOW + LEASE_TTL, None)


def test_a_lease_held_by_another_worker_leaves_the_queued_turn(instance: Instance) -> None:
    session = recipes.known_customer.make(instance=instance)
    holder = lease_claim(session_id=session.pk, now=NOW, ttl=LEASE_TTL)
    # A message arrived during the holder's turn and queued another.
    assert turn_queue(session, now=NOW + timedelta(seconds=1)) is True

    assert lease_claim(session_id=session.pk, now=NOW + timedelta(seconds=2), ttl=LEASE_TTL) is None
    assert queue_state(session) == (holder, NOW + LEASE_TTL, NOW + timedelta(seconds=1))


def test_releasing_the_lease_clears_the_queued_turn(instance: Instance) -> None:
    session = recipes.known_customer.make(instance=instance)
    token = lease_claim(session_id=session.pk, now=NOW, ttl=LEASE_TTL)
    assert token is not None
    assert turn_queue(session, now=NOW + timedelta(seconds=1)) is True

    assert lease_release(session_id=session.pk, token=token) is True
    assert queue_state(session) == (None, None, None)


def test_releasing_a_lease_this_worker_lost_leaves_the_queued_turn(instance: Instance) -> None:
    session = recipes.known_customer.make(instance=instance)
    token = lease_claim(session_id=session.pk, now=NOW, ttl=LEASE_TTL)
    assert turn_queue(session, now=NOW + timedelta(seconds=1)) is True

    assert lease_release(session_id=session.pk, token=uuid4()) is False
    assert queue_state(session) == (token, NOW + LEASE_TTL, NOW + timedelta(seconds=1))


# --- the webhook's general path --------------------------------------------------------------


def batch(*wamids: str) -> bytes:
    """One delivery of several texts from the same customer (the general path's: a batch)."""
    document = load_fixture("text")
    value = document["entry"][0]["changes"][0]["value"]
    [text] = value["messages"]
    value["messages"] = [
        text | {"id": wamid, "timestamp": str(1764500000 + n)} for n, wamid in enumerate(wamids)
    ]
    return encode(document)


class Webhook:
    """Delivers like the view does and runs the after-commit callbacks."""

    def __init__(self, capture: DjangoCaptureOnCommitCallbacks) -> None:
        self.capture = capture
        self.turns = Recorder()

    def __call__(self, raw: bytes) -> WebhookDelivery:
        with self.capture(execute=True):
            receipt = webhook_delivery_receive(
                raw_body=raw, headers={}, enqueue_turn=self.turns, enqueue_send=Recorder()
            )
        return WebhookDelivery.objects.get(pk=receipt.delivery_id)


@pytest.fixture
def webhook(django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks) -> Webhook:
    return Webhook(django_capture_on_commit_callbacks)


def received_at(wamid: str) -> datetime:
    return Message.objects.get(wa_message_id=wamid).created_at


def test_a_batch_enqueues_its_customer_s_turn_once_and_a_batch_while_it_is_queued_none(
    instance: Instance, webhook: Webhook
) -> None:
    session = recipes.known_customer.make(instance=instance)

    first = webhook(batch("wamid.B1", "wamid.B2"))
    assert (first.messages_count, webhook.turns.calls) == (2, [session.pk])
    assert queue_state(session) == (None, None, received_at("wamid.B1"))

    second = webhook(batch("wamid.B3", "wamid.B4"))
    assert (second.messages_count, webhook.turns.calls) == (2, [session.pk])
    assert queue_state(session) == (None, None, received_at("wamid.B1"))

    # A worker started the turn: the next batch enqueues another.
    token = lease_claim(session_id=session.pk, now=timezone.now(), ttl=LEASE_TTL)
    assert token is not None
    webhook(batch("wamid.B5", "wamid.B6"))
    assert webhook.turns.calls == [session.pk, session.pk]
    assert queue_state(session)[2] == received_at("wamid.B5")


def test_a_batch_enqueues_again_once_the_queued_turn_is_older_than_the_ttl(
    instance: Instance, webhook: Webhook
) -> None:
    stale = timezone.now() - TURN_QUEUED_TTL - timedelta(seconds=1)
    session = recipes.known_customer.make(instance=instance, turn_queued_at=stale)

    webhook(batch("wamid.S1", "wamid.S2"))

    assert webhook.turns.calls == [session.pk]
    assert queue_state(session) == (None, None, received_at("wamid.S1"))


def test_a_batch_for_a_session_with_a_human_queues_no_turn(
    instance: Instance, webhook: Webhook
) -> None:
    session = recipes.known_customer.make(instance=instance, state=SessionState.HUMAN)

    delivery = webhook(batch("wamid.H1", "wamid.H2"))

    assert (delivery.messages_count, webhook.turns.calls) == (2, [])
    assert queue_state(session) == (None, None, None)


def test_a_batch_from_a_new_customer_opens_a_session_with_its_turn_queued(
    instance: Instance, webhook: Webhook
) -> None:
    webhook(batch("wamid.N1", "wamid.N2"))

    session = Session.objects.get()
    assert webhook.turns.calls == [session.pk]
    assert queue_state(session) == (None, None, received_at("wamid.N1"))
