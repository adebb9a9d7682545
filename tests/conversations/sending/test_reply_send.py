"""A turn's reply sent at once by the worker thread that committed it (`reply_send`), with the
real httpx client against a fake Graph API on 127.0.0.1; what may succeed later is handed to the
`send_message` task (here: to the `send_later` each test collects)."""

import logging
import uuid
from typing import Any

import httpx
import pytest
from django.utils import timezone
from model_bakery import baker

from conversations.models import Direction, Message, Session
from conversations.sending.worker import reply_send
from tests.fakes.graph_server import FakeGraphAPI
from tests.helpers.meta_payloads import CUSTOMER_PHONE
from whatsapp.client import GraphClient

pytestmark = pytest.mark.django_db


def crashing_client(base_url: str) -> GraphClient:
    """The real client, but its HTTP transport fails with an error that is not the Graph API's."""

    def crash(request: httpx.Request) -> httpx.Response:
        raise RuntimeError("connection pool exhausted")

    return GraphClient(base_url=base_url, http=httpx.Client(transport=httpx.MockTransport(crash)))


@pytest.fixture
def handed_to_task() -> list[int]:
    return []


def reply(session: Session, content: str = "Olá! Como posso ajudar?", **fields: Any) -> Message:
    message: Message = baker.make(
        Message, session=session, direction=Direction.OUTBOUND, content=content, **fields
    )
    return message


def test_the_reply_is_sent_at_once_with_the_process_client_and_no_task_is_needed(
    fake_graph: FakeGraphAPI, known_customer: Session, handed_to_task: list[int]
) -> None:
    message = reply(known_customer)

    reply_send(message.pk, send_later=handed_to_task.append)

    [sent] = fake_graph.sends
    assert (sent.json["to"], sent.json["text"]) == (
        CUSTOMER_PHONE,
        {"body": "Olá! Como posso ajudar?"},
    )
    message.refresh_from_db()
    assert (message.delivery_status, message.send_attempts, message.wa_message_id) == (
        "sent",
        1,
        "wamid.FAKE0001",
    )
    assert handed_to_task == []


def test_a_split_reply_goes_out_in_order_from_its_first_part(
    fake_graph: FakeGraphAPI, known_customer: Session, handed_to_task: list[int]
) -> None:
    turn = uuid.uuid4()
    first = reply(known_customer, "Primeira parte.", turn_id=turn, part_index=0)
    second = reply(known_customer, "Segunda parte.", turn_id=turn, part_index=1)

    reply_send(first.pk, send_later=handed_to_task.append)

    assert [r.json["text"]["body"] for r in fake_graph.sends] == [
        "Primeira parte.",
        "Segunda parte.",
    ]
    assert Message.objects.get(pk=second.pk).delivery_status == "sent"
    assert handed_to_task == []


def test_a_transient_graph_error_releases_the_claim_and_hands_the_reply_to_the_task(
    fake_graph: FakeGraphAPI, known_customer: Session, handed_to_task: list[int]
) -> None:
    fake_graph.respond_error(503, 2, "Service temporarily unavailable")
    message = reply(known_customer)

    reply_send(message.pk, send_later=handed_to_task.append)

    assert len(fake_graph.sends) == 1
    assert handed_to_task == [message.pk]
    message.refresh_from_db()
    # Claimable at once by the task's retry; the error stays visible in the admin meanwhile.
    assert (
        message.delivery_status,
        message.delivery_status_at,
        message.delivery_error_code,
        message.send_attempts,
        message.wa_message_id,
    ) == ("pending", None, 2, 1, None)


def test_a_permanent_graph_error_fails_the_reply_and_hands_nothing_to_the_task(
    fake_graph: FakeGraphAPI, known_customer: Session, handed_to_task: list[int]
) -> None:
    fake_graph.respond_error(400, 131047, "Re-engagement message")
    message = reply(known_customer)

    reply_send(message.pk, send_later=handed_to_task.append)

    message.refresh_from_db()
    assert (message.delivery_status, message.delivery_error_code) == ("failed", 131047)
    assert handed_to_task == []


def test_an_unexpected_error_is_logged_and_the_reply_handed_to_the_task(
    fake_graph: FakeGraphAPI,
    known_customer: Session,
    handed_to_task: list[int],
    caplog: pytest.LogCaptureFixture,
) -> None:
    message = reply(known_customer)
    client = crashing_client(fake_graph.base_url)

    with caplog.at_level(logging.ERROR, logger="conversations.sending.worker"):
        reply_send(message.pk, client=client, send_later=handed_to_task.append)

    assert handed_to_task == [message.pk]
    [record] = [r for r in caplog.records if r.message == "whatsapp_send_handed_to_task"]
    assert (record.message_id, record.error) == (  # type: ignore[attr-defined]
        message.pk,
        "RuntimeError('connection pool exhausted')",
    )
    message.refresh_from_db()
    # Claimed and unsent: the task (or, once the claim expires, the sweep) sends it.
    assert (message.delivery_status, message.send_attempts, message.wa_message_id) == (
        "pending",
        1,
        None,
    )
    assert message.delivery_status_at is not None
    assert timezone.now() >= message.delivery_status_at
    assert fake_graph.sends == []
