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


def ensure_staff_groups() -> None:
    """Create the staff groups exactly as the migrations do: a test with `transaction=True`
    finds them gone once an earlier such test flushed the database."""
    from importlib import import_module
    from types import SimpleNamespace

    from django.apps import apps
    from django.db import connection

    editor = SimpleNamespace(connection=connection)
    import_module("conversations.migrations.0002_staff_groups").create_groups(apps, editor)
    import_module(
        "conversations.migrations.0007_personal_data_and_token_encryption"
    ).grant_personal_data_to_support(apps, editor)
    import_module("conversations.migrations.0010_staff_workflow").grant_to_support(apps, editor)
