"""The reads of a turn: the session as the agents see it, and its pending inbound messages.

`session_context` is also the prompt preview's reading of a real session
(`conversations.prompt_preview`); this module imports only the models and the pure core, so the
preview does not load the rest of the turn with it.
"""

from collections.abc import Sequence

from django.db import connections

from agents.context import InstanceInfo, SessionContext
from agents.states import SessionState
from conversations.media_views import MEDIA_COLUMNS_SQL, MEDIA_JOIN_SQL
from conversations.models import Message, Session


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
        package_versions={
            str(k): v for k, v in (session.package_versions or {}).items() if isinstance(v, int)
        },
    )


# The drain loop reads the pending messages twice a turn and checks for more twice: literal SQL,
# not the ORM's `pending_inbound()` querysets, because with every worker statement the ORM's a
# turn cost 25.4-34.9 ms of worker CPU on the bench machine, over the 25 ms floor
# (bench/worker_cpu.py); these cost 0.2-0.4 and 0.1 ms a call there, the ORM's 0.7-1.1.
# The condition is `MessageQuerySet.pending_inbound`'s (INBOUND, processed_at NULL).
# A media message comes with its readable part (`conversations.media_views`).
PENDING_INBOUND_SQL = f"""SELECT m.id, m.content, m.wa_timestamp, m.wa_message_id,
        m.created_at, {MEDIA_COLUMNS_SQL}
    FROM conversations_message m
    {MEDIA_JOIN_SQL}
    WHERE m.session_id = %s AND m.direction = 'INBOUND' AND m.processed_at IS NULL
    ORDER BY m.wa_timestamp ASC NULLS LAST, m.id"""
HAS_PENDING_SQL = """SELECT 1 FROM conversations_message
    WHERE session_id = %s AND direction = 'INBOUND' AND processed_at IS NULL{excluding}
    LIMIT 1"""


def session_pending_inbound(*, session_id: int) -> list[Message]:
    """The session's pending inbound messages, one turn, in WhatsApp's order (then arrival);
    only their id, content, WhatsApp timestamp, wamid, arrival and media's readable part
    (`conversations.media_views`) are loaded."""
    return list(Message.objects.raw(PENDING_INBOUND_SQL, [session_id]))


def session_has_pending(*, session_id: int, excluding: Sequence[int] = ()) -> bool:
    """Whether the session has an inbound message no turn has answered yet (`pending_inbound`),
    other than `excluding`."""
    statement = HAS_PENDING_SQL.format(
        excluding=f" AND id NOT IN ({', '.join(['%s'] * len(excluding))})" if excluding else ""
    )
    with connections[Message.objects.db].cursor() as cursor:
        cursor.execute(statement, [session_id, *excluding])
        return cursor.fetchone() is not None


def session_with_instance(*, session_id: int) -> Session:
    """The session with its instance loaded; `Session.DoesNotExist` when there is none."""
    return Session.objects.select_related("instance").get(pk=session_id)
