"""Find, open and close a customer's session: the channel's session rule.

Sessions (the rule this module owns):

- events are routed by ``metadata.phone_number_id`` to an active `Instance`; an unknown or
  inactive one is logged and ignored;
- the customer's open session (state other than CLOSED) is looked up by business-scoped user id
  first, then by phone; the database allows at most one open session per user id and one per
  phone on an instance, so two deliveries that open the same customer's session at once end with
  the one that committed first (the other's insert conflicts and it reads the winner);
- an open session whose last message (``last_message_at``, else ``created_at``) is more than
  ``SESSION_IDLE_HOURS`` older than the event's WhatsApp timestamp is closed, with a SYSTEM event,
  and a new session is opened — whatever its state, HUMAN included: after that silence the
  customer starts a new conversation. A CLOSED session is never reopened;
- a missing phone, user id or profile name is filled in from later events when no other open
  session holds it.
"""

import functools
import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, connections, transaction
from django.db.models import Q

from agents.states import SessionState
from conversations.inbound.hot_path import hot_cursor
from conversations.models import Instance, Session
from conversations.whatsapp.payload import Customer

# The package's name, as before the split into modules: log lines keep the logger name.
logger = logging.getLogger("conversations.inbound")

_NAME_CHARS = 200
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


# In the model's field order: `Model.from_db` maps a partial row by that order.
_TOUCH_RETURNS = tuple(
    f.attname
    for f in Session._meta.concrete_fields
    if f.attname
    in {"id", "instance_id", "state", "customer_phone", "customer_user_id", "customer_name"}
)


def _touch_open_session(
    phone_number_id: str,
    customer: Customer,
    *,
    idle_at: datetime,
    moved_to: datetime,
    inbound: bool,
) -> Session | None:
    """Find the customer's open session on that number, not idle at `idle_at`, and move its
    times forward to `moved_to`, in one ``UPDATE ... RETURNING`` per identifier (user id first,
    then phone).

    The webhook's hot path: the ORM needs a SELECT, then an UPDATE, and spends more CPU building
    them than the database spends running them. None when there is no such session (new
    customer, idle session, unknown number): the caller then takes the ORM path.
    """
    connection = connections[Session.objects.db]
    moment = connection.ops.adapt_datetimefield_value(moved_to)
    idle_since = connection.ops.adapt_datetimefield_value(
        idle_at - timedelta(hours=settings.SESSION_IDLE_HOURS)
    )
    for field_name, value in (
        ("customer_user_id", customer.user_id),
        ("customer_phone", customer.phone),
    ):
        if not value:
            continue
        sql = _touch_statement(connection.alias, field_name, inbound)
        params = [moment, moment] * (2 if inbound else 1) + [
            phone_number_id,
            True,
            value,
            SessionState.CLOSED.value,
            idle_since,
        ]
        with hot_cursor(connection) as cursor:
            cursor.execute(sql, params)
            row = cursor.fetchone()
        if row is not None:
            return Session.from_db(connection.alias, list(_TOUCH_RETURNS), row)
    return None


@functools.cache
def _touch_statement(alias: str, field_name: str, inbound: bool) -> str:
    """`_touch_open_session`'s statement for one identifier column, built once per database."""
    quote = connections[alias].ops.quote_name

    def column(name: str) -> str:
        return quote(Session._meta.get_field(name).column)

    def instance_column(name: str) -> str:
        return quote(Instance._meta.get_field(name).column)

    moved = [column("last_message_at")] + ([column("last_inbound_at")] if inbound else [])
    assignments = ", ".join(
        f"{name} = CASE WHEN {name} IS NULL OR {name} < %s THEN %s ELSE {name} END"
        for name in moved
    )
    return (
        f"UPDATE {quote(Session._meta.db_table)} SET {assignments} "
        f"WHERE {column('id')} = ("
        f"SELECT s.{column('id')} FROM {quote(Session._meta.db_table)} s "
        f"JOIN {quote(Instance._meta.db_table)} i "
        f"ON i.{instance_column('id')} = s.{column('instance')} "
        f"WHERE i.{instance_column('phone_number_id')} = %s "
        f"AND i.{instance_column('is_active')} = %s "
        f"AND s.{column(field_name)} = %s AND s.{column('state')} <> %s "
        f"AND COALESCE(s.{column('last_message_at')}, s.{column('created_at')}) >= %s "
        "LIMIT 1) "
        f"RETURNING {', '.join(column(name) for name in _TOUCH_RETURNS)}"
    )


def _find_open_session(phone_number_id: str, customer: Customer) -> Session | None:
    match = Q()
    if customer.user_id:
        match |= Q(customer_user_id=customer.user_id)
    if customer.phone:
        match |= Q(customer_phone=customer.phone)
    candidates = list(
        Session.objects.filter(
            match, instance__phone_number_id=phone_number_id, instance__is_active=True
        )
        .exclude(state=SessionState.CLOSED)
        .only(*_SESSION_FIELDS)
        .order_by()  # at most two rows; the model's default ordering would only cost a sort
    )
    # The user id names the customer more precisely than a phone that may have changed hands.
    for session in candidates:
        if customer.user_id and session.customer_user_id == customer.user_id:
            return session
    return candidates[0] if candidates else None


def _open_session(
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
                customer_name=customer.name[:_NAME_CHARS],
                created_at=now,
                last_message_at=at,
                last_inbound_at=at if inbound else None,
            )
            return session, True
    except IntegrityError:
        # Another delivery opened this customer's session first (one open session per phone and
        # per user id); ours waited for its commit, so it is visible now.
        session = _find_open_session(phone_number_id, customer)
        if session is None:
            raise
        _fill_identity(session, customer)
        return session, False


def _fill_identity(session: Session, customer: Customer) -> None:
    changes = {}
    if customer.phone and not session.customer_phone:
        changes["customer_phone"] = customer.phone
    if customer.user_id and not session.customer_user_id:
        changes["customer_user_id"] = customer.user_id
    if customer.name and not session.customer_name:
        changes["customer_name"] = customer.name[:_NAME_CHARS]
    _update_identity(session, changes)


def _update_identity(session: Session, changes: dict[str, str]) -> None:
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


def _is_idle(session: Session, at: datetime) -> bool:
    last = session.last_message_at or session.created_at
    return at - last > timedelta(hours=settings.SESSION_IDLE_HOURS)
