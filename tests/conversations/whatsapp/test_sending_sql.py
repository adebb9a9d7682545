"""The send's hand-written statements (conversations/sending.py) against the ORM queries they
replace, quoted in their comments: same rows, same outcome, on every case the send meets."""

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
    _claim,
    _store_success,
    _turn_chain,
    outbound_message_send,
    read_receipt_for,
    read_receipt_send,
)
from tests.fakes.graph_server import FakeGraphAPI
from whatsapp.client import GraphClient
from whatsapp.statuses import statuses_before

pytestmark = pytest.mark.django_db


def orm_turn_chain(message_id: int) -> list[int]:
    origin = (
        Message.objects.filter(pk=message_id, direction=Direction.OUTBOUND)
        .not_superseded()
        .values("session_id", "turn_id")
        .first()
    )
    if origin is None:
        return []
    if origin["turn_id"] is None:
        return [message_id]
    return list(
        Message.objects.filter(
            session_id=origin["session_id"],
            turn_id=origin["turn_id"],
            direction=Direction.OUTBOUND,
        )
        .not_superseded()
        .order_by("part_index", "id")
        .values_list("id", flat=True)
    )


def make(session: Session, **fields: Any) -> Message:
    fields.setdefault("direction", Direction.OUTBOUND)
    message: Message = baker.make(Message, session=session, **fields)
    return message


def test_the_turn_chain_is_the_orm_s_in_every_case() -> None:
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
    cases = [first, second, third, tie, superseded, inbound, elsewhere, without_turn, alone]

    for message in [*cases, superseded_alone]:
        assert _turn_chain(message.pk) == orm_turn_chain(message.pk), message
    assert _turn_chain(second.pk) == [first.pk, second.pk, tie.pk, third.pk]
    assert _turn_chain(without_turn.pk) == [without_turn.pk]
    assert _turn_chain(inbound.pk) == _turn_chain(superseded.pk) == []
    assert _turn_chain(10**9) == []


def orm_store_success(message: Message, wamid: str, now: Any) -> None:
    Message.objects.filter(pk=message.pk).update(wa_message_id=wamid)
    Message.objects.filter(
        pk=message.pk, delivery_status__in=statuses_before(DeliveryStatus.SENT)
    ).update(
        delivery_status=DeliveryStatus.SENT,
        delivery_status_at=now,
        delivery_error_code=None,
        delivery_error_title="",
    )


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
def test_storing_the_wamid_moves_the_status_forward_only_as_the_orm_did(status: str) -> None:
    before = timezone.now() - timedelta(minutes=5)
    fields = {
        "delivery_status": status,
        "delivery_status_at": before,
        "delivery_error_code": 131_047,
        "delivery_error_title": "Erro anterior",
    }
    session = baker.make(Session)
    ours, orm = make(session, **fields), make(session, **fields)

    _store_success(ours, "wamid.OURS")
    orm_store_success(orm, "wamid.ORM", now=timezone.now())

    [mine, theirs] = stored(Message.objects.filter(pk__in=[ours.pk, orm.pk]))
    assert (mine[0], theirs[0]) == ("wamid.OURS", "wamid.ORM")
    assert (mine[1], *mine[3:]) == (theirs[1], *theirs[3:])
    assert (mine[2] == before) is (theirs[2] == before)
    if status in statuses_before(DeliveryStatus.SENT):
        assert mine[1:] == ("sent", mine[2], None, "")
        assert mine[2] > before
    else:
        assert mine[1:] == (status, before, 131_047, "Erro anterior")


def test_a_status_that_arrived_before_the_wamid_is_still_folded_in() -> None:
    message = make(baker.make(Session), delivery_status=DeliveryStatus.PENDING)
    baker.make(DeliveryStatusEvent, wa_message_id="wamid.EARLY", status="delivered", message=None)
    baker.make(DeliveryStatusEvent, wa_message_id="wamid.OTHER", status="read", message=None)

    _store_success(message, "wamid.EARLY")

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

    # The chain (1); the claim: savepoint, locked read, update, release (4); the store:
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


def field_values(row: Any) -> dict[str, Any]:
    return {f.attname: getattr(row, f.attname) for f in type(row)._meta.concrete_fields}


def test_the_claim_reads_and_stores_what_the_orm_did() -> None:
    instance = baker.make(Instance, phone_number_id="100000000000001", access_token="tok-1")
    session = baker.make(
        Session, instance=instance, customer_phone="5511988887777", technical_data={"q": 1}
    )
    reply = make(
        session,
        turn_id=uuid.uuid4(),
        content="Olá!",
        json_part={"s": 1},
        delivery_status=DeliveryStatus.PENDING,
        send_attempts=2,
        delivery_status_at=timezone.now() - timedelta(hours=1),
    )
    orm = Message.objects.select_related("session__instance").get(pk=reply.pk)

    claimed = _claim(reply.pk)

    assert isinstance(claimed, Message)
    assert field_values(claimed.session) == field_values(orm.session)
    assert field_values(claimed.session.instance) == field_values(orm.session.instance)
    assert claimed.session.instance.access_token == "tok-1"
    read = field_values(claimed)
    changed = {"delivery_status_at", "last_send_attempt_at", "send_attempts"}
    assert {k: v for k, v in read.items() if k not in changed} == {
        k: v for k, v in field_values(orm).items() if k not in changed
    }
    assert claimed.send_attempts == 3
    assert claimed.delivery_status_at is not None
    assert claimed.last_send_attempt_at == claimed.delivery_status_at
    # What the ORM's save(update_fields=CLAIM_FIELDS) stored, and nothing else.
    stored = Message.objects.get(pk=reply.pk)
    assert field_values(stored) == read
    assert _claim(reply.pk) == SendOutcome.IN_FLIGHT
    with pytest.raises(Message.DoesNotExist):
        _claim(reply.pk + 1000)
