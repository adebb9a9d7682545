"""The general path's hand-written session statements give what the ORM's statements gave:
the customer's open sessions (`open_session_find`), a number's active instance
(`DeliverySessions.instance_id`) and a new session's row (`session_open`). `turn_queue`'s
UPDATE is held to its rules by tests/conversations/inbound/test_turn_queue.py."""

from datetime import UTC, datetime
from typing import Any

import pytest
from django.db.models import Q
from model_bakery import baker

from agents.states import SessionState
from conversations.inbound.session_rules import customer_identifiers, open_sessions
from conversations.inbound.sessions import (
    _SESSION_FIELDS,
    DeliverySessions,
    open_session_find,
    session_open,
)
from conversations.models import Instance, Session
from tests import baker_recipes as recipes
from whatsapp.payload import Customer

pytestmark = pytest.mark.django_db

PNID, INACTIVE_PNID = "100000000000001", "100000000000003"
PHONE, USER_ID = "5511999990001", "BR.1234567890"
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def orm_open_session_find(
    phone_number_id: str, customer: Customer, *, simulated: bool = False
) -> Session | None:
    """The ORM's query, as `open_session_find` ran it before it was hand-written."""
    match = Q()
    for identifier, value in customer_identifiers(customer):
        match |= Q(**{identifier: value})
    candidates = list(
        open_sessions(phone_number_id, simulated=simulated)
        .filter(match)
        .only(*_SESSION_FIELDS)
        .order_by()
    )
    for session in candidates:
        if customer.user_id and session.customer_user_id == customer.user_id:
            return session
    return candidates[0] if candidates else None


def loaded(session: Session | None) -> dict[str, Any] | None:
    if session is None:
        return None
    return {name: getattr(session, name) for name in ("id", *_SESSION_FIELDS)}


@pytest.fixture
def ours() -> Instance:
    return baker.make(Instance, phone_number_id=PNID, name="Laboratório", is_active=True)


@pytest.mark.parametrize(
    ("customer", "expected"),
    [
        (Customer(phone=PHONE, user_id=""), "by phone"),
        (Customer(phone="", user_id=USER_ID), "by user id"),
        (Customer(phone=PHONE, user_id=USER_ID), "by user id"),  # the user id wins
        (Customer(phone="5511000000000", user_id="BR.0"), None),
    ],
    ids=["phone", "user id", "both", "nobody we know"],
)
def test_open_session_find_loads_what_the_orm_query_loaded(
    ours: Instance, customer: Customer, expected: str | None
) -> None:
    by_phone = recipes.session.make(instance=ours, customer_phone=PHONE, customer_user_id="")
    by_user_id = recipes.session.make(instance=ours, customer_phone="", customer_user_id=USER_ID)
    # Never found: closed, simulated, on another number, on an inactive instance.
    recipes.session.make(
        instance=ours, customer_phone=PHONE, customer_user_id=USER_ID, state=SessionState.CLOSED
    )
    recipes.session.make(
        instance=ours, customer_phone=PHONE, customer_user_id=USER_ID, is_simulated=True
    )
    other = baker.make(Instance, phone_number_id="100000000000002", is_active=True)
    recipes.session.make(instance=other, customer_phone=PHONE, customer_user_id=USER_ID)
    inactive = baker.make(Instance, phone_number_id=INACTIVE_PNID, is_active=False)
    recipes.session.make(instance=inactive, customer_phone=PHONE, customer_user_id=USER_ID)

    found = open_session_find(PNID, customer, simulated=False)

    assert loaded(found) == loaded(orm_open_session_find(PNID, customer))
    assert open_session_find(INACTIVE_PNID, customer, simulated=False) is None
    assert orm_open_session_find(INACTIVE_PNID, customer) is None
    sessions = {"by phone": by_phone.pk, "by user id": by_user_id.pk, None: None}
    assert (found.pk if found else None) == sessions[expected]
    # The other fields are deferred, as `.only()` left them.
    if found is not None:
        assert found.get_deferred_fields() >= {"technical_data", "lease_token"}


def test_a_simulated_lookup_finds_the_simulated_session_and_a_real_one_the_real_one(
    ours: Instance,
) -> None:
    """A real and a simulated session open on the same phone (the database allows it): each
    lookup finds its own, by the hand-written statement as by the ORM's query."""
    customer = Customer(phone=PHONE, user_id="")
    real = recipes.session.make(instance=ours, customer_phone=PHONE, customer_user_id="")
    simulated = recipes.session.make(
        instance=ours, customer_phone=PHONE, customer_user_id="", is_simulated=True
    )

    found = {flag: open_session_find(PNID, customer, simulated=flag) for flag in (False, True)}
    orm = {flag: orm_open_session_find(PNID, customer, simulated=flag) for flag in (False, True)}

    assert {flag: s.pk if s else None for flag, s in found.items()} == {
        False: real.pk,
        True: simulated.pk,
    }
    assert {flag: loaded(s) for flag, s in found.items()} == {
        flag: loaded(s) for flag, s in orm.items()
    }


def test_a_simulated_delivery_opens_a_simulated_session_beside_the_real_one(
    ours: Instance,
) -> None:
    real = recipes.session.make(instance=ours, customer_phone=PHONE, customer_user_id="")

    opened, is_new = session_open(
        ours.pk, PNID, Customer(phone=PHONE, user_id=""), NOW, NOW, inbound=True, simulated=True
    )

    assert (is_new, opened.pk != real.pk) == (True, True)
    assert list(
        Session.objects.order_by("id").values_list("customer_phone", "is_simulated", "state")
    ) == [(PHONE, False, "TRIAGE"), (PHONE, True, "TRIAGE")]


@pytest.mark.parametrize(
    ("number", "active", "expected"),
    [(PNID, True, "ours"), (PNID, False, None), ("100000000000099", True, None)],
    ids=["active", "inactive", "unknown"],
)
def test_the_active_instance_of_a_number_is_the_one_the_orm_found(
    number: str, active: bool, expected: str | None
) -> None:
    instance = baker.make(Instance, phone_number_id=PNID, name="Laboratório", is_active=active)

    found = DeliverySessions().instance_id(number)

    orm = (
        Instance.objects.filter(phone_number_id=number, is_active=True)
        .values_list("id", flat=True)
        .first()
    )
    assert found == orm == (instance.pk if expected else None)


def test_a_new_session_s_row_is_the_one_the_orm_would_have_written(ours: Instance) -> None:
    at = datetime(2026, 11, 30, 11, 59, 58, tzinfo=UTC)

    opened, is_new = session_open(
        ours.pk,
        PNID,
        Customer(phone=PHONE, user_id=USER_ID, name="Ana"),
        NOW,
        at,
        inbound=True,
        simulated=False,
    )
    orm = Session.objects.create(
        instance_id=ours.pk,
        customer_phone="5511999990002",
        customer_user_id="BR.2",
        customer_name="Ana",
        created_at=NOW,
        last_message_at=at,
        last_inbound_at=at,
    )

    assert is_new is True
    assert opened._state.adding is False
    stored = Session.objects.get(pk=opened.pk)
    differ = {"id", "customer_phone", "customer_user_id", "updated_at"}
    fields = [f.attname for f in Session._meta.concrete_fields if f.attname not in differ]
    assert {name: getattr(stored, name) for name in fields} == {
        name: getattr(orm, name) for name in fields
    }
    assert (stored.customer_phone, stored.customer_user_id, stored.created_at) == (
        PHONE,
        USER_ID,
        NOW,
    )
    assert {name: getattr(opened, name) for name in fields} == {
        name: getattr(stored, name) for name in fields
    }


def test_identifiers_that_look_like_sql_are_values_not_statements(ours: Instance) -> None:
    """Every value is a bound parameter: a user id and a name written as SQL open and find the
    session as plain text, and match nobody else's."""
    other = recipes.session.make(instance=ours, customer_phone=PHONE, customer_user_id=USER_ID)
    crafted = Customer(phone="", user_id="BR.1' OR '1'='1", name="Ana'); DROP TABLE x;--")

    assert open_session_find(PNID, crafted, simulated=False) is None
    opened, is_new = session_open(ours.pk, PNID, crafted, NOW, NOW, inbound=True, simulated=False)

    found = open_session_find(PNID, crafted, simulated=False)
    assert (is_new, found.pk if found else None) == (True, opened.pk)
    stored = Session.objects.get(pk=opened.pk)
    assert (stored.customer_user_id, stored.customer_name) == (
        "BR.1' OR '1'='1",
        "Ana'); DROP TABLE x;--",
    )
    assert Session.objects.filter(pk=other.pk).exists()
