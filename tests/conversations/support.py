"""Helpers shared by the conversation tests."""

from uuid import uuid4

from django.utils import timezone

from conversations.models import Direction, Message, Session


def inbound(session: Session, text: str) -> Message:
    """A customer's text, just received and still pending."""
    return Message.objects.create(
        session=session,
        direction=Direction.INBOUND,
        content=text,
        wa_message_id=f"wamid.IN{uuid4().hex[:12]}",
        wa_timestamp=timezone.now(),
    )
