"""The dry-run sender: with no access token anywhere, or for a simulated session, a reply is stored
as sent with a ``sim.`` wamid and nothing reaches the Graph API; with a token the real path is
unchanged. The fake Graph API is always listening, so a stray request would show."""

import logging
import re
from uuid import uuid4

import pytest
from pytest_django import Settings

from conversations.models import Direction, Message, Session
from conversations.sending import (
    ReadReceipt,
    SendOutcome,
    outbound_message_send,
    read_receipt_for,
    read_receipt_send,
)
from conversations.sending.worker import graph_client, send_message
from tests import baker_recipes as recipes
from tests.fakes.graph_server import FakeGraphAPI
from tests.helpers.conversation_rows import reply
from whatsapp.client import GraphClient, is_simulated_wamid

pytestmark = pytest.mark.django_db

SIMULATED_WAMID = re.compile(
    r"^sim\.[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}$"
)


@pytest.fixture
def no_token(fake_graph: FakeGraphAPI, settings: Settings) -> FakeGraphAPI:
    """The `make run` default: no WHATSAPP_ACCESS_TOKEN (the fake Graph API still listens)."""
    settings.WHATSAPP_ACCESS_TOKEN = ""
    return fake_graph


def receipt_of(session: Session, message: Message) -> ReadReceipt:
    receipt = read_receipt_for(session, message)
    assert receipt is not None
    return receipt


def sent_fields(message: Message) -> tuple[str, int, int | None, str]:
    message.refresh_from_db()
    return (
        message.delivery_status,
        message.send_attempts,
        message.delivery_error_code,
        message.delivery_error_title,
    )


def test_without_any_token_the_reply_is_stored_as_sent_simulated_and_nothing_is_posted(
    no_token: FakeGraphAPI, session: Session, caplog: pytest.LogCaptureFixture
) -> None:
    message = reply(session, "Olá, Maria!")

    with caplog.at_level(logging.INFO, logger="conversations.sending"):
        outcome = send_message.apply(args=(message.pk,)).get()

    assert outcome == "sent"
    assert no_token.requests == []
    assert sent_fields(message) == ("sent", 1, None, "")
    assert SIMULATED_WAMID.match(message.wa_message_id or "")
    assert is_simulated_wamid(message.wa_message_id) is True
    [record] = [r for r in caplog.records if r.getMessage() == "whatsapp_send_simulated"]
    assert record.message_id == message.pk  # type: ignore[attr-defined]
    assert "whatsapp_message_sent" not in [r.getMessage() for r in caplog.records]


def test_the_simulated_log_line_carries_the_message_id_and_why_only(
    no_token: FakeGraphAPI, session: Session, caplog: pytest.LogCaptureFixture
) -> None:
    message = reply(session, "Seu CPF 123.456.789-09 foi anotado.")
    standard = set(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}

    with caplog.at_level(logging.INFO, logger="conversations.sending"):
        send_message.apply(args=(message.pk,)).get()

    [record] = [r for r in caplog.records if r.getMessage() == "whatsapp_send_simulated"]
    assert {k: v for k, v in record.__dict__.items() if k not in standard} == {
        "message_id": message.pk,
        "reason": "no_access_token",
    }


def test_every_part_of_a_split_answer_is_simulated_in_order(
    no_token: FakeGraphAPI, session: Session
) -> None:
    turn = uuid4()
    parts = [reply(session, f"parte {i}", turn_id=turn, part_index=i) for i in range(3)]

    send_message.apply(args=(parts[0].pk,)).get()

    assert no_token.requests == []
    wamids = [Message.objects.get(pk=p.pk).wa_message_id or "" for p in parts]
    assert [is_simulated_wamid(w) for w in wamids] == [True, True, True]
    assert len(set(wamids)) == 3


def test_without_any_token_mark_read_posts_nothing(
    no_token: FakeGraphAPI, session: Session
) -> None:
    inbound = recipes.inbound.make(session=session, wa_message_id="wamid.IN01")

    assert read_receipt_send(receipt_of(session, inbound), client=graph_client()) is True
    assert no_token.requests == []


def test_the_instance_s_own_token_sends_for_real_even_without_the_default(
    no_token: FakeGraphAPI, session: Session
) -> None:
    session.instance.access_token = "instance-token"
    session.instance.save()
    message = reply(session)

    assert send_message.apply(args=(message.pk,)).get() == "sent"

    [request] = no_token.requests
    assert request.headers["Authorization"] == "Bearer instance-token"
    message.refresh_from_db()
    assert message.wa_message_id == "wamid.FAKE0001"


def test_with_a_token_the_real_path_is_unchanged(
    fake_graph: FakeGraphAPI, session: Session, caplog: pytest.LogCaptureFixture
) -> None:
    message = reply(session, "Olá!")

    with caplog.at_level(logging.INFO, logger="conversations.sending"):
        assert send_message.apply(args=(message.pk,)).get() == "sent"

    [request] = fake_graph.sends
    assert request.headers["Authorization"] == "Bearer test-access-token"
    assert request.json["text"] == {"body": "Olá!"}
    message.refresh_from_db()
    assert (message.wa_message_id, message.delivery_status) == ("wamid.FAKE0001", "sent")
    assert is_simulated_wamid(message.wa_message_id) is False
    events = [r.getMessage() for r in caplog.records]
    assert ("whatsapp_message_sent" in events, "whatsapp_send_simulated" in events) == (
        True,
        False,
    )


def test_a_simulated_session_is_never_sent_even_with_a_token(
    fake_graph: FakeGraphAPI, session: Session, caplog: pytest.LogCaptureFixture
) -> None:
    Session.objects.filter(pk=session.pk).update(is_simulated=True)
    message = reply(session)
    read = recipes.inbound.make(session=session, wa_message_id="wamid.IN02")

    with (
        caplog.at_level(logging.INFO, logger="conversations.sending"),
        GraphClient(base_url=fake_graph.base_url) as client,
    ):
        outcome = outbound_message_send(message_id=message.pk, client=client)
    [record] = [r for r in caplog.records if r.getMessage() == "whatsapp_send_simulated"]
    assert record.reason == "simulated_session"  # type: ignore[attr-defined]
    read_receipt_send(receipt_of(Session.objects.get(pk=session.pk), read), client=graph_client())

    assert outcome is SendOutcome.SENT
    assert fake_graph.requests == []
    message.refresh_from_db()
    assert (is_simulated_wamid(message.wa_message_id), message.delivery_status) == (True, "sent")
    assert Message.objects.filter(direction=Direction.OUTBOUND).count() == 1


def test_the_send_task_never_sends_a_simulated_session_s_reply_even_with_a_token(
    fake_graph: FakeGraphAPI, session: Session
) -> None:
    """`sending.sender_for` on its own: the task builds the real Graph client (a token is set),
    and the session's flag alone keeps the reply home."""
    Session.objects.filter(pk=session.pk).update(is_simulated=True)
    message = reply(session, "Olá!")

    assert send_message.apply(args=(message.pk,)).get() == "sent"

    assert fake_graph.requests == []
    message.refresh_from_db()
    assert (is_simulated_wamid(message.wa_message_id), message.delivery_status) == (True, "sent")
