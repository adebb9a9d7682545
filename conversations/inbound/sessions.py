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
from dataclasses import dataclass, field
from datetime import UTC, datetime

from django.db import IntegrityError, connections, transaction

from compat.django_private import mark_saved
from conversations.inbound.hot_path import fetch_models, hot_cursor, insert_row
from conversations.inbound.session_rules import (
    CLOSED_SQL,
    IDENTIFIERS,
    NAME_CHARS,
    TOUCH_OPEN_SESSION_SQL,
    TOUCH_RETURNS,
    customer_identifiers,
    forward_only,
    identity_fill,
    idle_cutoff,
)
from conversations.models import Instance, Session
from whatsapp.payload import Customer

# The package's name, not the module's: every inbound module logs under one logger name.
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
    simulated: bool,
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
        "simulated": simulated,
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


# The customer's open sessions on the active instance of a number (`session_rules.open_sessions`
# filtered by one or both identifiers): the ORM's query, hand-written because compiling it cost a
# new customer's first message more CPU than running it (tests/conversations/inbound/
# test_sessions_sql.py checks it against the ORM's).
_OPEN_SESSION_COLUMNS = ", ".join(f"s.{name}" for name in ("id", *_SESSION_FIELDS))
_OPEN_SESSIONS_SQL = f"""SELECT {_OPEN_SESSION_COLUMNS} FROM conversations_session s
    JOIN conversations_instance i ON i.id = s.instance_id
    WHERE i.phone_number_id = %s AND i.is_active AND s.state <> {CLOSED_SQL}
      AND s.is_simulated = %s AND ({{match}})"""
# One statement per combination of identifiers a customer may have, in lookup order.
_OPEN_SESSIONS_BY: dict[tuple[str, ...], str] = {
    identifiers: _OPEN_SESSIONS_SQL.format(
        match=" OR ".join(f"s.{identifier} = %s" for identifier in identifiers)
    )
    for identifiers in (*((identifier,) for identifier in IDENTIFIERS), tuple(IDENTIFIERS))
}


def open_session_find(
    phone_number_id: str, customer: Customer, *, simulated: bool
) -> Session | None:
    """The customer's open session on that number, idle or not (`session_rules.open_sessions`),
    real or simulated, preferring the one its user id names."""
    identified = customer_identifiers(customer)
    if not identified:
        return None
    statement = _OPEN_SESSIONS_BY[tuple(identifier for identifier, _ in identified)]
    # At most two rows (one open session per user id, one per phone).
    candidates = fetch_models(
        Session,
        statement,
        [phone_number_id, simulated, *(value for _, value in identified)],
        ("id", *_SESSION_FIELDS),
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
    simulated: bool,
) -> tuple[Session, bool]:
    """A new session with its times at `at`, and True; or, when another delivery opened the
    customer's session first, that one and False."""
    try:
        with transaction.atomic():
            # `Session.objects.create`'s INSERT, compiled once (`insert_row`: no model signals,
            # and Session has none).
            session = Session(
                instance_id=instance_id,
                customer_phone=customer.phone,
                customer_user_id=customer.user_id,
                customer_name=customer.name[:NAME_CHARS],
                created_at=now,
                last_message_at=at,
                last_inbound_at=at if inbound else None,
                is_simulated=simulated,
            )
            session.pk = insert_row(Session, row=session)
            mark_saved(session)
            return session, True
    except IntegrityError:
        # Another delivery opened this customer's session first (one open session per phone and
        # per user id); ours waited for its commit, so it is visible now.
        found = open_session_find(phone_number_id, customer, simulated=simulated)
        if found is None:
            raise
        session_identity_fill(found, customer)
        return found, False


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


# ``Instance.objects.filter(phone_number_id=..., is_active=True).values_list("id", flat=True)
# .first()``, hand-written (the ORM's compilation cost more than the query).
ACTIVE_INSTANCE_SQL = """SELECT id FROM conversations_instance
    WHERE phone_number_id = %s AND is_active ORDER BY name ASC LIMIT 1"""


# (phone_number_id, user id, phone): a customer as one delivery names them.
CustomerKey = tuple[str, str, str]
_NEVER = datetime.min.replace(tzinfo=UTC)


def customer_key(phone_number_id: str, customer: Customer) -> CustomerKey:
    return (phone_number_id, customer.user_id, customer.phone)


@dataclass(slots=True)
class DeliverySessions:
    """What one delivery knows of the instances and sessions it meets, so each is looked up once
    and each session's times are written once per delivery."""

    # phone_number_id -> id of its active Instance (None: unknown), resolved when first needed:
    # on the common path the session lookup joins the instance and no query is spent on it.
    instance_ids: dict[str, int | None] = field(default_factory=dict)
    by_customer: dict[CustomerKey, Session] = field(default_factory=dict)
    # The newest WhatsApp time of each customer's messages in the delivery: a session's times
    # are moved there when it is first met, so it is locked once, in customer order.
    latest: dict[CustomerKey, datetime] = field(default_factory=dict)
    # The session times the database has now (last_message_at, last_inbound_at) per session.
    times: dict[int, datetime] = field(default_factory=dict)
    inbound_times: dict[int, datetime] = field(default_factory=dict)
    # Whether any event was for one of our instances (the delivery is then ``processed``).
    routed: bool = False
    # A simulated delivery (`simulator.simulation`) finds and opens simulated sessions only;
    # a real one real sessions only.
    simulated: bool = False

    def note_latest(self, key: CustomerKey, at: datetime) -> None:
        self.latest[key] = max(at, self.latest.get(key, at))

    def instance_id(self, phone_number_id: str) -> int | None:
        """The active instance of a number; an unknown or inactive one is logged once."""
        if phone_number_id not in self.instance_ids:
            connection = connections[Instance.objects.db]
            with hot_cursor(connection) as cursor:
                cursor.execute(ACTIVE_INSTANCE_SQL, [phone_number_id])
                row = cursor.fetchone()
            found = row[0] if row else None
            self.instance_ids[phone_number_id] = found
            if found is None:
                logger.warning(
                    "whatsapp_unknown_phone_number_id", extra={"phone_number_id": phone_number_id}
                )
        instance_id = self.instance_ids[phone_number_id]
        self.routed = self.routed or instance_id is not None
        return instance_id

    def known(self, phone_number_id: str, session: Session) -> None:
        """A session was found on that number: its instance is active."""
        self.instance_ids[phone_number_id] = session.instance_id
        self.routed = True

    def forget(self, session: Session) -> None:
        """Drop the session from the cache (its identity changed, or it was closed)."""
        for key in [key for key, cached in self.by_customer.items() if cached.pk == session.pk]:
            del self.by_customer[key]

    def touch(self, session: Session, at: datetime, *, inbound: bool) -> None:
        """Move the session's times forward to `at` (`session_rules.forward_only`) unless the
        database has them there already."""
        changes = {}
        if at > self.times.get(session.pk, _NEVER):
            changes["last_message_at"] = forward_only("last_message_at", at)
        if inbound and at > self.inbound_times.get(session.pk, _NEVER):
            changes["last_inbound_at"] = forward_only("last_inbound_at", at)
        if changes:
            Session.objects.filter(pk=session.pk).update(**changes)
            self.stored(session, at, inbound=inbound)

    def stored(self, session: Session, at: datetime, *, inbound: bool) -> None:
        """The database has the session's times at `at` at least."""
        self.times[session.pk] = max(at, self.times.get(session.pk, at))
        if inbound:
            self.inbound_times[session.pk] = max(at, self.inbound_times.get(session.pk, at))
        # Later events of this delivery judge idleness against the newest time.
        session.last_message_at = self.times[session.pk]
