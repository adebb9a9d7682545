"""The session rules on the general path: found by user id then phone, identity filled in, idle
sessions closed, times forward only, unknown numbers ignored."""

from datetime import timedelta

import pytest
from pytest_django import Settings

from agents.states import SessionState
from conversations.labels import event_text
from conversations.models import (
    Direction,
    Instance,
    Message,
    Session,
)
from tests import baker_recipes as recipes
from tests.helpers.inbound import Receiver, T, make_session
from tests.helpers.meta_payloads import (
    CUSTOMER_PHONE,
    CUSTOMER_USER_ID,
)

pytestmark = pytest.mark.django_db


# --- sessions --------------------------------------------------------------------------------


def test_the_session_is_found_by_user_id_first_then_by_phone(
    instance: Instance, receive: Receiver
) -> None:
    by_phone = make_session(instance, customer_user_id="")
    by_user_id = make_session(instance, customer_phone="")

    receive("text")

    assert [m.session_id for m in Message.objects.all()] == [by_user_id.pk]
    by_user_id.refresh_from_db()
    # The phone belongs to the other open session: it is not copied (one open session per phone).
    assert (by_user_id.customer_phone, by_user_id.customer_user_id) == ("", CUSTOMER_USER_ID)
    by_phone.refresh_from_db()
    assert (by_phone.customer_user_id, by_phone.messages.count()) == ("", 0)
    assert Session.objects.count() == 2


def test_a_session_known_by_phone_learns_the_user_id_and_name(
    instance: Instance, receive: Receiver
) -> None:
    session = make_session(instance, customer_user_id="", customer_name="")

    receive("text")

    session.refresh_from_db()
    assert (session.customer_user_id, session.customer_name) == (CUSTOMER_USER_ID, "Maria Silva")
    assert Session.objects.count() == 1


def test_a_session_idle_longer_than_session_idle_hours_is_closed_and_a_new_one_opened(
    instance: Instance, receive: Receiver, settings: Settings
) -> None:
    settings.SESSION_IDLE_HOURS = 24
    old = make_session(
        instance, state=SessionState.QUALIFYING, last_message_at=T - timedelta(hours=25)
    )

    receive("text")

    old.refresh_from_db()
    new = Session.objects.exclude(pk=old.pk).get()
    assert (old.state, old.closed_at is not None) == (SessionState.CLOSED, True)
    [event] = old.messages.all()
    assert (event.direction, event.message_type, event.action, event.json_part) == (
        Direction.SYSTEM,
        "session_closed",
        "idle",
        {"idle_hours": 24},
    )
    assert event_text(event) == (
        "Conversa encerrada por inatividade: o cliente voltou depois de 24 h."
    )
    assert (new.state, new.customer_phone) == (SessionState.TRIAGE, CUSTOMER_PHONE)
    assert receive.turns.calls == [new.pk]


def test_a_session_quiet_for_less_than_the_idle_limit_continues(
    instance: Instance, receive: Receiver
) -> None:
    session = make_session(instance, last_message_at=T - timedelta(hours=23))

    receive("text")

    assert Session.objects.count() == 1
    assert receive.turns.calls == [session.pk]


def test_a_closed_session_is_never_reopened(instance: Instance, receive: Receiver) -> None:
    closed_at = T - timedelta(minutes=1)
    closed = make_session(instance, state=SessionState.CLOSED, closed_at=closed_at)

    receive("text")

    closed.refresh_from_db()
    assert (closed.state, closed.closed_at, closed.messages.count()) == ("CLOSED", closed_at, 0)
    assert Session.objects.exclude(pk=closed.pk).get().messages.count() == 1


def test_an_older_message_does_not_move_the_session_s_times_backwards(
    instance: Instance, receive: Receiver
) -> None:
    later = T + timedelta(hours=1)
    session = make_session(instance, last_message_at=later, last_inbound_at=later)

    receive("text")

    session.refresh_from_db()
    assert (session.last_message_at, session.last_inbound_at) == (later, later)


@pytest.mark.parametrize("active", [False, None])
def test_a_delivery_for_an_unknown_or_inactive_number_is_ignored(
    receive: Receiver, db: None, active: bool | None
) -> None:
    if active is False:
        recipes.instance.make(phone_number_id="100000000000001", is_active=False)

    delivery = receive("text")

    assert (delivery.outcome, delivery.messages_count) == ("ignored", 0)
    assert (Session.objects.count(), Message.objects.count()) == (0, 0)
    assert receive.turns.calls == []
