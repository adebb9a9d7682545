"""The sender and mark-read, through the real Celery tasks (eager) and the real httpx client,
against a fake Graph API on 127.0.0.1."""

import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.db import DatabaseError, connections, transaction
from django.utils import timezone
from model_bakery import baker

from conversations.models import (
    SUPERSEDED,
    DeliveryStatusEvent,
    Direction,
    Instance,
    Message,
    Session,
)
from conversations.sending import (
    PREVIOUS_PART_FAILED,
    SendOutcome,
    outbound_message_send,
    read_receipt_for,
    read_receipt_send,
)
from conversations.sending.worker import graph_client, send_message
from tests import baker_recipes as recipes
from tests.fakes.graph_server import FakeGraphAPI, GraphRequest
from tests.helpers.meta_payloads import CUSTOMER_PHONE, CUSTOMER_USER_ID
from whatsapp.client import GraphClient

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("eager_retries")]

PNID = "100000000000001"


@pytest.fixture
def session(known_customer: Session) -> Session:
    """The fixtures' customer, known by phone and by user id: the phone wins."""
    return known_customer


def outbound(session: Session, content: str = "Olá! Como posso ajudar?", **fields: Any) -> Message:
    message: Message = baker.make(
        Message, session=session, direction=Direction.OUTBOUND, content=content, **fields
    )
    return message


def send(message: Message) -> str:
    outcome: str = send_message.apply(args=(message.pk,)).get()
    return outcome


def test_a_message_is_posted_with_the_exact_body_and_headers_and_its_wamid_stored(
    fake_graph: FakeGraphAPI, session: Session
) -> None:
    message = outbound(session)

    assert send(message) == "sent"

    [request] = fake_graph.requests
    assert request.path == f"/v23.0/{PNID}/messages"
    assert request.headers["Authorization"] == "Bearer test-access-token"
    assert request.headers["Content-Type"] == "application/json"
    assert request.json == {
        "messaging_product": "whatsapp",
        "recipient_type": "individual",
        "to": CUSTOMER_PHONE,
        "type": "text",
        "text": {"body": "Olá! Como posso ajudar?"},
        "biz_opaque_callback_data": f"message:{message.pk}",
    }
    message.refresh_from_db()
    assert (
        message.wa_message_id,
        message.delivery_status,
        message.send_attempts,
        message.delivery_error_code,
    ) == ("wamid.FAKE0001", "sent", 1, None)


def test_an_interactive_message_is_posted_with_its_buttons_and_its_body_as_staff_read_it(
    fake_graph: FakeGraphAPI, session: Session
) -> None:
    buttons = {
        "type": "button",
        "body": {"text": "Posso confirmar?"},
        "action": {
            "buttons": [{"type": "reply", "reply": {"id": "confirm", "title": "Confirmar"}}]
        },
    }
    message = outbound(session, "Posso confirmar?", message_type="interactive", interactive=buttons)

    assert send(message) == "sent"

    assert fake_graph.requests[0].json == {
        "messaging_product": "whatsapp",
        "recipient_type": "individual",
        "to": CUSTOMER_PHONE,
        "type": "interactive",
        "interactive": {
            "type": "button",
            "body": {"text": "Posso confirmar?"},
            "action": {
                "buttons": [{"type": "reply", "reply": {"id": "confirm", "title": "Confirmar"}}]
            },
        },
        "biz_opaque_callback_data": f"message:{message.pk}",
    }


def test_the_instance_s_own_token_wins_over_the_default(
    fake_graph: FakeGraphAPI, session: Session
) -> None:
    session.instance.access_token = "instance-token"
    session.instance.save()

    send(outbound(session))

    assert fake_graph.requests[0].headers["Authorization"] == "Bearer instance-token"


def test_a_customer_without_phone_is_sent_to_by_user_id(
    fake_graph: FakeGraphAPI, session: Session
) -> None:
    session.customer_phone = ""
    session.save()

    send(outbound(session))

    assert fake_graph.requests[0].json["recipient"] == CUSTOMER_USER_ID
    assert "to" not in fake_graph.requests[0].json


def test_a_server_error_is_retried_and_then_succeeds(
    fake_graph: FakeGraphAPI, session: Session
) -> None:
    fake_graph.respond_error(500, 131000, "Something went wrong")
    message = outbound(session)

    assert send(message) == "sent"

    assert len(fake_graph.sends) == 2
    message.refresh_from_db()
    assert (message.wa_message_id, message.send_attempts, message.delivery_error_title) == (
        "wamid.FAKE0001",
        2,
        "",
    )


def test_a_closed_24_hour_window_is_not_retried_and_its_error_is_stored(
    fake_graph: FakeGraphAPI, session: Session, caplog: pytest.LogCaptureFixture
) -> None:
    fake_graph.respond_error(400, 131047, "Re-engagement message", "More than 24 hours")
    message = outbound(session)

    assert send(message) == "failed"

    assert len(fake_graph.sends) == 1
    message.refresh_from_db()
    assert (
        message.delivery_status,
        message.delivery_error_code,
        message.delivery_error_title,
        message.wa_message_id,
    ) == ("failed", 131047, "Re-engagement message", None)
    [record] = [r for r in caplog.records if r.message == "whatsapp_send_failed"]
    assert (vars(record)["code"], vars(record)["title"], vars(record)["message_id"]) == (
        131047,
        "Re-engagement message",
        message.pk,
    )


def test_retries_are_bounded_and_a_reply_inside_the_window_is_left_for_the_sweep(
    fake_graph: FakeGraphAPI, session: Session
) -> None:
    """Graph down longer than the task's retries: the last error is stored, the message stays
    unsent (not failed) so the unsent-messages sweep tries again until the 24-hour window."""
    # The first attempt and 6 retries.
    for _ in range(7):
        fake_graph.respond_error(400, 130429, "Rate limit hit")
    message = outbound(session)

    assert send(message) == "deferred"

    assert len(fake_graph.sends) == 7
    message.refresh_from_db()
    assert (
        message.delivery_status,
        message.delivery_status_at,
        message.delivery_error_code,
        message.send_attempts,
        message.wa_message_id,
    ) == ("pending", None, 130429, 7, None)
    assert message.last_send_attempt_at is not None
    assert timezone.now() - message.last_send_attempt_at < timedelta(seconds=30)


def test_the_last_retry_of_a_reply_past_the_window_stores_the_error_as_failed(
    fake_graph: FakeGraphAPI, session: Session
) -> None:
    for _ in range(7):
        fake_graph.respond_error(500, 1, "An unknown error occurred")
    message = outbound(session)
    Message.objects.filter(pk=message.pk).update(
        created_at=timezone.now() - timedelta(hours=24, seconds=1)
    )

    assert send(message) == "failed"

    message.refresh_from_db()
    assert (message.delivery_status, message.delivery_error_code, message.send_attempts) == (
        "failed",
        1,
        7,
    )


def test_a_second_send_of_the_same_message_sends_nothing(
    fake_graph: FakeGraphAPI, session: Session
) -> None:
    message = outbound(session)

    send(message)
    assert send(message) == "already_sent"

    assert len(fake_graph.sends) == 1


def test_a_failed_message_is_not_sent_again(fake_graph: FakeGraphAPI, session: Session) -> None:
    message = outbound(session, delivery_status="failed")

    assert send(message) == "failed"
    assert fake_graph.requests == []


def test_a_message_claimed_by_another_worker_is_left_to_it(
    fake_graph: FakeGraphAPI, session: Session
) -> None:
    message = outbound(
        session, delivery_status="pending", send_attempts=1, delivery_status_at=timezone.now()
    )

    assert send(message) == "in_flight"
    assert fake_graph.requests == []


def test_a_claim_older_than_the_claim_window_belongs_to_a_dead_worker(
    fake_graph: FakeGraphAPI, session: Session
) -> None:
    message = outbound(
        session,
        delivery_status="pending",
        send_attempts=1,
        delivery_status_at=timezone.now() - timedelta(minutes=2),
    )

    assert send(message) == "sent"
    message.refresh_from_db()
    assert message.send_attempts == 2


@pytest.mark.parametrize(
    "fields", [{"direction": Direction.INBOUND}, {"error": SUPERSEDED}], ids=["inbound", "draft"]
)
def test_inbound_messages_and_superseded_drafts_are_never_sent(
    fake_graph: FakeGraphAPI, session: Session, fields: dict[str, Any]
) -> None:
    message = baker.make(Message, session=session, **({"direction": Direction.OUTBOUND} | fields))

    assert send(message) == "skipped"
    assert fake_graph.requests == []


def test_the_parts_of_a_split_answer_go_out_in_order(
    fake_graph: FakeGraphAPI, session: Session
) -> None:
    turn = uuid.uuid4()
    # Created out of order on purpose: part_index decides.
    third = outbound(session, "parte 3", turn_id=turn, part_index=2)
    first = outbound(session, "parte 1", turn_id=turn, part_index=0)
    second = outbound(session, "parte 2", turn_id=turn, part_index=1)
    outbound(session, "rascunho", turn_id=turn, part_index=1, error=SUPERSEDED)

    assert send(third) == "sent"
    assert [r.json["text"]["body"] for r in fake_graph.sends] == ["parte 1", "parte 2", "parte 3"]
    for message, wamid in ((first, "wamid.FAKE0001"), (second, "wamid.FAKE0002")):
        message.refresh_from_db()
        assert message.wa_message_id == wamid
    # The task of another part finds everything sent.
    assert send(first) == "already_sent"
    assert len(fake_graph.sends) == 3


def test_a_part_refused_for_good_fails_the_parts_after_it_unsent(
    fake_graph: FakeGraphAPI, session: Session
) -> None:
    turn = uuid.uuid4()
    first = outbound(session, "parte 1", turn_id=turn, part_index=0)
    second = outbound(session, "parte 2", turn_id=turn, part_index=1)
    third = outbound(session, "parte 3", turn_id=turn, part_index=2)
    fake_graph.respond_json(200, None)  # part 1: accepted (the default answer)
    fake_graph.respond_error(400, 131026, "Message undeliverable")

    assert send(first) == "sent"

    assert [r.json["text"]["body"] for r in fake_graph.sends] == ["parte 1", "parte 2"]
    second.refresh_from_db()
    third.refresh_from_db()
    assert (second.delivery_status, second.delivery_error_code) == ("failed", 131026)
    assert (third.delivery_status, third.delivery_error_title, third.send_attempts) == (
        "failed",
        PREVIOUS_PART_FAILED,
        0,
    )


def test_a_part_waits_while_an_earlier_part_is_being_sent_elsewhere(
    fake_graph: FakeGraphAPI, session: Session
) -> None:
    turn = uuid.uuid4()
    outbound(
        session,
        "parte 1",
        turn_id=turn,
        part_index=0,
        delivery_status="pending",
        send_attempts=1,
        delivery_status_at=timezone.now(),
    )
    second = outbound(session, "parte 2", turn_id=turn, part_index=1)

    assert send(second) == "in_flight"
    assert fake_graph.requests == []


def test_statuses_that_arrived_before_the_wamid_was_stored_are_applied(
    fake_graph: FakeGraphAPI, session: Session
) -> None:
    early = baker.make(
        DeliveryStatusEvent,
        wa_message_id="wamid.FAKE0001",
        status="delivered",
        message=None,
        wa_timestamp=timezone.now(),
    )
    message = outbound(session)

    send(message)

    message.refresh_from_db()
    early.refresh_from_db()
    assert (message.delivery_status, early.message_id) == ("delivered", message.pk)


def test_mark_read_posts_the_read_status_with_a_typing_indicator(
    fake_graph: FakeGraphAPI, session: Session
) -> None:
    inbound = baker.make(
        Message, session=session, direction=Direction.INBOUND, wa_message_id="wamid.IN1"
    )
    receipt = read_receipt_for(session, inbound)
    assert receipt is not None

    assert read_receipt_send(receipt, client=graph_client()) is True

    [request] = fake_graph.requests
    assert (request.phone_number_id, request.headers["Authorization"]) == (
        session.instance.phone_number_id,
        "Bearer test-access-token",
    )
    assert request.json == {
        "messaging_product": "whatsapp",
        "status": "read",
        "message_id": "wamid.IN1",
        "typing_indicator": {"type": "text"},
    }


def test_a_mark_read_failure_is_logged_and_not_fatal(
    fake_graph: FakeGraphAPI, session: Session, caplog: pytest.LogCaptureFixture
) -> None:
    fake_graph.respond_error(400, 100, "Invalid parameter")
    inbound = baker.make(
        Message, session=session, direction=Direction.INBOUND, wa_message_id="wamid.IN1"
    )
    receipt = read_receipt_for(session, inbound)
    assert receipt is not None

    assert read_receipt_send(receipt, client=graph_client()) is False

    [record] = [r for r in caplog.records if r.message == "whatsapp_mark_read_failed"]
    assert (vars(record)["code"], vars(record)["title"], vars(record)["message_id"]) == (
        100,
        "Invalid parameter",
        inbound.pk,
    )


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_no_database_transaction_is_held_during_the_graph_api_call(
    fake_graph: FakeGraphAPI, instance: Instance
) -> None:
    session = recipes.session.make(instance=instance, customer_phone=CUSTOMER_PHONE)
    message = outbound(session)
    seen: list[str] = []

    def try_to_lock_the_row(request: GraphRequest) -> None:
        # Runs in the fake server's thread, on its own database connection.
        try:
            with transaction.atomic():
                Message.objects.select_for_update(nowait=True).filter(pk=message.pk).exists()
            seen.append("unlocked")
        except DatabaseError:
            seen.append("locked")
        finally:
            connections.close_all()

    fake_graph.on_request = try_to_lock_the_row
    with GraphClient(base_url=fake_graph.base_url) as client:
        assert outbound_message_send(message_id=message.pk, client=client) is SendOutcome.SENT

    assert seen == ["unlocked"]
