"""The reads of a turn: the session as the agents see it, and its pending inbound messages.

`session_context` is also the prompt preview's reading of a real session
(`conversations.prompt_preview`); this module imports only the models and the pure core, so the
preview does not load the rest of the turn with it (and the hot-statement cursor).
"""

from collections.abc import Sequence

from django.db import connections

from agents.context import InstanceInfo, SessionContext
from agents.states import SessionState
from compat.django_private import load_model, select_columns
from conversations.inbound.hot_path import fetch_models, hot_cursor
from conversations.models import Direction, Instance, Message, Session


def session_context(session: Session) -> SessionContext:
    """The session as the agents see it (a plain snapshot; the instance must be loaded)."""
    instance = session.instance
    return SessionContext(
        session_id=session.pk,
        state=SessionState(session.state),
        instance=InstanceInfo(
            name=instance.name,
            display_phone=instance.display_phone,
            brand_context=instance.brand_context,
            health_sensitive=instance.health_sensitive,
        ),
        customer_phone=session.customer_phone,
        customer_name=session.customer_name,
        segment=session.segment,
        intent=session.intent,
        service=session.service,
        technical_data=dict(session.technical_data or {}),
        registration_data=dict(session.registration_data or {}),
        loaded_packages=tuple(session.loaded_packages or ()),
        technical_extras=dict(session.technical_extras or {}),
        registration_extras=dict(session.registration_extras or {}),
        confirmation_data=(
            dict(session.confirmation_data) if session.confirmation_data is not None else None
        ),
        prompt_versions={str(k): str(v) for k, v in (session.prompt_versions or {}).items()},
    )


# The drain loop's two reads, hand-written: it runs them around every turn, and the ORM's
# compilation costs more CPU than running them (bench/worker_cpu.py).
# tests/conversations/test_lease_sql.py checks them against the ORM's, quoted here:
# Message.objects.pending_inbound().filter(session_id=session_id)
#     .order_by(F("wa_timestamp").asc(nulls_last=True), "id")
#     .only("id", "content", "wa_timestamp", "wa_message_id")
_PENDING = f"""FROM {Message._meta.db_table}
    WHERE session_id = %s AND direction = '{Direction.INBOUND.value}' AND processed_at IS NULL"""
_PENDING_FIELDS = ("id", "content", "wa_timestamp", "wa_message_id")
PENDING_INBOUND_SQL = f"""SELECT {", ".join(_PENDING_FIELDS)} {_PENDING}
    ORDER BY wa_timestamp ASC NULLS LAST, id"""


def session_pending_inbound(*, session_id: int) -> list[Message]:
    """The session's pending inbound messages, one turn, in WhatsApp's order (then arrival);
    only their id, content, WhatsApp timestamp and wamid are loaded."""
    return fetch_models(Message, PENDING_INBOUND_SQL, [session_id], _PENDING_FIELDS)


# Message.objects.pending_inbound().filter(session_id=session_id)
#     .exclude(pk__in=excluding).exists()
HAS_PENDING_SQL = f"SELECT 1 {_PENDING}{{excluding}} LIMIT 1"


def session_has_pending(*, session_id: int, excluding: Sequence[int] = ()) -> bool:
    """Whether the session has an inbound message no turn has answered yet (`pending_inbound`),
    other than `excluding`."""
    statement = HAS_PENDING_SQL.format(
        excluding=f" AND id NOT IN ({', '.join(['%s'] * len(excluding))})" if excluding else ""
    )
    with hot_cursor(connections[Message.objects.db]) as cursor:
        cursor.execute(statement, [session_id, *excluding])
        return cursor.fetchone() is not None


# The turn's read of its session, hand-written: the ORM's compilation of the join costs more CPU
# than running it (bench/worker_cpu.py). tests/conversations/test_lease_sql.py checks it against
# the ORM's, quoted here: Session.objects.select_related("instance").get(pk=session_id)
SESSION_WITH_INSTANCE_SQL = f"""SELECT {select_columns(Session, "s")},
        {select_columns(Instance, "i")}
    FROM {Session._meta.db_table} s
    INNER JOIN {Instance._meta.db_table} i ON i.id = s.instance_id
    WHERE s.id = %s"""
_SESSION_FIELDS = len(Session._meta.concrete_fields)
_INSTANCE = Session._meta.get_field("instance")


def session_with_instance(*, session_id: int) -> Session:
    """The session with its instance loaded; `Session.DoesNotExist` as ``.get()`` raises it."""
    connection = connections[Session.objects.db]
    with hot_cursor(connection) as cursor:
        cursor.execute(SESSION_WITH_INSTANCE_SQL, [session_id])
        row = cursor.fetchone()
    if row is None:
        raise Session.DoesNotExist(f"{Session._meta.object_name} matching query does not exist.")
    session = load_model(connection, Session, row[:_SESSION_FIELDS])
    _INSTANCE.set_cached_value(session, load_model(connection, Instance, row[_SESSION_FIELDS:]))
    return session
