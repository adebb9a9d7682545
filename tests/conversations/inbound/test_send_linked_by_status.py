"""A send the Graph API accepted but whose wamid we never stored (the worker died in between) is
found through the ``biz_opaque_callback_data`` Meta echoes in its status callbacks, so the retry
does not send it twice (whatsapp.status_order)."""

from typing import Any

import pytest
from django.test import Client
from model_bakery import baker

from conversations.models import DeliveryStatusEvent, Direction, Message, Session
from conversations.sending.worker import send_message
from tests import baker_recipes as recipes
from tests.fakes.graph_server import FakeGraphAPI
from tests.helpers.meta_payloads import (
    encode,
    load_fixture,
    signed_post,
)
from whatsapp.payload import parse_webhook_body
from whatsapp.status_order import message_id_from_callback, send_callback_data

pytestmark = pytest.mark.django_db


def status_body(status: str, *, wamid: str, callback_data: Any) -> bytes:
    document = load_fixture("status_delivered")
    item = document["entry"][0]["changes"][0]["value"]["statuses"][0]
    item |= {"id": wamid, "status": status}
    if callback_data is not None:
        item["biz_opaque_callback_data"] = callback_data
    return encode(document)


def crashed_send(session: Session) -> Message:
    """A reply whose send was claimed and (unknown to us) accepted before its worker died."""
    return recipes.reply.make(session=session, content="Olá! Como posso ajudar?", send_attempts=1)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ("message:42", 42),
        ("message:9223372036854775807", 9223372036854775807),
        ("message:0", None),
        ("message:042", None),
        ("message:42 ", None),
        ("message:", None),
        ("campaign:42", None),
        ("", None),
    ],
)
def test_the_callback_data_names_a_message_only_in_its_exact_form(
    data: str, expected: int | None
) -> None:
    assert message_id_from_callback(data) == expected


def test_a_send_names_its_message() -> None:
    assert send_callback_data(42) == "message:42"


@pytest.mark.parametrize(
    ("callback_data", "parsed"),
    [
        ("message:7", "message:7"),
        (None, ""),
        (7, ""),
        ("x" * 513, ""),
    ],
)
def test_the_parser_keeps_a_plausible_callback_data_and_ignores_the_rest(
    callback_data: Any, parsed: str
) -> None:
    payload = parse_webhook_body(status_body("sent", wamid="wamid.X1", callback_data=callback_data))

    [status] = payload.statuses
    assert (status.wamid, status.callback_data) == ("wamid.X1", parsed)


def test_a_status_naming_a_message_without_wamid_links_it_and_the_retry_sends_nothing(
    client: Client, session: Session, fake_graph: FakeGraphAPI
) -> None:
    message = crashed_send(session)

    response = signed_post(
        client,
        status_body("delivered", wamid="wamid.LOST1", callback_data=send_callback_data(message.pk)),
    )
    assert response.status_code == 200

    message.refresh_from_db()
    assert (message.wa_message_id, message.delivery_status) == ("wamid.LOST1", "delivered")
    assert list(DeliveryStatusEvent.objects.values_list("message_id", "status")) == [
        (message.pk, "delivered")
    ]

    assert send_message.apply(args=(message.pk,)).get() == "already_sent"
    assert fake_graph.requests == []
    message.refresh_from_db()
    assert (message.wa_message_id, message.delivery_status) == ("wamid.LOST1", "delivered")


def test_a_status_never_relinks_a_message_that_has_its_wamid(
    client: Client, session: Session
) -> None:
    message = crashed_send(session)
    Message.objects.filter(pk=message.pk).update(wa_message_id="wamid.OURS", delivery_status="sent")

    signed_post(
        client,
        status_body("delivered", wamid="wamid.OTHER", callback_data=send_callback_data(message.pk)),
    )

    message.refresh_from_db()
    assert (message.wa_message_id, message.delivery_status) == ("wamid.OURS", "sent")
    # The stubs type the nullable foreign key's column as an int.
    assert list(DeliveryStatusEvent.objects.values_list("wa_message_id", "message_id")) == [  # type: ignore[comparison-overlap]
        ("wamid.OTHER", None)
    ]


def test_a_status_naming_an_inbound_message_links_nothing(client: Client, session: Session) -> None:
    inbound = baker.make(Message, session=session, direction=Direction.INBOUND, content="Oi")

    signed_post(
        client,
        status_body("sent", wamid="wamid.NEW", callback_data=send_callback_data(inbound.pk)),
    )

    inbound.refresh_from_db()
    assert inbound.wa_message_id is None


def test_a_status_naming_another_instance_s_message_links_nothing(
    client: Client, session: Session
) -> None:
    """The status comes to our instance 100000000000001 but names a message of another one."""
    elsewhere = recipes.session.make(
        instance=recipes.instance.make(phone_number_id="100000000000002", name="Outra")
    )
    message = crashed_send(elsewhere)

    signed_post(
        client,
        status_body("read", wamid="wamid.ALIEN", callback_data=send_callback_data(message.pk)),
    )

    message.refresh_from_db()
    assert (message.wa_message_id, message.delivery_status) == (None, "pending")
    assert list(DeliveryStatusEvent.objects.values_list("wa_message_id", "message_id")) == [  # type: ignore[comparison-overlap]
        ("wamid.ALIEN", None)
    ]


def test_a_status_naming_a_reply_never_sent_links_nothing_and_its_send_still_runs(
    client: Client, session: Session, fake_graph: FakeGraphAPI
) -> None:
    """A staff reply whose send was never attempted (queued): a status naming it is no status
    of it, so it does not turn "read" and is still sent."""
    message = recipes.reply.make(session=session, content="Olá, aqui é a Ana.", send_attempts=0)

    signed_post(
        client,
        status_body("read", wamid="wamid.FORGED", callback_data=send_callback_data(message.pk)),
    )

    message.refresh_from_db()
    assert (message.wa_message_id, message.delivery_status) == (None, "pending")
    assert send_message.apply(args=(message.pk,)).get() == "sent"
    [sent] = fake_graph.sends
    assert sent.json["text"] == {"body": "Olá, aqui é a Ana."}


@pytest.mark.django_db(transaction=True)
def test_our_own_success_after_an_early_linked_status_never_moves_it_back(
    client: Client, session: Session, fake_graph: FakeGraphAPI
) -> None:
    """The status arrives while the sending worker is still alive: its success store must not
    turn `delivered` back into `sent`."""
    message = recipes.reply.make(
        session=session, content="Olá! Como posso ajudar?", delivery_status=""
    )
    fake_graph.respond_json(200, {"messages": [{"id": "wamid.FAST"}]})

    def deliver_status_first(request: Any) -> None:  # Meta's callback beats our commit
        signed_post(
            client,
            status_body(
                "delivered", wamid="wamid.FAST", callback_data=send_callback_data(message.pk)
            ),
        )

    fake_graph.on_request = deliver_status_first
    assert send_message.apply(args=(message.pk,)).get() == "sent"

    message.refresh_from_db()
    assert (message.wa_message_id, message.delivery_status) == ("wamid.FAST", "delivered")
