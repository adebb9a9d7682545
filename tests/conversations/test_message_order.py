"""The one conversation order (conversations.message_order), as the model's history, the admin
transcript and the operational summary's input each read it.

WhatsApp's timestamps have one-second resolution and come from Meta's clock: a customer's reply
stamped in the same second as the bot's answer, or a few seconds before it, must still come
after the answer; a burst that arrived out of order reads in the order the customer wrote it.
"""

from datetime import datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from django.utils import timezone
from model_bakery import baker
from pytest_django import DjangoCaptureOnCommitCallbacks

from conversations.agent_sources import DatabaseHistorySource
from conversations.handoff import summary_facts
from conversations.message_order import conversation_order
from conversations.models import Direction, Message, Session
from conversations.turns.tasks import process_session
from support.admin.transcript import session_transcript
from tests.fakes.graph_server import FakeGraphAPI
from tests.fakes.openai_server import FakeOpenAIServer
from tests.helpers.model_requests import history_of

HELLO = "Oi, quero um orçamento"
QUESTION = "Qual é o seu segmento?"
REPLY = "Sou da área de alimentos"
SECOND = "e também de bebidas"


def read_history(session: Session) -> list[str]:
    return [entry.content for entry in DatabaseHistorySource().history(session.pk, 50)]


def read_transcript(session: Session) -> list[str]:
    transcript = session_transcript(session=session, now=timezone.now())
    return [entry.message.content for entry in transcript.entries]


def read_summary_input(session: Session) -> list[str]:
    return [line.text for line in summary_facts(session).transcript]


READERS = pytest.mark.parametrize(
    "read",
    [read_history, read_transcript, read_summary_input],
    ids=["history", "transcript", "summary"],
)


def message(session: Session, direction: str, content: str, **fields: Any) -> Message:
    message: Message = baker.make(
        Message, session=session, direction=direction, content=content, **fields
    )
    return message


@pytest.fixture
def answered_at() -> datetime:
    """When the bot's answer was written: mid-second, as our clock stamps it."""
    return timezone.now().replace(microsecond=700_000) - timedelta(minutes=5)


def asked(session: Session, answered_at: datetime) -> None:
    message(
        session,
        Direction.INBOUND,
        HELLO,
        wa_timestamp=answered_at.replace(microsecond=0) - timedelta(seconds=20),
        created_at=answered_at - timedelta(seconds=19),
    )
    message(session, Direction.OUTBOUND, QUESTION, created_at=answered_at)


@READERS
def test_a_reply_stamped_in_the_same_second_as_the_answer_comes_after_it(
    read: Any, session: Session, answered_at: datetime
) -> None:
    asked(session, answered_at)
    # WhatsApp's timestamp is the answer's second, truncated: 0.7 s "before" the answer.
    message(
        session,
        Direction.INBOUND,
        REPLY,
        wa_timestamp=answered_at.replace(microsecond=0),
        created_at=answered_at + timedelta(seconds=2),
    )

    assert read(session) == [HELLO, QUESTION, REPLY]


@READERS
def test_a_reply_stamped_3_seconds_before_the_answer_by_clock_skew_comes_after_it(
    read: Any, session: Session, answered_at: datetime
) -> None:
    asked(session, answered_at)
    message(
        session,
        Direction.INBOUND,
        REPLY,
        wa_timestamp=answered_at.replace(microsecond=0) - timedelta(seconds=3),
        created_at=answered_at + timedelta(seconds=1),
    )

    assert read(session) == [HELLO, QUESTION, REPLY]


@READERS
def test_a_burst_that_arrived_out_of_order_reads_in_whatsapp_timestamp_order(
    read: Any, session: Session, answered_at: datetime
) -> None:
    asked(session, answered_at)
    written = answered_at.replace(microsecond=0) + timedelta(seconds=10)
    # The customer wrote REPLY then SECOND; WhatsApp delivered SECOND first.
    message(
        session,
        Direction.INBOUND,
        SECOND,
        wa_timestamp=written + timedelta(seconds=4),
        created_at=written + timedelta(seconds=5),
    )
    message(
        session,
        Direction.INBOUND,
        REPLY,
        wa_timestamp=written,
        created_at=written + timedelta(seconds=6),
    )

    assert read(session) == [HELLO, QUESTION, REPLY, SECOND]


@READERS
def test_our_clock_does_not_decide_the_order_the_database_wrote_them_in(
    read: Any, session: Session, answered_at: datetime
) -> None:
    asked(session, answered_at)
    # The web host's clock runs 30 s behind the worker's: the reply's created_at is older than
    # the answer it replies to, yet it was stored after it.
    message(
        session,
        Direction.INBOUND,
        REPLY,
        wa_timestamp=answered_at.replace(microsecond=0) - timedelta(seconds=30),
        created_at=answered_at - timedelta(seconds=30),
    )

    assert read(session) == [HELLO, QUESTION, REPLY]


def test_the_model_reads_its_question_before_the_customer_s_reply_in_a_real_turn(
    session: Session,
    answered_at: datetime,
    openai_settings: FakeOpenAIServer,
    fake_graph: FakeGraphAPI,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    asked(session, answered_at)
    Message.objects.filter(session=session, direction=Direction.INBOUND).update(
        processed_at=answered_at
    )
    message(
        session,
        Direction.INBOUND,
        REPLY,
        wa_timestamp=answered_at.replace(microsecond=0),
        wa_message_id="wamid.REPLY",
    )
    openai_settings.queue_text('{"s":1}Certo! Qual serviço você procura?')

    with django_capture_on_commit_callbacks(execute=True):
        process_session.delay(session.pk)

    assert history_of(openai_settings.requests[0]) == [
        {"role": "user", "content": HELLO},
        {"role": "assistant", "content": QUESTION},
        {"role": "user", "content": REPLY},
    ]
    assert [send.json["text"]["body"] for send in fake_graph.sends] == [
        "Certo! Qual serviço você procura?"
    ]


def stub(pk: int, direction: str, stamp: int | None) -> SimpleNamespace:
    at = None if stamp is None else datetime(2026, 1, 1, 12, 0, stamp)
    return SimpleNamespace(pk=pk, direction=direction, wa_timestamp=at)


def test_only_consecutive_inbound_messages_are_reordered_and_unstamped_ones_go_last() -> None:
    rows = [
        stub(1, "INBOUND", 30),
        stub(2, "INBOUND", None),
        stub(3, "INBOUND", 10),
        stub(4, "SYSTEM", None),
        stub(5, "INBOUND", 50),
        stub(6, "INBOUND", 40),
        stub(7, "OUTBOUND", None),
        stub(8, "INBOUND", 5),
    ]

    assert [m.pk for m in conversation_order(rows)] == [3, 1, 2, 4, 6, 5, 7, 8]
