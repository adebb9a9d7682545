"""The webhook's session rules, each written once, and the delivery's sessions.

The rules:

- **open session**: a customer's open session (state other than CLOSED) on the active instance
  of the number, looked up by business-scoped user id first, then by phone (`IDENTIFIERS`; the
  phone by its key, `Session.customer_phone_key`, so a Brazilian mobile with or without its
  ninth digit is one customer, and the session's phone becomes the wa_id of the customer's
  newest message: sends go to the form WhatsApp gave last) — a
  real delivery's among the real sessions only, a simulated one's (`simulator.simulation`)
  among the simulated ones (`Session.is_simulated`), so the two never share a session. The
  database allows at most one open session per user id and one per phone on an instance, so two
  deliveries that open the same customer's session at once end with the one that committed
  first (the other's insert conflicts and it reads the winner: `session_open`). A CLOSED
  session is never reopened;
- **idle**: an open session whose last message (``last_message_at``, else ``created_at``) is
  more than ``SESSION_IDLE_HOURS`` older than the event's WhatsApp timestamp is idle: it is
  closed, with a SYSTEM event, and another opened, whatever its state (HUMAN included: after that
  silence the customer starts a new conversation);
- **identity fill-in**: a missing phone, user id or profile name is filled in from later events
  (unless another open session holds it: the database refuses, and the session keeps its gap);
- **forward-only times**: ``last_message_at`` and ``last_inbound_at`` only move forward;
- **pending text**: an INBOUND message waits for a turn (``processed_at`` NULL) only when it is
  text and a bot holds the session; anything else is stored processed at reception;
- **queued turn**: a delivery queues the session's turn (``turn_queued_at``, then the task)
  unless a turn queued less than ``TURN_QUEUED_TTL_SECONDS`` ago has not started yet.

Events are routed by ``metadata.phone_number_id`` to an active `Instance`; an unknown or inactive
one is logged and ignored. `session_for` applies the rules to one customer of a delivery, and
`DeliverySessions` remembers what the delivery met, so each session is looked up once and its
times written once per delivery.

Open session is one literal query, `OPEN_SESSION_SQL`; open session, idle and forward-only times
are one hand-written statement built on it, `SESSION_TOUCH_SQL`, which every message, echo and
reply of a customer goes through; the others are the ORM's.
"""

import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from django.conf import settings
from django.db import IntegrityError, connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import DateTimeField, Value

from agents.phones import customer_phone_key
from agents.states import BOT_STATES, SessionState
from conversations.event_codes import CLOSED_IDLE, EventCode
from conversations.media_reading import bot_reads
from conversations.models import Direction, Instance, Message, Session, phone_changes
from whatsapp.payload import Customer, InboundKind

# The package's name, not the module's: every inbound module logs under one logger name.
logger = logging.getLogger("conversations.inbound")

# --- open session ------------------------------------------------------------------------------

# Tried in this order: the user id names the customer more precisely than a phone that may have
# changed hands. Both are fields of Session.
IDENTIFIERS = ("customer_user_id", "customer_phone")


def customer_identifiers(customer: Customer) -> list[tuple[str, str]]:
    """(field, value) of each identifier the customer has, in lookup order."""
    values = {"customer_user_id": customer.user_id, "customer_phone": customer.phone}
    return [(name, values[name]) for name in IDENTIFIERS if values[name]]


# The open session rule, spelled once: the customer's open session on the active instance of the
# number, by user id first, else phone, real or simulated. SESSION_TOUCH_SQL finds the session it
# touches with it, and `open_session_find` (an identity change, the simulator) reads it.
OPEN_SESSION_SQL = """SELECT o.id FROM conversations_session o
    JOIN conversations_instance i ON i.id = o.instance_id
    WHERE i.phone_number_id = %(phone_number_id)s AND i.is_active
      AND o.state <> 'CLOSED' AND o.is_simulated = %(simulated)s
      AND ((%(user_id)s <> '' AND o.customer_user_id = %(user_id)s)
        OR (%(phone)s <> '' AND o.customer_phone_key = %(phone_key)s))
    ORDER BY o.customer_user_id = %(user_id)s DESC, o.customer_phone = %(phone)s DESC
    LIMIT 1"""


def _open_session_params(
    phone_number_id: str, customer: Customer, *, simulated: bool
) -> dict[str, str | bool]:
    return {
        "phone_number_id": phone_number_id,
        "simulated": simulated,
        "user_id": customer.user_id,
        "phone": customer.phone,
        "phone_key": customer_phone_key(customer.phone),
    }


def open_session_find(
    phone_number_id: str, customer: Customer, *, simulated: bool
) -> Session | None:
    """The customer's open session on that number (`OPEN_SESSION_SQL`), idle or not, real or
    simulated: the lookup of a ``system`` message (an identity change), which neither moves the
    session's times nor closes it, and of the simulator."""
    if not (customer.user_id or customer.phone):
        return None
    connection = connections[Session.objects.db]
    with connection.cursor() as cursor:
        cursor.execute(
            OPEN_SESSION_SQL, _open_session_params(phone_number_id, customer, simulated=simulated)
        )
        row = cursor.fetchone()
    return None if row is None else Session.objects.filter(pk=row[0]).first()


# Open session, idle and forward-only times in one statement (PostgreSQL and SQLite alike): the
# customer's open session on the active instance of the number (by user id, else phone) — idle
# when its last activity is older than %(idle_cutoff)s: then closed — else its times moved
# forward to %(at)s (``last_inbound_at`` only when %(inbound)s). Every SET reads the row as it
# was, so each CASE judges idleness on the same values. No row: a new customer or an unknown
# number. A returned state CLOSED is the idle session it just closed.
#
# Hand-written because the ORM's spelling (a SELECT, then an UPDATE of Case expressions) left
# the webhook at 0.33x the durable floor (bench/webhook.py, 2026-12-02): compiling the two
# queries cost 2.2 ms of CPU per delivery (4.2 against 2.0 ms for the webhook's use case, the
# least of five runs of 1,000 known customers' texts), more than PostgreSQL spent running them,
# and the SELECT is a round trip of its own. The outer ``state <> 'CLOSED'`` is re-checked by
# PostgreSQL on a row another transaction updated meanwhile, so a session closed under us is not
# touched. (SQLite 3.40 returns the columns of an ``UPDATE ... FROM`` out of order: hence the
# idle test repeated in each CASE rather than computed once in a FROM.) The customer's other
# phone form (the ninth digit) becomes the session's phone when an inbound message newer than
# the last brings it (not the phone of an idle session it closes); the EXISTS, reached only
# then (CASE tries its WHENs in order), leaves the phone as it is when another open session
# holds that form (one open session per phone).
SESSION_TOUCH_SQL = (
    """UPDATE conversations_session SET
    state = CASE WHEN COALESCE(last_message_at, created_at) < %(idle_cutoff)s
        THEN 'CLOSED' ELSE state END,
    closed_at = CASE WHEN COALESCE(last_message_at, created_at) < %(idle_cutoff)s
        THEN %(now)s ELSE closed_at END,
    last_message_at = CASE WHEN COALESCE(last_message_at, created_at) < %(idle_cutoff)s
        OR last_message_at >= %(at)s THEN last_message_at ELSE %(at)s END,
    last_inbound_at = CASE WHEN COALESCE(last_message_at, created_at) < %(idle_cutoff)s
        OR NOT %(inbound)s OR last_inbound_at >= %(at)s THEN last_inbound_at ELSE %(at)s END,
    customer_phone = CASE WHEN COALESCE(last_message_at, created_at) < %(idle_cutoff)s
        OR NOT %(inbound)s OR customer_phone = %(phone)s OR customer_phone_key <> %(phone_key)s
        OR last_inbound_at > %(at)s THEN customer_phone
        WHEN EXISTS (SELECT 1 FROM conversations_session d
            WHERE d.instance_id = conversations_session.instance_id
              AND d.customer_phone = %(phone)s AND d.state <> 'CLOSED'
              AND d.is_simulated = conversations_session.is_simulated) THEN customer_phone
        ELSE %(phone)s END
WHERE state <> 'CLOSED' AND id = (
"""
    + OPEN_SESSION_SQL
    + """
)
RETURNING id, instance_id, customer_phone, customer_user_id, customer_name, state, turn_queued_at"""
)
# In the model's field order: `Model.from_db` maps a partial row by that order.
_TOUCH_RETURNS = [
    "id",
    "instance_id",
    "state",
    "customer_phone",
    "customer_user_id",
    "customer_name",
    "turn_queued_at",
]


def session_touch(
    phone_number_id: str,
    customer: Customer,
    *,
    at: datetime,
    idle_at: datetime,
    inbound: bool,
    simulated: bool,
    now: datetime,
) -> Session | None:
    """`SESSION_TOUCH_SQL`: the customer's open session, idle at `idle_at` (then closed: its
    state is CLOSED) or with its times moved forward to `at`; None when there is none."""
    if not (customer.user_id or customer.phone):
        return None
    connection = connections[Session.objects.db]
    adapt = connection.ops.adapt_datetimefield_value
    params = {
        "now": adapt(now),
        "at": adapt(at),
        "inbound": inbound,
        "idle_cutoff": adapt(idle_cutoff(idle_at)),
        **_open_session_params(phone_number_id, customer, simulated=simulated),
    }
    with connection.cursor() as cursor:
        cursor.execute(SESSION_TOUCH_SQL, params)
        row = cursor.fetchone()
    if row is None:
        return None
    *identity, queued_at = row
    return Session.from_db(
        connection.alias, _TOUCH_RETURNS, (*identity, _datetime_from_db(connection, queued_at))
    )


# A datetime column's expression, for the database's converters.
_DATETIME = Value(None, output_field=DateTimeField())


def _datetime_from_db(connection: BaseDatabaseWrapper, value: Any) -> datetime | None:
    """A datetime a raw cursor read, as the ORM would give it (SQLite's driver answers text)."""
    for convert in connection.ops.get_db_converters(_DATETIME):
        value = convert(value, _DATETIME, connection)
    return cast(datetime | None, value)


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
            session = Session.objects.create(
                instance_id=instance_id,
                customer_phone=customer.phone,
                customer_user_id=customer.user_id,
                customer_name=customer.name[:NAME_CHARS],
                created_at=now,
                last_message_at=at,
                last_inbound_at=at if inbound else None,
                is_simulated=simulated,
            )
            return session, True
    except IntegrityError:
        # Another delivery opened this customer's session first (one open session per phone and
        # per user id); ours waited for its commit, so it is visible now.
        found = session_touch(
            phone_number_id,
            customer,
            at=at,
            idle_at=at,
            inbound=inbound,
            simulated=simulated,
            now=now,
        )
        if found is None:
            raise
        session_identity_fill(found, customer)
        return found, False


# --- idle ----------------------------------------------------------------------------------------


def idle_cutoff(at: datetime) -> datetime:
    """For an event at `at`: a session whose last activity is older than this is idle."""
    return at - timedelta(hours=settings.SESSION_IDLE_HOURS)


def idle_closed(session: Session, now: datetime) -> None:
    """The SYSTEM event of a session `SESSION_TOUCH_SQL` closed for being idle."""
    Message.objects.create(
        session=session,
        direction=Direction.SYSTEM,
        message_type=EventCode.SESSION_CLOSED,
        action=CLOSED_IDLE,
        json_part={"idle_hours": settings.SESSION_IDLE_HOURS},
        created_at=now,
    )
    logger.info("whatsapp_session_closed_idle", extra={"session_id": session.pk})


# --- identity fill-in --------------------------------------------------------------------------

NAME_CHARS = 200  # Session.customer_name


def identity_fill(session: Session, customer: Customer) -> dict[str, str]:
    """The identifiers and name the session lacks and the customer brings: the changes to make."""
    changes = {}
    if customer.phone and not session.customer_phone:
        changes["customer_phone"] = customer.phone
    if customer.user_id and not session.customer_user_id:
        changes["customer_user_id"] = customer.user_id
    if customer.name and not session.customer_name:
        changes["customer_name"] = customer.name[:NAME_CHARS]
    return changes


def session_identity_fill(session: Session, customer: Customer) -> None:
    """Fill in what the session lacks of the customer's identity (`identity_fill`)."""
    session_identity_update(session, identity_fill(session, customer))


def session_identity_update(session: Session, changes: dict[str, str]) -> None:
    """Write `changes` to the session's identity, unless another open session holds one of them:
    then the conflict is logged and the session left as it was."""
    if not changes:
        return
    try:
        # The rare case (a gap to fill, an identity change) pays the savepoint, so that a
        # refused identity does not abort the delivery's transaction.
        with transaction.atomic():
            Session.objects.filter(pk=session.pk).update(**phone_changes(changes))
    except IntegrityError:
        # Another open session holds that phone or user id; leave both as they are.
        logger.warning(
            "whatsapp_identity_conflict",
            extra={"session_id": session.pk, "fields": sorted(changes)},
        )
        return
    for name, value in phone_changes(changes).items():
        setattr(session, name, value)


# --- forward-only times ------------------------------------------------------------------------

# `SESSION_TOUCH_SQL` (above) moves them; `DeliverySessions` remembers where, so a session is
# touched again only for a later time.

# --- pending text ------------------------------------------------------------------------------


def waits_for_turn(kind: InboundKind, state: str, *, media_kind: str = "") -> bool:
    """Whether an INBOUND message is stored pending (``processed_at`` NULL) for a turn: text and
    the media the bot reads (`conversations.media_reading.bot_reads` of its `media_kind`), while
    a bot holds the session. In HUMAN staff read it in admin; an unreadable message, and a media
    the bot cannot read, get a fixed answer."""
    if state not in BOT_STATES:
        return False
    return kind is InboundKind.TEXT or (kind is InboundKind.MEDIA and bot_reads(media_kind))


# --- queued turn -------------------------------------------------------------------------------


def turn_queued_ttl() -> timedelta:
    """How long a session's queued turn (`Session.turn_queued_at`) spares later deliveries another
    publish; older, its task is presumed lost and the next delivery enqueues one again."""
    return timedelta(seconds=settings.TURN_QUEUED_TTL_SECONDS)


def turn_queued_before(now: datetime) -> datetime:
    """A turn queued before this has waited too long: the next delivery queues it again."""
    return now - turn_queued_ttl()


def turn_queued_recently(queued_at: datetime | None, now: datetime) -> bool:
    """Whether a turn queued at `queued_at` (None: none queued) spares another publish at `now`:
    it was queued at most `turn_queued_ttl()` ago and a worker has not started it yet (the lease
    clears the mark when a worker claims or releases it: `conversations.lease`)."""
    return queued_at is not None and queued_at >= turn_queued_before(now)


def turn_queue(session: Session, *, now: datetime) -> bool:
    """Mark the session's turn queued (`Session.turn_queued_at`) unless `turn_queued_recently`;
    True when this call marked it, and the caller must then enqueue the task. Called for a
    session a bot holds (`waits_for_turn`) whose row this transaction has locked and read (the
    session touch or its insert), so no worker moves the mark between the read and the write —
    and a turn queued moments ago, the common case in a burst, costs no statement at all.
    """
    if turn_queued_recently(session.turn_queued_at, now):
        return False
    if not Session.objects.filter(pk=session.pk).update(turn_queued_at=now):
        return False
    session.turn_queued_at = now
    return True


# --- the delivery's sessions -------------------------------------------------------------------

# (phone_number_id, user id, phone key): a customer as one delivery names them.
CustomerKey = tuple[str, str, str]
_NEVER = datetime.min.replace(tzinfo=UTC)


def customer_key(phone_number_id: str, customer: Customer) -> CustomerKey:
    """The customer by their number, user id and phone key (both forms of a Brazilian mobile
    name one customer; the key is cached, `customer_phone_key`)."""
    return (phone_number_id, customer.user_id, customer_phone_key(customer.phone))


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
    # The number and customer each session was met for, to touch it again by them.
    customers: dict[int, tuple[str, Customer]] = field(default_factory=dict)
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
            found = (
                Instance.objects.filter(phone_number_id=phone_number_id, is_active=True)
                .order_by("name")
                .values_list("id", flat=True)
                .first()
            )
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

    def touch(self, session: Session, at: datetime, *, inbound: bool, now: datetime) -> None:
        """Move the session's times forward to `at` (`SESSION_TOUCH_SQL`, by the customer it was
        met for) unless the database has them there already."""
        moves = at > self.times.get(session.pk, _NEVER) or (
            inbound and at > self.inbound_times.get(session.pk, _NEVER)
        )
        met_for = self.customers.get(session.pk)
        if moves and met_for is not None:
            phone_number_id, customer = met_for
            # Just met, so not idle at `at`: the statement finds it and moves its times.
            session_touch(
                phone_number_id,
                customer,
                at=at,
                idle_at=at,
                inbound=inbound,
                simulated=self.simulated,
                now=now,
            )
            self.stored(session, at, inbound=inbound)

    def stored(self, session: Session, at: datetime, *, inbound: bool) -> None:
        """The database has the session's times at `at` at least."""
        self.times[session.pk] = max(at, self.times.get(session.pk, at))
        if inbound:
            self.inbound_times[session.pk] = max(at, self.inbound_times.get(session.pk, at))


def session_for(
    sessions: DeliverySessions,
    phone_number_id: str,
    customer: Customer,
    at: datetime,
    *,
    inbound: bool,
    now: datetime,
) -> Session | None:
    """The customer's open session on that number, the rules above applied: found with its times
    moved forward (to the newest of the customer's messages in the delivery) — or, idle, closed
    and another opened; or opened for a new customer — and its identity filled in. None when the
    number is not an active instance."""
    key = customer_key(phone_number_id, customer)
    session = sessions.by_customer.get(key)
    if session is not None:
        return session
    moved_to = sessions.latest.get(key, at) if inbound else at
    session = session_touch(
        phone_number_id,
        customer,
        at=moved_to,
        idle_at=at,
        inbound=inbound,
        simulated=sessions.simulated,
        now=now,
    )
    if session is not None:
        sessions.known(phone_number_id, session)
        if session.state == SessionState.CLOSED:
            idle_closed(session, now)
            session = None
        else:
            sessions.stored(session, moved_to, inbound=inbound)
            session_identity_fill(session, customer)
    if session is None:
        instance_id = sessions.instance_id(phone_number_id)
        if instance_id is None:
            return None
        session, _opened = session_open(
            instance_id,
            phone_number_id,
            customer,
            now,
            moved_to,
            inbound=inbound,
            simulated=sessions.simulated,
        )
        sessions.stored(session, moved_to, inbound=inbound)
    sessions.customers[session.pk] = (phone_number_id, customer)
    sessions.by_customer[key] = session
    return session
