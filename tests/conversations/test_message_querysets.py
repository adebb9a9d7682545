"""The message log's named filters (conversations.models.MessageQuerySet): each returns exactly
the rows its rule names, from one small log holding one row of every kind that tells them apart."""

from datetime import timedelta
from typing import Any

import pytest
from django.db.models import Exists, OuterRef
from django.utils import timezone
from model_bakery import baker

from conversations.models import SUPERSEDED, DeliveryStatus, Direction, Message, Session

pytestmark = pytest.mark.django_db


@pytest.fixture
def log() -> dict[str, Message]:
    session = baker.make(Session, customer_phone="5511912345678")
    now = timezone.now()

    def row(direction: str, **fields: Any) -> Message:
        message: Message = baker.make(Message, session=session, direction=direction, **fields)
        return message

    return {
        "pending": row(Direction.INBOUND, content="oi", processed_at=None),
        "answered": row(Direction.INBOUND, content="oi", processed_at=now),
        "reply_sent": row(
            Direction.OUTBOUND,
            content="olá",
            wa_message_id="wamid.sent",
            delivery_status=DeliveryStatus.SENT,
        ),
        "reply_unsent": row(
            Direction.OUTBOUND, content="olá", delivery_status=DeliveryStatus.PENDING
        ),
        "reply_unsent_no_status": row(Direction.OUTBOUND, content="olá", delivery_status=""),
        "reply_failed": row(
            Direction.OUTBOUND, content="olá", delivery_status=DeliveryStatus.FAILED
        ),
        "reply_errored": row(Direction.OUTBOUND, content="olá", error="graph_error"),
        "draft": row(Direction.OUTBOUND, content="rascunho", error=SUPERSEDED),
        "system": row(Direction.SYSTEM, message_type="handoff", processed_at=None),
        "system_errored": row(Direction.SYSTEM, message_type="turn_failed", error="x"),
        # Another session's pending message: the filters never scope by session themselves.
        "other_pending": baker.make(
            Message,
            session=baker.make(Session, customer_phone="5511987654321"),
            direction=Direction.INBOUND,
            processed_at=None,
            created_at=now - timedelta(minutes=5),
        ),
    }


def names(log: dict[str, Message], queryset: Any) -> set[str]:
    by_pk = {message.pk: name for name, message in log.items()}
    return {by_pk[pk] for pk in queryset.values_list("pk", flat=True)}


def test_pending_inbound_is_inbound_with_no_processed_at(log: dict[str, Message]) -> None:
    assert names(log, Message.objects.pending_inbound()) == {"pending", "other_pending"}


def test_not_superseded_drops_only_the_superseded_drafts(log: dict[str, Message]) -> None:
    assert names(log, Message.objects.not_superseded()) == set(log) - {"draft"}


def test_conversational_is_inbound_and_outbound_without_drafts(log: dict[str, Message]) -> None:
    assert names(log, Message.objects.conversational()) == {
        "pending",
        "answered",
        "reply_sent",
        "reply_unsent",
        "reply_unsent_no_status",
        "reply_failed",
        "reply_errored",
        "other_pending",
    }


def test_unsent_outbound_waits_for_a_wamid_with_no_error_and_no_failure(
    log: dict[str, Message],
) -> None:
    assert names(log, Message.objects.unsent_outbound()) == {
        "reply_unsent",
        "reply_unsent_no_status",
    }


def test_the_filters_chain_with_filter_and_each_other(log: dict[str, Message]) -> None:
    session_id = log["pending"].session_id
    assert names(log, Message.objects.pending_inbound().filter(session_id=session_id)) == {
        "pending"
    }
    assert names(log, Message.objects.conversational().unsent_outbound()) == {
        "reply_unsent",
        "reply_unsent_no_status",
    }
    # A session's related manager has them too.
    session = Session.objects.get(pk=session_id)
    assert names(log, session.messages.pending_inbound()) == {"pending"}


def test_pending_inbound_works_in_a_subquery(log: dict[str, Message]) -> None:
    # As the stranded-sessions sweep (conversations.lease) uses it.
    pending = Message.objects.pending_inbound().filter(session=OuterRef("pk"))
    with_pending = Session.objects.filter(Exists(pending)).order_by("pk")
    assert list(with_pending.values_list("pk", flat=True)) == [
        log["pending"].session_id,
        log["other_pending"].session_id,
    ]
    log["pending"].processed_at = timezone.now()
    log["pending"].save(update_fields=["processed_at"])
    assert list(with_pending.values_list("pk", flat=True)) == [log["other_pending"].session_id]


def test_without_reaction_events_drops_only_the_customer_s_reaction_rows() -> None:
    session = baker.make(Session, customer_phone="5511912345678")
    rows = {
        "reaction": baker.make(
            Message, session=session, direction=Direction.INBOUND, message_type="reaction"
        ),
        "text": baker.make(
            Message, session=session, direction=Direction.INBOUND, message_type="text"
        ),
        "reacted_to": baker.make(
            Message, session=session, direction=Direction.OUTBOUND, reaction="👍"
        ),
        # Not one WhatsApp sends: an event named like it stays (only INBOUND rows are reactions).
        "system": baker.make(
            Message, session=session, direction=Direction.SYSTEM, message_type="reaction"
        ),
    }

    assert names(rows, Message.objects.without_reaction_events()) == {
        "text",
        "reacted_to",
        "system",
    }
