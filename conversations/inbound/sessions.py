"""Find, open and touch a customer's session on the general path (every database).

The rules these follow (open session, idle, identity fill-in, forward-only times) are defined in
`conversations.inbound.session_rules`; this module applies them with the ORM and the general
path's one hand-written statement (`open_session_touch`):

- events are routed by ``metadata.phone_number_id`` to an active `Instance`; an unknown or
  inactive one is logged and ignored;
- the database allows at most one open session per user id and one per phone on an instance,
  so two deliveries that open the same customer's session at once end with the one that
  committed first (the other's insert conflicts and it reads the winner: `session_open`);
- an idle session is closed, with a SYSTEM event, and a new session is opened — whatever its
  state, HUMAN included: after that silence the customer starts a new conversation
  (`conversations.inbound.events`). A CLOSED session is never reopened;
- an identity another open session holds is left unfilled (`session_identity_update`).
"""

import logging
from datetime import datetime

from django.db import IntegrityError, connections, transaction
from django.db.models import Q

from conversations.inbound.hot_path import hot_cursor
from conversations.inbound.session_rules import (
    NAME_CHARS,
    TOUCH_OPEN_SESSION_SQL,
    TOUCH_RETURNS,
    customer_identifiers,
    identity_fill,
    idle_cutoff,
    open_sessions,
)
from conversations.models import Session
from conversations.whatsapp.payload import Customer

# The package's name, as before the split into modules: log lines keep the logger name.
logger = logging.getLogger("conversations.inbound")

# What the channel reads of a session (the rest, JSON data included, is the pipeline's).
_SESSION_FIELDS = (
    "instance_id",
    "state",
    "customer_phone",
    "customer_user_id",
    "customer_name",
    "created_at",
    "last_message_at",
)


def open_session_touch(
    phone_number_id: str,
    customer: Customer,
    *,
    idle_at: datetime,
    moved_to: datetime,
    inbound: bool,
) -> Session | None:
    """Find the customer's open session on that number, not idle at `idle_at`, and move its
    times forward to `moved_to`, in one ``UPDATE ... RETURNING`` per identifier (user id first,
    then phone): `session_rules.TOUCH_OPEN_SESSION_SQL`.

    The webhook's hot path: the ORM needs a SELECT, then an UPDATE, and spends more CPU building
    them than the database spends running them. None when there is no such session (new
    customer, idle session, unknown number): the caller then takes the ORM path.
    """
    connection = connections[Session.objects.db]
    adapt = connection.ops.adapt_datetimefield_value
    params = {
        "at": adapt(moved_to),
        "inbound": inbound,
        "phone_number_id": phone_number_id,
        "idle_cutoff": adapt(idle_cutoff(idle_at)),
    }
    for identifier, value in customer_identifiers(customer):
        with hot_cursor(connection) as cursor:
            cursor.execute(TOUCH_OPEN_SESSION_SQL[identifier], params | {"identifier": value})
            row = cursor.fetchone()
        if row is not None:
            return Session.from_db(connection.alias, list(TOUCH_RETURNS), row)
    return None


def open_session_find(phone_number_id: str, customer: Customer) -> Session | None:
    """The customer's open session on that number, idle or not (`session_rules.open_sessions`),
    preferring the one its user id names."""
    match = Q()
    for identifier, value in customer_identifiers(customer):
        match |= Q(**{identifier: value})
    candidates = list(
        open_sessions(phone_number_id)
        .filter(match)
        .only(*_SESSION_FIELDS)
        .order_by()  # at most two rows; the model's default ordering would only cost a sort
    )
    # The user id names the customer more precisely than a phone that may have changed hands.
    for session in candidates:
        if customer.user_id and session.customer_user_id == customer.user_id:
            return session
    return candidates[0] if candidates else None


def session_open(
    instance_id: int,
    phone_number_id: str,
    customer: Customer,
    now: datetime,
    at: datetime,
    *,
    inbound: bool,
) -> tuple[Session, bool]:
    """A new session with its times at `at`, and True; or, when another delivery opened the
    customer's session first, that one and False."""
    try:
        with transaction.atomic():
            session = Session.objects.create(
                instance_id=instance_id,
                customer_phone=customer.phone,
                customer_user_id=customer.user_id,
                customer_name=customer.name[:NAME_CHARS],
                created_at=now,
                last_message_at=at,
                last_inbound_at=at if inbound else None,
            )
            return session, True
    except IntegrityError:
        # Another delivery opened this customer's session first (one open session per phone and
        # per user id); ours waited for its commit, so it is visible now.
        session = open_session_find(phone_number_id, customer)
        if session is None:
            raise
        session_identity_fill(session, customer)
        return session, False


def session_identity_fill(session: Session, customer: Customer) -> None:
    """Fill in what the session lacks of the customer's identity (`session_rules.identity_fill`)."""
    session_identity_update(session, identity_fill(session, customer))


def session_identity_update(session: Session, changes: dict[str, str]) -> None:
    """Write `changes` to the session's identity, unless another open session holds one of them:
    then the conflict is logged and the session left as it was."""
    if not changes:
        return
    try:
        with transaction.atomic():
            Session.objects.filter(pk=session.pk).update(**changes)
    except IntegrityError:
        # Another open session holds that phone or user id; leave both as they are.
        logger.warning(
            "whatsapp_identity_conflict",
            extra={"session_id": session.pk, "fields": sorted(changes)},
        )
        return
    for name, value in changes.items():
        setattr(session, name, value)
