"""The webhook's session rules, each defined once: its Python (ORM) form beside its SQL form.

The rules:

- **open session**: a customer's open session (state other than CLOSED) on the active instance
  of the number, looked up by business-scoped user id first, then by phone (`IDENTIFIERS`) — a
  real delivery's among the real sessions only, a simulated one's (`simulator.simulation`)
  among the simulated ones (`Session.is_simulated`), so the two never share a session;
- **idle**: an open session whose last message (``last_message_at``, else ``created_at``) is
  more than ``SESSION_IDLE_HOURS`` older than the event's WhatsApp timestamp is idle: the
  general path closes it and opens another, whatever its state;
- **identity fill-in**: a missing phone, user id or profile name is filled in from later events
  (unless another open session holds it: the database refuses, and the session keeps its gap);
- **forward-only times**: ``last_message_at`` and ``last_inbound_at`` only move forward;
- **pending text**: an INBOUND message waits for a turn (``processed_at`` NULL) only when it is
  text and a bot holds the session; anything else is stored processed at reception;
- **queued turn**: a delivery queues the session's turn (``turn_queued_at``, then the task)
  unless a turn queued less than ``TURN_QUEUED_TTL_SECONDS`` ago has not started yet.

Each rule's Python form serves the general path (`conversations.inbound.events` and
`conversations.inbound.sessions`, on every database); its SQL form, right below it, serves the
two hand-written statements built at the end of this module from those fragments:
`TOUCH_OPEN_SESSION_SQL` (the general path's session lookup, on every database) and
`RECEIVE_TEXT_SESSION_SQL` (the session part of `conversations.inbound.one_statement`,
PostgreSQL). Why hand-written SQL at all: on the webhook's hot path the ORM spends more CPU
building a query than the database spends running it, and each statement is a round trip; the
commonest delivery becomes one statement (bench/webhook.py measures the webhook against the
durable floor, and bench/README.md records the figures). The tests under
tests/conversations/inbound/ check on PostgreSQL that the two spellings of each rule store the
same rows.

The SQL is literal (table and column names as the migrations create them) with named parameters;
the values of enums (states) come from the same Python definitions the ORM form uses.
"""

from datetime import datetime, timedelta

from django.conf import settings
from django.db import connections
from django.db.models import Case, F, Q, QuerySet, Value, When

from agents.states import BOT_STATES, SessionState
from conversations.inbound.hot_path import hot_cursor
from conversations.models import Session
from whatsapp.payload import Customer, InboundKind

# The states as SQL literals, from the enums (never typed twice).
CLOSED_SQL = f"'{SessionState.CLOSED.value}'"
BOT_STATES_SQL = ", ".join(f"'{state.value}'" for state in sorted(BOT_STATES))

# --- open session ------------------------------------------------------------------------------

# Tried in this order: the user id names the customer more precisely than a phone that may have
# changed hands. Both are columns of conversations_session.
IDENTIFIERS = ("customer_user_id", "customer_phone")


def customer_identifiers(customer: Customer) -> list[tuple[str, str]]:
    """(column, value) of each identifier the customer has, in lookup order."""
    values = {"customer_user_id": customer.user_id, "customer_phone": customer.phone}
    return [(name, values[name]) for name in IDENTIFIERS if values[name]]


def open_sessions(phone_number_id: str, *, simulated: bool) -> QuerySet[Session]:
    """The open sessions on the active instance of that number, the real ones or the simulated
    ones."""
    return Session.objects.filter(
        instance__phone_number_id=phone_number_id,
        instance__is_active=True,
        is_simulated=simulated,
    ).exclude(state=SessionState.CLOSED)


def _open_session_sql(identifier: str) -> str:
    """The id of the customer's open, non-idle session (`o`), found by one identifier, among the
    real sessions or the simulated ones (%(simulated)s)."""
    return f"""SELECT o.id FROM conversations_session o
        JOIN conversations_instance i ON i.id = o.instance_id
        WHERE i.phone_number_id = %(phone_number_id)s AND i.is_active
          AND o.{identifier} = %(identifier)s AND o.state <> {CLOSED_SQL}
          AND o.is_simulated = %(simulated)s AND {NOT_IDLE_SQL}
        LIMIT 1"""


# --- idle ----------------------------------------------------------------------------------------


def idle_cutoff(at: datetime) -> datetime:
    """For an event at `at`: a session whose last activity is older than this is idle."""
    return at - timedelta(hours=settings.SESSION_IDLE_HOURS)


def is_idle(session: Session, at: datetime) -> bool:
    last: datetime = session.last_message_at or session.created_at
    return last < idle_cutoff(at)


NOT_IDLE_SQL = "COALESCE(o.last_message_at, o.created_at) >= %(idle_cutoff)s"

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


def identity_params(customer: Customer) -> dict[str, str]:
    """`IDENTITY_FILL_SQL`'s parameters (an empty value fills nothing: '' stays '')."""
    return {
        "phone": customer.phone,
        "user_id": customer.user_id,
        "name": customer.name[:NAME_CHARS],
    }


IDENTITY_FILL_SQL = """customer_phone = CASE WHEN customer_phone = '' THEN %(phone)s
            ELSE customer_phone END,
        customer_user_id = CASE WHEN customer_user_id = '' THEN %(user_id)s
            ELSE customer_user_id END,
        customer_name = CASE WHEN customer_name = '' THEN %(name)s ELSE customer_name END"""

# --- forward-only times ------------------------------------------------------------------------


def forward_only(field: str, at: datetime) -> Case:
    """`field` set to `at` when it is NULL or older, else left as it is (never moved back)."""
    return Case(
        When(Q(**{f"{field}__isnull": True}) | Q(**{f"{field}__lt": at}), then=Value(at)),
        default=F(field),
    )


def _forward_only_sql(column: str) -> str:
    return f"CASE WHEN {column} IS NULL OR {column} < %(at)s THEN %(at)s ELSE {column} END"


# --- pending text ------------------------------------------------------------------------------


def waits_for_turn(kind: InboundKind, state: str) -> bool:
    """Whether an INBOUND message is stored pending (``processed_at`` NULL) for a turn: text,
    while a bot holds the session. In HUMAN staff read it in admin; media get a fixed answer."""
    return kind is InboundKind.TEXT and state in BOT_STATES


# For the one-statement path's TEXT message, `s` being the session as the UPDATE left it.
PROCESSED_AT_SQL = f"CASE WHEN s.state IN ({BOT_STATES_SQL}) THEN NULL ELSE %(now)s END"

# --- queued turn -------------------------------------------------------------------------------


def turn_queued_ttl() -> timedelta:
    """How long a session's queued turn (`Session.turn_queued_at`) spares later deliveries another
    publish; older, its task is presumed lost and the next delivery enqueues one again."""
    return timedelta(seconds=settings.TURN_QUEUED_TTL_SECONDS)


def turn_queued_before(now: datetime) -> datetime:
    """A turn queued before this has waited too long: the next delivery queues it again."""
    return now - turn_queued_ttl()


def turn_queue(*, session_id: int, now: datetime) -> bool:
    """Mark the session's turn queued (`Session.turn_queued_at`) unless a turn enqueued less than
    `turn_queued_ttl()` ago has not started yet; True when this call marked it, and the caller
    must then enqueue the task. Called for sessions a bot holds (`waits_for_turn`); the lease
    clears the mark when a worker claims or releases it (`conversations.lease`).
    """
    connection = connections[Session.objects.db]
    adapt = connection.ops.adapt_datetimefield_value
    with hot_cursor(connection) as cursor:
        cursor.execute(
            TURN_QUEUE_UPDATE_SQL, [adapt(now), session_id, adapt(turn_queued_before(now))]
        )
        return bool(cursor.rowcount)


# `turn_queue`'s statement: ``Session.objects.filter(pk=...).filter(Q(turn_queued_at__isnull=True)
# | Q(turn_queued_at__lt=...)).update(turn_queued_at=...)``, hand-written (compiling the ORM's cost
# the webhook more CPU than running it; tests/conversations/inbound/test_sessions_sql.py).
TURN_QUEUE_UPDATE_SQL = """UPDATE conversations_session SET turn_queued_at = %s
    WHERE id = %s AND (turn_queued_at IS NULL OR turn_queued_at < %s)"""


# The same, inside the one-statement path's UPDATE (which also checks the bot state itself).
TURN_QUEUE_SQL = f"""CASE WHEN state IN ({BOT_STATES_SQL})
            AND (turn_queued_at IS NULL OR turn_queued_at < %(queued_before)s)
            THEN %(now)s ELSE turn_queued_at END"""

# --- the statements ----------------------------------------------------------------------------

# What `TOUCH_OPEN_SESSION_SQL` returns, in the model's field order: `Model.from_db` maps a
# partial row by that order.
TOUCH_RETURNS = (
    "id",
    "instance_id",
    "customer_phone",
    "customer_user_id",
    "customer_name",
    "state",
)

# The general path's lookup, per identifier (every database): the open, non-idle session, its
# times moved forward to %(at)s (``last_inbound_at`` only when %(inbound)s), in one
# ``UPDATE ... RETURNING`` instead of the ORM's SELECT then UPDATE. No row: new customer, idle
# session or unknown number, and the caller takes the ORM path.
TOUCH_OPEN_SESSION_SQL = {
    identifier: f"""UPDATE conversations_session SET
        last_message_at = {_forward_only_sql("last_message_at")},
        last_inbound_at = CASE WHEN %(inbound)s THEN {_forward_only_sql("last_inbound_at")}
            ELSE last_inbound_at END
    WHERE id = ({_open_session_sql(identifier)})
    RETURNING {", ".join(TOUCH_RETURNS)}"""
    for identifier in IDENTIFIERS
}

# The one-statement path's session part, per identifier (PostgreSQL): for a customer's text, the
# open, non-idle session's times moved forward to %(at)s, its identity filled in and its turn
# queued, all in one UPDATE; `conversations.inbound.one_statement` inserts the message and the
# delivery in the same statement.
RECEIVE_TEXT_SESSION_SQL = {
    identifier: f"""UPDATE conversations_session SET
        last_message_at = {_forward_only_sql("last_message_at")},
        last_inbound_at = {_forward_only_sql("last_inbound_at")},
        {IDENTITY_FILL_SQL},
        turn_queued_at = {TURN_QUEUE_SQL}
    WHERE id = ({_open_session_sql(identifier)})
    RETURNING id, state, turn_queued_at"""
    for identifier in IDENTIFIERS
}
