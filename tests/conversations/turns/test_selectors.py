"""The drain loop's reads (conversations/turns/selectors.py): a session's pending inbound
messages in WhatsApp's order, and whether any is left besides the turn's own."""

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from model_bakery import baker

from conversations.models import Direction, Message, Session
from conversations.turns.selectors import session_has_pending, session_pending_inbound

pytestmark = pytest.mark.django_db

NOW = timezone.now()
EARLIER = NOW - timedelta(seconds=30)


def inbound(session: Session, wamid: str, **fields: Any) -> Message:
    message: Message = baker.make(
        Message, session=session, direction=Direction.INBOUND, wa_message_id=wamid, **fields
    )
    return message


def test_the_pending_messages_come_in_whatsapp_s_order_then_arrival_with_five_fields() -> None:
    session, other = baker.make(Session, _quantity=2)
    inbound(session, "wamid.LATER", wa_timestamp=NOW, content="depois")
    inbound(session, "wamid.NO_TIME_1", wa_timestamp=None, content="sem hora 1")
    inbound(session, "wamid.EARLIER", wa_timestamp=EARLIER, content="antes")
    inbound(session, "wamid.LATER_TIE", wa_timestamp=NOW, content="depois também")
    inbound(session, "wamid.ANSWERED", wa_timestamp=EARLIER, processed_at=NOW)
    inbound(session, "wamid.NO_TIME_2", wa_timestamp=None, content="sem hora 2")
    baker.make(Message, session=session, direction=Direction.OUTBOUND, processed_at=None)
    inbound(other, "wamid.OTHER")

    pending = session_pending_inbound(session_id=session.pk)

    assert [(m.wa_message_id, m.content, m.wa_timestamp) for m in pending] == [
        ("wamid.EARLIER", "antes", EARLIER),
        ("wamid.LATER", "depois", NOW),
        ("wamid.LATER_TIE", "depois também", NOW),
        ("wamid.NO_TIME_1", "sem hora 1", None),
        ("wamid.NO_TIME_2", "sem hora 2", None),
    ]
    assert {"direction", "raw_response", "processed_at"} <= pending[0].get_deferred_fields()
    # A text has no media: the joined columns are NULL.
    assert (pending[0].__dict__["media_kind"], pending[0].__dict__["media_reading"]) == (None, None)


def test_the_pending_check_leaves_out_the_turn_s_own_messages() -> None:
    session, answered = baker.make(Session, _quantity=2)
    first = inbound(session, "wamid.1")
    second = inbound(session, "wamid.2")
    inbound(answered, "wamid.3", processed_at=NOW)

    assert [
        session_has_pending(session_id=session.pk, excluding=excluding)
        for excluding in [(), (first.pk,), (first.pk, second.pk)]
    ] == [True, True, False]
    assert session_has_pending(session_id=answered.pk) is False
