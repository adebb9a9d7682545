"""The send's steps (conversations/sending/): the parts sent together, the claim, storing the
wamid forward only, the early statuses folded in, the read receipt, and their statements."""

import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.db.models import QuerySet
from django.utils import timezone
from model_bakery import baker

from conversations.models import (
    SUPERSEDED,
    DeliveryStatus,
    DeliveryStatusEvent,
    Direction,
    Instance,
    Message,
    Session,
)
from conversations.sending import (
    ReadReceipt,
    SendOutcome,
    outbound_message_send,
    read_receipt_for,
    read_receipt_send,
)
from conversations.sending.claim import claim_release, message_claim, message_store_sent
from conversations.sending.turn_parts import turn_parts
from tests.fakes.graph_server import FakeGraphAPI
from whatsapp.client import GraphClient

pytestmark = pytest.mark.django_db


def make(session: Session, **fields: Any) -> Message:
    fields.setdefault("direction", Direction.OUTBOUND)
    message: Message = baker.make(Message, session=session, **fields)
    return message


def test_the_parts_sent_together_are_the_turn_s_outbound_unsuperseded_ones_in_order() -> None:
    session, other = baker.make(Session, _quantity=2)
    turn, lone_turn = uuid.uuid4(), uuid.uuid4()
    # Parts stored out of order, one superseded, an inbound message and another session's
    # message of the same turn id, a part index tie broken by id.
    third = make(session, turn_id=turn, part_index=2)
    first = make(session, turn_id=turn, part_index=0)
    second = make(session, turn_id=turn, part_index=1)
    tie = make(session, turn_id=turn, part_index=1)
    superseded = make(session, turn_id=turn, part_index=3, error=SUPERSEDED)
    inbound = make(session, turn_id=turn, direction=Direction.INBOUND)
    elsewhere = make(other, turn_id=turn, part_index=0)
    without_turn = make(session)
    alone = make(session, turn_id=lone_turn)
    superseded_alone = make(session, error=SUPERSEDED)
    turn_parts_in_order = [first.pk, second.pk, tie.pk, third.pk]
    for part in (first, second, third, tie):
        assert turn_parts(part.pk) == turn_parts_in_order
    assert turn_parts(elsewhere.pk) == [elsewhere.pk]
    assert turn_parts(without_turn.pk) == [without_turn.pk]
    assert turn_parts(alone.pk) == [alone.pk]
    assert turn_parts(inbound.pk) == turn_parts(superseded.pk) == []
    assert turn_parts(superseded_alone.pk) == []
    assert turn_parts(10**9) == []


STORED = (
    "wa_message_id",
    "delivery_status",
    "delivery_status_at",
    "delivery_error_code",
    "delivery_error_title",
)


def stored(rows: "QuerySet[Message]") -> list[tuple[Any, ...]]:
    return [tuple(row) for row in rows.order_by("id").values_list(*STORED)]


@pytest.mark.parametrize("status", ["", *DeliveryStatus.values])
def test_storing_the_wamid_moves_the_status_to_sent_forward_only(status: str) -> None:
    before = timezone.now() - timedelta(minutes=5)
    message = make(
        baker.make(Session),
        delivery_status=status,
        delivery_status_at=before,
        delivery_error_code=131_047,
        delivery_error_title="Erro anterior",
    )

    message_store_sent(message, "wamid.OURS")

    [row] = stored(Message.objects.filter(pk=message.pk))
    if status in ("", "pending"):
        assert row[:2] == ("wamid.OURS", "sent")
        assert row[2] > before
        assert row[3:] == (None, "")
    else:
        assert row == ("wamid.OURS", status, before, 131_047, "Erro anterior")


def test_a_status_that_arrived_before_the_wamid_is_still_folded_in() -> None:
    message = make(baker.make(Session), delivery_status=DeliveryStatus.PENDING)
    baker.make(DeliveryStatusEvent, wa_message_id="wamid.EARLY", status="delivered", message=None)
    baker.make(DeliveryStatusEvent, wa_message_id="wamid.OTHER", status="read", message=None)

    message_store_sent(message, "wamid.EARLY")

    message.refresh_from_db()
    assert (message.wa_message_id, message.delivery_status) == ("wamid.EARLY", "delivered")
    assert list(
        DeliveryStatusEvent.objects.order_by("wa_message_id").values_list("message_id", flat=True)
    ) == [message.pk, None]


def test_a_read_receipt_is_made_from_the_loaded_session_with_the_token_to_send_with(
    fake_graph: FakeGraphAPI, settings: Any, django_assert_num_queries: Any
) -> None:
    settings.WHATSAPP_ACCESS_TOKEN = "default-token"
    with_token = baker.make(Instance, phone_number_id="100000000000001", access_token="tok-1")
    without_token = baker.make(Instance, phone_number_id="100000000000002", access_token="")
    real = baker.make(Session, instance=with_token)
    simulated = baker.make(Session, instance=with_token, is_simulated=True)
    tokenless = baker.make(Session, instance=without_token)
    sessions = {s.pk: s for s in Session.objects.select_related("instance")}

    def receipt(session: Session, wamid: str | None) -> ReadReceipt | None:
        message = make(session, direction=Direction.INBOUND, wa_message_id=wamid)
        with django_assert_num_queries(0):  # all of it is in the turn's loaded session
            return read_receipt_for(sessions[session.pk], message)

    receipts = [
        receipt(real, "wamid.READ"),
        receipt(simulated, "wamid.SIM"),
        receipt(tokenless, "wamid.DEFAULT"),
        receipt(real, None),
    ]

    assert [
        (r.wamid, r.phone_number_id, r.access_token, r.simulated) if r else None for r in receipts
    ] == [
        ("wamid.READ", "100000000000001", "tok-1", False),
        ("wamid.SIM", "100000000000001", "tok-1", True),
        ("wamid.DEFAULT", "100000000000002", "default-token", False),
        None,
    ]
    # The token never shows in a receipt's repr (logs, tracebacks).
    assert "tok-1" not in repr(receipts[0])


def test_a_send_and_a_read_receipt_cost_these_statements(
    fake_graph: FakeGraphAPI, django_assert_num_queries: Any
) -> None:
    instance = baker.make(Instance, phone_number_id="100000000000001", access_token="tok-1")
    session = baker.make(Session, instance=instance, customer_phone="5511988887777")
    reply = make(session, turn_id=uuid.uuid4(), delivery_status="")
    received = make(session, direction=Direction.INBOUND, wa_message_id="wamid.IN")
    client = GraphClient(base_url=fake_graph.base_url)

    # The turn's parts (1); the claim: savepoint, locked read, update, release (4); the store:
    # savepoint, wamid and status, early statuses, release (4).
    with django_assert_num_queries(9):
        assert outbound_message_send(message_id=reply.pk, client=client) == SendOutcome.SENT
    # A read receipt reads nothing: the turn has it all.
    receipt = read_receipt_for(session, received)
    assert receipt is not None
    with django_assert_num_queries(0):
        assert read_receipt_send(receipt, client=client) is True
    assert [r.json.get("type", r.json.get("status")) for r in fake_graph.requests] == [
        "text",
        "read",
    ]


def test_the_claim_writes_its_four_fields_and_holds_the_message_for_this_worker() -> None:
    instance = baker.make(Instance, phone_number_id="100000000000001", access_token="tok-1")
    session = baker.make(Session, instance=instance, customer_phone="5511988887777")
    an_hour_ago = timezone.now() - timedelta(hours=1)
    reply = make(
        session,
        turn_id=uuid.uuid4(),
        content="Olá!",
        delivery_status=DeliveryStatus.PENDING,
        delivery_error_code=131_000,
        send_attempts=2,
        delivery_status_at=an_hour_ago,
    )

    claimed = message_claim(reply.pk)

    assert isinstance(claimed, Message)
    assert (claimed.session.customer_phone, claimed.session.instance.access_token) == (
        "5511988887777",
        "tok-1",
    )
    stored_row = Message.objects.get(pk=reply.pk)
    assert (stored_row.delivery_status, stored_row.send_attempts) == ("pending", 3)
    assert stored_row.delivery_status_at == stored_row.last_send_attempt_at
    assert stored_row.delivery_status_at is not None
    assert stored_row.delivery_status_at > an_hour_ago
    assert (stored_row.content, stored_row.delivery_error_code) == ("Olá!", 131_000)
    assert message_claim(reply.pk) == SendOutcome.IN_FLIGHT
    with pytest.raises(Message.DoesNotExist):
        message_claim(reply.pk + 1000)


def test_releasing_a_claim_leaves_a_message_the_sweep_failed_meanwhile_failed() -> None:
    session = baker.make(Session)
    claimed = make(session, delivery_status=DeliveryStatus.PENDING, send_attempts=1)
    expired = make(
        session,
        delivery_status=DeliveryStatus.FAILED,
        delivery_error_title="Não enviada: passou o prazo de 24 horas para responder ao cliente",
        send_attempts=1,
    )

    for message in (claimed, expired):
        claim_release(message, code=None, title="Service unavailable")

    rows = Message.objects.filter(pk__in=[claimed.pk, expired.pk]).order_by("pk")
    assert list(
        rows.values_list("delivery_status", "delivery_status_at", "delivery_error_title")
    ) == [
        ("pending", None, "Service unavailable"),
        (
            "failed",
            expired.delivery_status_at,
            "Não enviada: passou o prazo de 24 horas para responder ao cliente",
        ),
    ]
