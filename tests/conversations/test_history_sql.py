"""The live history's hand-written read (conversations/agent_sources.py `HISTORY_SQL`) against the
ORM query it replaces, quoted in its comment: same messages, same conversation order, every
limit."""

from datetime import datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone
from model_bakery import baker

from agents.sources import HistoryEntry
from conversations.agent_sources import DatabaseHistorySource
from conversations.message_order import newest_in_conversation_order
from conversations.models import SUPERSEDED, DeliveryStatus, Direction, Message, Session

pytestmark = pytest.mark.django_db

NOW = timezone.now()


def orm_history(session_id: int, limit: int) -> list[tuple[Any, ...]]:
    messages, _older = newest_in_conversation_order(
        Message.objects.conversational()
        .filter(session_id=session_id)
        .exclude(delivery_status=DeliveryStatus.FAILED)
        .exclude(content="")
        .only("id", "session_id", "direction", "content", "error", "wa_timestamp", "staff_user_id"),
        limit,
    )
    return [
        (m.session_id, m.direction, m.content, m.error, m.pk, m.staff_user_id is not None)
        for m in messages
    ]


def entries(history: list[HistoryEntry]) -> list[tuple[Any, ...]]:
    return [(e.session_id, e.direction, e.content, e.error, e.message_id, e.staff) for e in history]


def message(
    session: Session, direction: str, content: str, stamp: datetime | None = None, **kw: Any
) -> Message:
    made: Message = baker.make(
        Message, session=session, direction=direction, content=content, wa_timestamp=stamp, **kw
    )
    return made


def test_the_live_history_is_the_orm_s_at_every_limit() -> None:
    session, other = baker.make(Session), baker.make(Session)
    staff = get_user_model().objects.create_user(username="atendente")
    message(other, Direction.INBOUND, "outra conversa", NOW)
    first = message(session, Direction.INBOUND, "Oi", NOW - timedelta(minutes=9))
    message(session, Direction.SYSTEM, "handoff")
    reply = message(session, Direction.OUTBOUND, "Olá!", delivery_status=DeliveryStatus.SENT)
    message(session, Direction.OUTBOUND, "rascunho", error=SUPERSEDED)
    message(session, Direction.OUTBOUND, "recusada", delivery_status=DeliveryStatus.FAILED)
    message(session, Direction.INBOUND, "", NOW - timedelta(minutes=8))
    # A burst delivered out of order, one message without a timestamp.
    late = message(session, Direction.INBOUND, "de poço", NOW - timedelta(minutes=5))
    early = message(session, Direction.INBOUND, "água", NOW - timedelta(minutes=6))
    unstamped = message(session, Direction.INBOUND, "sem hora")
    human = message(session, Direction.OUTBOUND, "Sou a Ana", staff_user=staff, error="x")

    for limit in range(1, 9):
        assert entries(DatabaseHistorySource().history(session.pk, limit)) == orm_history(
            session.pk, limit
        ), limit
    assert [e.message_id for e in DatabaseHistorySource().history(session.pk, 50)] == [
        first.pk,
        reply.pk,
        early.pk,
        late.pk,
        unstamped.pk,
        human.pk,
    ]
    assert DatabaseHistorySource().history(session.pk, 50)[-1].staff is True
