"""The periodic sweeps' deadlines tried at, just before and just after their edge, with the ages
written out: an unsent message fails at exactly 24 h, an untried one is sent again from 60 s, a
tried one from 15 min of quiet, a stranded turn from 60 s, a deferred webhook delivery after 60 s.
The sweeps get the grace their periodic task passes them, so a change of that value fails here
too."""

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from model_bakery import baker

from conversations.lease import STALLED_PENDING_GRACE, stalled_sessions
from conversations.models import DeliveryStatus, Instance, Message, Session, WebhookDelivery
from conversations.sweeps import (
    RECEIVED_GRACE,
    received_deliveries_requeue,
    unsent_messages_requeue,
)
from tests import baker_recipes as recipes

pytestmark = pytest.mark.django_db

NOW = timezone.now()
S = timedelta(seconds=1)
H24 = timedelta(hours=24)
M15 = timedelta(minutes=15)


def unsent(session: Session, *, age: timedelta, **fields: Any) -> Message:
    message: Message = recipes.reply.make(session=session, created_at=NOW - age, **fields)
    return message


def swept(session: Session) -> tuple[list[int], dict[int, str]]:
    """The ids the sweep enqueued, and each message's delivery status after it."""
    sweep = unsent_messages_requeue(now=NOW, enqueue=lambda pk: None)
    return sweep.requeued, dict(
        session.messages.order_by("id").values_list("id", "delivery_status")
    )


# --- Unsent answers: the 24-hour window ----------------------------------------------------------


@pytest.mark.parametrize(
    ("age", "requeued", "status"),
    [
        pytest.param(H24 - S, True, DeliveryStatus.PENDING, id="24 h - 1 s: sent again"),
        pytest.param(H24, False, DeliveryStatus.FAILED, id="exactly 24 h: failed"),
        pytest.param(H24 + S, False, DeliveryStatus.FAILED, id="24 h + 1 s: failed"),
    ],
)
def test_an_unsent_message_fails_when_exactly_24_hours_old(
    session: Session, age: timedelta, requeued: bool, status: str
) -> None:
    message = unsent(session, age=age)

    ids, statuses = swept(session)

    assert (ids, statuses) == ([message.pk] if requeued else [], {message.pk: status})


# --- Unsent answers: never tried, tried and quiet -------------------------------------------------


@pytest.mark.parametrize(
    ("age", "requeued"),
    [
        pytest.param(timedelta(seconds=59), False, id="59 s: its own task is about to run"),
        pytest.param(timedelta(seconds=60), True, id="exactly 60 s"),
        pytest.param(timedelta(seconds=61), True, id="61 s"),
    ],
)
def test_an_untried_message_is_sent_again_from_60_seconds_old(
    session: Session, age: timedelta, requeued: bool
) -> None:
    message = unsent(session, age=age)

    assert swept(session)[0] == ([message.pk] if requeued else [])


@pytest.mark.parametrize(
    ("age", "requeued"),
    [
        pytest.param(M15 - S, False, id="15 min - 1 s"),
        pytest.param(M15, True, id="exactly 15 min"),
        pytest.param(M15 + S, True, id="15 min + 1 s"),
    ],
)
def test_a_tried_message_never_stamped_is_sent_again_from_15_minutes_old(
    session: Session, age: timedelta, requeued: bool
) -> None:
    message = unsent(session, age=age, send_attempts=2, delivery_status_at=None)

    assert swept(session)[0] == ([message.pk] if requeued else [])


@pytest.mark.parametrize(
    ("quiet", "requeued"),
    [
        pytest.param(M15 - S, False, id="tried 15 min - 1 s ago: its retries may still run"),
        pytest.param(M15, True, id="tried exactly 15 min ago"),
        pytest.param(M15 + S, True, id="tried 15 min + 1 s ago"),
    ],
)
def test_a_tried_message_is_sent_again_after_15_minutes_without_an_attempt(
    session: Session, quiet: timedelta, requeued: bool
) -> None:
    message = unsent(
        session,
        age=timedelta(hours=3),
        send_attempts=7,
        delivery_status_at=None,
        last_send_attempt_at=NOW - quiet,
    )

    assert swept(session)[0] == ([message.pk] if requeued else [])


# --- A turn nobody runs ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("age", "stalled"),
    [
        pytest.param(timedelta(seconds=59), False, id="59 s"),
        pytest.param(timedelta(seconds=60), True, id="exactly 60 s"),
        pytest.param(timedelta(seconds=61), True, id="61 s"),
    ],
)
def test_a_pending_message_strands_its_turn_from_60_seconds_old(
    instance: Instance, age: timedelta, stalled: bool
) -> None:
    session = recipes.session.make(instance=instance, state="TRIAGE")
    recipes.inbound.make(session=session, created_at=NOW - age, wa_timestamp=NOW - age)

    found = stalled_sessions(now=NOW, grace=STALLED_PENDING_GRACE)

    assert found == ([session.pk] if stalled else [])


# --- A webhook delivery deferred to a task that never ran -----------------------------------------


@pytest.mark.parametrize(
    ("age", "requeued"),
    [
        pytest.param(timedelta(seconds=59), False, id="59 s"),
        pytest.param(timedelta(seconds=60), False, id="exactly 60 s"),
        pytest.param(timedelta(seconds=61), True, id="61 s"),
    ],
)
def test_a_received_delivery_is_enqueued_again_after_60_seconds(
    age: timedelta, requeued: bool
) -> None:
    delivery = baker.make(
        WebhookDelivery, raw_body=b"{}", outcome="received", received_at=NOW - age
    )
    enqueued: list[int] = []

    assert received_deliveries_requeue(now=NOW, grace=RECEIVED_GRACE, enqueue=enqueued.append) == (
        [delivery.pk] if requeued else []
    )
    assert enqueued == ([delivery.pk] if requeued else [])
