"""A template parameter's length cap tried on both sides: 1024 characters are sent, 1025 are
refused with nothing written."""

from datetime import UTC, datetime
from typing import Any
from uuid import uuid4

import pytest
from django.contrib.auth.models import User
from django.utils import translation
from model_bakery import baker

from conversations.models import Direction, Instance, Message, MessageTemplate, Session
from support.staff_actions import StaffActionRefused, session_send_template

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 11, 30, 15, 0, tzinfo=UTC)


@pytest.fixture
def session() -> Session:
    session: Session = baker.make(
        Session, instance=baker.make(Instance, access_token=""), state="HUMAN"
    )
    return session


@pytest.fixture
def template() -> MessageTemplate:
    return MessageTemplate.objects.create(
        name="retomar_contato", language="pt_BR", body="Olá, {{1}}!", parameters=["Nome"]
    )


def send_with(session: Session, template: MessageTemplate, value: str) -> list[int]:
    sent: list[int] = []
    session_send_template(
        session_id=session.pk,
        user=baker.make(User, username="ana", is_staff=True),
        template_id=template.pk,
        values=[value],
        form_token=uuid4(),
        now=NOW,
        send=sent.append,
    )
    return sent


def outbound(session: Session) -> list[tuple[str, Any]]:
    """(content, the template parameters sent) of each OUTBOUND row."""
    return list(
        Message.objects.filter(session=session, direction=Direction.OUTBOUND).values_list(
            "content", "json_part__template__parameters"
        )
    )


@pytest.mark.parametrize("length", [1023, 1024], ids=["1023 characters", "1024 characters"])
def test_a_parameter_of_up_to_1024_characters_is_sent(
    session: Session, template: MessageTemplate, length: int
) -> None:
    send_with(session, template, "M" * length)

    assert outbound(session) == [(f"Olá, {'M' * length}!", ["M" * length])]


def test_a_parameter_of_1025_characters_is_refused_and_nothing_is_written(
    session: Session, template: MessageTemplate
) -> None:
    with translation.override("pt-br"), pytest.raises(StaffActionRefused) as refused:
        send_with(session, template, "M" * 1025)

    assert refused.value.message == (
        "O parâmetro Nome deve ter uma só linha de no máximo 1024 caracteres."
    )
    assert outbound(session) == []
