"""WhatsApp's 24-hour customer-service window tried at its edge: the customer last wrote at
`LAST_INBOUND`, so the window closes at exactly 24 h later (`CLOSES`). At `CLOSES` it is closed, a
second before it is open, for every place that reads it: the reply, the staff panel (reply box or
templates), the queue's time left, the transcript's window. The instants are literal, so a rule
that moves the edge (`<=` for `<`, 24 h for anything else) fails here."""

from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import uuid4

import pytest
from django.contrib.auth.models import Group, User
from django.utils import translation
from model_bakery import baker

from conversations.models import Direction, Instance, Message, MessageTemplate, Session
from support.admin.staff_actions import staff_actions_panel
from support.admin.transcript import session_transcript
from support.queue import queue_entry, waiting_sessions
from support.staff_actions import (
    StaffActionRefused,
    session_reply,
    window_closes_at,
    window_is_open,
)

pytestmark = pytest.mark.django_db

# 12:00 in Brasília on both days.
LAST_INBOUND = datetime(2026, 11, 29, 15, 0, tzinfo=UTC)
CLOSES = datetime(2026, 11, 30, 15, 0, tzinfo=UTC)
SECOND_BEFORE = datetime(2026, 11, 30, 14, 59, 59, tzinfo=UTC)
SECOND_AFTER = datetime(2026, 11, 30, 15, 0, 1, tzinfo=UTC)
CLOSED_TEXT = (
    "A janela de 24 horas do WhatsApp está fechada: o cliente escreveu pela última vez há mais "
    "de 24 horas. Envie um modelo de mensagem do WhatsApp aprovado: retomar_contato."
)


@pytest.fixture
def support() -> User:
    user: User = baker.make(User, username="ana", is_staff=True)
    user.groups.add(Group.objects.get(name="Support"))
    return user


@pytest.fixture
def template() -> MessageTemplate:
    return MessageTemplate.objects.create(
        name="retomar_contato", language="pt_BR", body="Olá, {{1}}!", parameters=["Nome"]
    )


def with_team(user: User, **fields: Any) -> Session:
    session: Session = baker.make(
        Session,
        instance=baker.make(Instance, access_token=""),
        customer_phone="5511987654321",
        state="HUMAN",
        handoff_reason="staff_takeover",
        handed_off_at=LAST_INBOUND,
        assigned_to=user,
        last_inbound_at=LAST_INBOUND,
        **fields,
    )
    return session


def reply_at(session: Session, user: User, now: datetime) -> list[int]:
    sent: list[int] = []
    session_reply(
        session_id=session.pk,
        user=user,
        text="Olá, Maria!",
        form_token=uuid4(),
        now=now,
        send=sent.append,
    )
    return sent


def outbound_texts(session: Session) -> list[str]:
    return list(
        Message.objects.filter(session=session, direction=Direction.OUTBOUND).values_list(
            "content", flat=True
        )
    )


# --- The rule -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("now", "is_open"),
    [
        pytest.param(SECOND_BEFORE, True, id="24 h - 1 s: open"),
        pytest.param(CLOSES, False, id="exactly 24 h: closed"),
        pytest.param(SECOND_AFTER, False, id="24 h + 1 s: closed"),
    ],
)
def test_the_window_closes_exactly_24_hours_after_the_customer_s_last_message(
    support: User, now: datetime, is_open: bool
) -> None:
    session = with_team(support)

    assert window_closes_at(session) == CLOSES
    assert window_is_open(session, now) is is_open


# --- The reply ----------------------------------------------------------------------------------


def test_a_reply_a_second_before_the_window_closes_is_sent(support: User) -> None:
    session = with_team(support)

    reply_at(session, support, SECOND_BEFORE)

    assert outbound_texts(session) == ["Olá, Maria!"]
    session.refresh_from_db()
    assert session.last_staff_reply_at == SECOND_BEFORE


@pytest.mark.parametrize("now", [CLOSES, SECOND_AFTER], ids=["exactly 24 h", "24 h + 1 s"])
def test_a_reply_when_the_window_has_closed_is_refused_and_writes_nothing(
    support: User, template: MessageTemplate, now: datetime
) -> None:
    session = with_team(support)

    with translation.override("pt-br"), pytest.raises(StaffActionRefused) as refused:
        reply_at(session, support, now)

    assert refused.value.message == CLOSED_TEXT
    assert outbound_texts(session) == []
    session.refresh_from_db()
    assert session.last_staff_reply_at is None


# --- The staff panel: reply box or templates ----------------------------------------------------


def test_a_second_before_the_edge_the_panel_offers_the_reply_box_and_the_templates(
    support: User, template: MessageTemplate
) -> None:
    session = with_team(support)

    with translation.override("pt-br"):
        panel = staff_actions_panel(session=session, user=support, now=SECOND_BEFORE)

    assert panel is not None
    assert (panel.window_open, panel.window_text) == (True, "janela aberta até 12:00")
    assert [choice.template.name for choice in panel.templates] == ["retomar_contato"]


@pytest.mark.parametrize("now", [CLOSES, SECOND_AFTER], ids=["exactly 24 h", "24 h + 1 s"])
def test_at_the_edge_the_panel_closes_the_reply_box_and_points_to_the_templates(
    support: User, template: MessageTemplate, now: datetime
) -> None:
    session = with_team(support)

    with translation.override("pt-br"):
        panel = staff_actions_panel(session=session, user=support, now=now)

    assert panel is not None
    assert (panel.window_open, panel.window_text) == (
        False,
        "janela fechada: use um modelo de mensagem do WhatsApp",
    )
    assert [choice.template.name for choice in panel.templates] == ["retomar_contato"]


# --- The queue's time left ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("now", "window_open", "window_text"),
    [
        pytest.param(datetime(2026, 11, 30, 14, 59, tzinfo=UTC), True, "1 min", id="1 min left"),
        pytest.param(SECOND_BEFORE, True, "0 min", id="1 s left"),
        pytest.param(CLOSES, False, "fechada", id="exactly 24 h"),
        pytest.param(SECOND_AFTER, False, "fechada", id="24 h + 1 s"),
    ],
)
def test_the_queue_s_time_left_at_the_edge_of_the_window(
    support: User, now: datetime, window_open: bool, window_text: str
) -> None:
    with_team(support)
    row = waiting_sessions().get()

    with translation.override("pt-br"):
        entry = queue_entry(row, now=now, sla_minutes=15)

    assert entry.window_closes_at == CLOSES
    assert (entry.window_open, entry.window_text) == (window_open, window_text)


# --- The transcript's window --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("now", "remaining"),
    [
        pytest.param(SECOND_BEFORE, timedelta(seconds=1), id="1 s left"),
        pytest.param(CLOSES, None, id="exactly 24 h"),
        pytest.param(SECOND_AFTER, None, id="24 h + 1 s"),
    ],
)
def test_the_transcript_s_window_at_its_edge(
    support: User, now: datetime, remaining: timedelta | None
) -> None:
    session = with_team(support)

    window = session_transcript(session=session, now=now).window

    assert (window.last_inbound_at, window.closes_at) == (LAST_INBOUND, CLOSES)
    assert (window.remaining, window.is_open) == (remaining, remaining is not None)
