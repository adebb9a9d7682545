"""A customer's quoted reply, through the webhook and a real turn: the model reads the text it
quotes before it, and the later turns' history keeps the mark."""

from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from model_bakery import baker
from pytest_django import DjangoCaptureOnCommitCallbacks

from conversations.models import Direction, Instance, Message, Session
from tests.fakes.graph_server import FakeGraphAPI
from tests.fakes.openai_server import FakeOpenAIServer
from tests.helpers.inbound import T, make_session
from tests.helpers.meta_payloads import encode, load_fixture, signed_post
from tests.helpers.model_requests import history_of

pytestmark = pytest.mark.django_db

QUESTION = "Qual é o tipo de amostra: água de poço ou de rede?"


def text_quoting(
    wamid: str, *, body: str = "De poço", id_: str = "wamid.QUOTING", at: int = 0
) -> bytes:
    document = load_fixture("text")
    [message] = document["entry"][0]["changes"][0]["value"]["messages"]
    message.update(
        id=id_,
        timestamp=str(int(T.timestamp()) + at),
        text={"body": body},
    )
    if wamid:
        message["context"] = {"from": "5511999990000", "id": wamid}
    return encode(document)


def asked(session: Session, content: str = QUESTION, **fields: Any) -> Message:
    message: Message = baker.make(
        Message,
        session=session,
        direction=Direction.OUTBOUND,
        content=content,
        wa_message_id="wamid.OUT01",
        delivery_status="read",
        created_at=T - timedelta(minutes=1),
        **fields,
    )
    return message


@pytest.fixture
def post(client: Client, django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks) -> Any:
    def post(body: bytes) -> None:
        # The webhook commits the message; its hook runs the turn in-process.
        with django_capture_on_commit_callbacks(execute=True):
            assert signed_post(client, body).status_code == 200

    return post


def test_a_quoted_reply_reaches_the_model_with_the_text_it_quotes(
    instance: Instance,
    openai_settings: FakeOpenAIServer,
    fake_graph: FakeGraphAPI,
    post: Any,
) -> None:
    session = make_session(instance)
    asked(session)
    openai_settings.queue_text('{"s":1}Certo, água de poço. Quantas amostras?')

    post(text_quoting("wamid.OUT01"))

    assert history_of(openai_settings.requests[0]) == [
        {"role": "assistant", "content": QUESTION},
        {"role": "user", "content": f'(em resposta a: "{QUESTION}") De poço'},
    ]
    [inbound] = session.messages.filter(direction=Direction.INBOUND)
    assert (inbound.content, inbound.reply_to_wamid) == ("De poço", "wamid.OUT01")
    assert [s.json["text"]["body"] for s in fake_graph.sends] == [
        "Certo, água de poço. Quantas amostras?"
    ]


def test_the_next_turn_s_history_keeps_the_quote(
    instance: Instance,
    openai_settings: FakeOpenAIServer,
    fake_graph: FakeGraphAPI,
    post: Any,
) -> None:
    session = make_session(instance)
    asked(session)
    openai_settings.queue_text('{"s":1}Certo, água de poço. Quantas amostras?')
    openai_settings.queue_text('{"s":1}Anotado: duas amostras.')
    post(text_quoting("wamid.OUT01"))

    post(text_quoting("", body="Duas", id_="wamid.NEXT", at=60))

    assert history_of(openai_settings.requests[1]) == [
        {"role": "assistant", "content": QUESTION},
        {"role": "user", "content": f'(em resposta a: "{QUESTION}") De poço'},
        {"role": "assistant", "content": "Certo, água de poço. Quantas amostras?"},
        {"role": "user", "content": "Duas"},
    ]


def test_a_long_quoted_message_is_cut_for_the_model(
    instance: Instance,
    openai_settings: FakeOpenAIServer,
    fake_graph: FakeGraphAPI,
    post: Any,
) -> None:
    session = make_session(instance)
    long_text = "Preparamos a coleta assim: " + "frasco estéril, " * 20
    asked(session, long_text)
    openai_settings.queue_text('{"s":1}Perfeito.')

    post(text_quoting("wamid.OUT01", body="Ok"))

    quote = " ".join(long_text.split())[:199].rstrip() + "…"
    assert history_of(openai_settings.requests[0])[-1] == {
        "role": "user",
        "content": f'(em resposta a: "{quote}") Ok',
    }


@pytest.mark.parametrize(
    "quoted",
    [
        pytest.param("wamid.NEVERSEEN", id="a message we never stored"),
        pytest.param("wamid.OTHERSESSION", id="another customer's message"),
    ],
)
def test_a_reply_quoting_a_message_not_in_the_session_reads_as_written(
    instance: Instance,
    openai_settings: FakeOpenAIServer,
    fake_graph: FakeGraphAPI,
    post: Any,
    quoted: str,
) -> None:
    session = make_session(instance)
    asked(session)
    other = baker.make(Session, instance=instance, customer_phone="5521988887777")
    baker.make(
        Message,
        session=other,
        direction=Direction.OUTBOUND,
        content="Sua coleta está marcada.",
        wa_message_id="wamid.OTHERSESSION",
    )
    openai_settings.queue_text('{"s":1}Certo, água de poço. Quantas amostras?')

    post(text_quoting(quoted))

    assert history_of(openai_settings.requests[0])[-1] == {"role": "user", "content": "De poço"}
