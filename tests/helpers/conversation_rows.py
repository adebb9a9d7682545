"""Helpers shared by the conversation tests: messages stored some time ago, on the recipes of
tests/baker_recipes.py."""

from datetime import timedelta
from typing import Any

from django.utils import timezone

from conversations.models import Message, Session
from tests import baker_recipes as recipes


def inbound(
    session: Session, text: str = "Oi", *, age: timedelta | None = None, **fields: Any
) -> Message:
    """A customer's text received `age` ago (just now without it), pending unless `processed_at`
    is given."""
    if age is not None:
        fields.setdefault("created_at", timezone.now() - age)
        fields.setdefault("wa_timestamp", fields["created_at"])
    message: Message = recipes.inbound.make(session=session, content=text, **fields)
    return message


def reply(
    session: Session, text: str = "Olá!", *, age: timedelta = timedelta(0), **fields: Any
) -> Message:
    """A part of an answer committed by a turn `age` ago and never sent (unless `fields` say)."""
    message: Message = recipes.reply.make(
        session=session, content=text, created_at=timezone.now() - age, **fields
    )
    return message


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
    import_module("support.migrations.0002_quick_replies_labels").grant_to_support(apps, editor)
    import_module("conversations.migrations.0024_satisfaction_survey").grant_to_support(
        apps, editor
    )
