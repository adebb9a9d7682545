"""Poison deliveries (docs/operations.md, Poison deliveries) and unreadable items (docs/operations.md, Per-item parsing).

- a lone UTF-16 surrogate anywhere is replaced (U+FFFD), never a 503 that Meta retries for days;
- a timestamp out of range (year 9999, before the Cloud API) is replaced by the reception time,
  with a SYSTEM event;
- a big delivery is stored at once and applied by a task (once), a lost task by the sweep;
- an identical body is stored once, with a counter;
- an item that cannot be read is stored and answered as unsupported, the others applied.
"""

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, NoReturn

import pytest
from django.test import Client
from django.utils import timezone
from model_bakery import baker
from pytest_django import DjangoCaptureOnCommitCallbacks, Settings

from conversations import publishers
from conversations.event_codes import ACTION_UNSUPPORTED_MEDIA, EventCode
from conversations.inbound import deliveries
from conversations.inbound import tasks as inbound_tasks
from conversations.inbound.deliveries import webhook_delivery_receive
from conversations.inbound.tasks import apply_webhook_delivery
from conversations.labels import event_text
from conversations.models import Direction, Instance, Message, Session, WebhookDelivery
from conversations.sweeps import RECEIVED_GRACE, received_deliveries_requeue
from prompts_admin.models import DEFAULT_UNSUPPORTED_MEDIA_MESSAGE
from tests.helpers.meta_payloads import (
    CUSTOMER_PHONE,
    CUSTOMER_USER_ID,
    Recorder,
    encode,
    fixture_bytes,
    load_fixture,
    signed_post,
)
from whatsapp.payload import (
    InboundKind,
    UnreadableItem,
    decode_body,
    parse_payload,
)

pytestmark = pytest.mark.django_db

HEADERS = {"Content-Type": "application/json"}

# `signed_post`, its after-commit callbacks run: the test client's response.
Post = Callable[[bytes], Any]


@pytest.fixture
def enqueued(monkeypatch: pytest.MonkeyPatch) -> dict[str, Recorder]:
    """The view's collaborators, recorded instead of reaching Celery."""
    recorders = {"turns": Recorder(), "sends": Recorder(), "deliveries": Recorder()}
    monkeypatch.setattr(publishers, "enqueue_turn", recorders["turns"])
    monkeypatch.setattr(publishers, "enqueue_send", recorders["sends"])
    monkeypatch.setattr(inbound_tasks, "enqueue_delivery", recorders["deliveries"])
    return recorders


@pytest.fixture
def post(
    client: Client, django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks
) -> Post:
    """`signed_post`, running what the request registered for after its commit."""

    def send(raw: bytes) -> Any:
        with django_capture_on_commit_callbacks(execute=True):
            return signed_post(client, raw)

    return send


def _message(document: dict[str, Any], index: int = 0) -> dict[str, Any]:
    message: dict[str, Any] = document["entry"][0]["changes"][0]["value"]["messages"][index]
    return message


def _text_with(field: str, value: str) -> bytes:
    """The text fixture with `value` (JSON-escaped as given) put in `field`."""
    document = load_fixture("text")
    placeholder = "@@PLACEHOLDER@@"
    if field == "text":
        _message(document)["text"]["body"] = placeholder
    elif field == "name":
        document["entry"][0]["changes"][0]["value"]["contacts"][0]["profile"]["name"] = placeholder
    elif field == "wamid":
        _message(document)["id"] = placeholder
    raw = json.dumps(document)  # ASCII: the escape below stays an escape, as Meta sends it
    return raw.replace(placeholder, value).encode()


# --- lone surrogates -------------------------------------------------------------------------


SURROGATE_CASES = [
    pytest.param("text", "content", id="text"),
    pytest.param("name", "customer_name", id="profile name"),
    pytest.param("wamid", "wa_message_id", id="message id"),
]


def _assert_surrogate_replaced(response: Any, raw: bytes, field: str, column: str) -> None:
    assert response.status_code == 200
    delivery = WebhookDelivery.objects.get()
    # The raw body is kept byte for byte (bytea stores any byte; the escape is ASCII anyway).
    assert (delivery.outcome, bytes(delivery.raw_body)) == ("processed", raw)
    message = Message.objects.get(direction=Direction.INBOUND)
    stored = message.session.customer_name if field == "name" else getattr(message, column)
    assert stored == "\ufffdx"


@pytest.mark.parametrize(("field", "column"), SURROGATE_CASES)
def test_a_lone_surrogate_is_replaced_and_the_delivery_stored_and_answered_200(
    post: Post, instance: Instance, enqueued: dict[str, Recorder], field: str, column: str
) -> None:
    raw = _text_with(field, "\\ud800x")

    response = post(raw)

    _assert_surrogate_replaced(response, raw, field, column)
    assert enqueued["turns"].calls == [Session.objects.get().pk]


@pytest.mark.parametrize(("field", "column"), SURROGATE_CASES)
def test_a_known_customer_s_lone_surrogate_is_replaced_and_lands_in_their_session(
    post: Post, known_customer: Session, enqueued: dict[str, Recorder], field: str, column: str
) -> None:
    known_customer.customer_name = ""
    known_customer.save(update_fields=["customer_name"])
    raw = _text_with(field, "\\udfffx".replace("udfff", "ud800"))

    response = post(raw)

    _assert_surrogate_replaced(response, raw, field, column)
    assert Message.objects.get().session_id == known_customer.pk


def test_a_surrogate_in_a_key_or_raw_surrogate_bytes_are_replaced_too() -> None:
    # A key, a pair (an emoji: kept), and a surrogate encoded raw (CESU bytes json lets through).
    raw = b'{"\\udc00k": ["\\ud83d\\ude00", "\xed\xa0\x80y", {"d": [[["\\udbff"]]]}]}'

    assert decode_body(raw) == {"\ufffdk": ["\U0001f600", "\ufffdy", {"d": [[["\ufffd"]]]}]}


def test_whatever_fails_while_applying_the_raw_bytes_are_stored_failed_and_200_answered(
    post: Post, instance: Instance, enqueued: dict[str, Recorder], monkeypatch: pytest.MonkeyPatch
) -> None:
    def explode(payload: Any, **collaborators: Any) -> NoReturn:
        raise UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed")

    monkeypatch.setattr(deliveries, "payload_apply", explode)
    raw = _text_with("text", "\\ud800x")

    response = post(raw)

    assert response.status_code == 200
    delivery = WebhookDelivery.objects.get()
    assert (delivery.outcome, bytes(delivery.raw_body)) == ("failed", raw)
    assert delivery.error == (
        "UnicodeEncodeError: 'utf-8' codec can't encode character '\\ud800' in position 0: "
        "surrogates not allowed"
    )
    assert Message.objects.count() == 0


# --- out-of-range timestamps -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("offset", "replaced"),
    [
        pytest.param(timedelta(hours=23, minutes=59, seconds=59), False, id="a day - 1 s: kept"),
        pytest.param(timedelta(days=1), False, id="exactly a day ahead: kept"),
        pytest.param(timedelta(days=1, seconds=1), True, id="a day and 1 s ahead"),
    ],
)
def test_a_timestamp_more_than_a_day_ahead_of_the_reception_is_replaced(
    offset: timedelta, replaced: bool
) -> None:
    received_at = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    document = load_fixture("text")
    _message(document)["timestamp"] = str(int((received_at + offset).timestamp()))

    [message] = parse_payload(document, received_at=received_at).messages

    assert message.timestamp == (received_at if replaced else received_at + offset)
    assert bool(message.timestamp_replaced) is replaced


@pytest.mark.parametrize(
    ("moment", "replaced"),
    [
        pytest.param(datetime(2022, 5, 1, 0, 0, 1, tzinfo=UTC), False, id="1 s after it: kept"),
        pytest.param(datetime(2022, 5, 1, tzinfo=UTC), False, id="the Cloud API's start: kept"),
        pytest.param(datetime(2022, 4, 30, 23, 59, 59, tzinfo=UTC), True, id="1 s before it"),
        pytest.param(None, True, id="beyond any datetime"),
    ],
)
def test_a_timestamp_before_the_cloud_api_existed_or_unrepresentable_is_replaced(
    moment: datetime | None, replaced: bool
) -> None:
    received_at = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    document = load_fixture("status_read")
    status = document["entry"][0]["changes"][0]["value"]["statuses"][0]
    status["timestamp"] = str(int(moment.timestamp())) if moment else "9" * 15

    [parsed] = parse_payload(document, received_at=received_at).statuses

    assert parsed.timestamp == (received_at if replaced else moment)
    assert parsed.timestamp_replaced == (repr(status["timestamp"]) if replaced else "")


def test_a_year_9999_timestamp_neither_closes_the_open_session_nor_pins_it_to_the_future(
    post: Post, known_customer: Session, enqueued: dict[str, Recorder]
) -> None:
    before = timezone.now()
    known_customer.last_message_at = before - timedelta(minutes=5)
    known_customer.save(update_fields=["last_message_at"])
    document = load_fixture("text")
    _message(document)["timestamp"] = "253402300799"  # 9999-12-31T23:59:59Z

    assert post(encode(document)).status_code == 200
    after = timezone.now()

    # Same session, still open; its times at the reception, not in year 9999.
    session = Session.objects.get()
    assert session.pk == known_customer.pk
    assert session.closed_at is None
    assert session.last_message_at is not None
    assert before <= session.last_message_at <= after
    inbound_message = Message.objects.get(direction=Direction.INBOUND)
    assert inbound_message.wa_timestamp == session.last_message_at
    event = Message.objects.get(direction=Direction.SYSTEM)
    assert (event.message_type, event.content, event.json_part) == (
        EventCode.TIMESTAMP_REPLACED,
        "",
        {"value": "'253402300799'"},
    )
    assert event_text(event) == (
        "Horário informado pelo WhatsApp ('253402300799') fora do intervalo aceito: "
        "usado o horário de recebimento."
    )
    # The next message, stamped normally, lands in the same session.
    document = load_fixture("text")
    _message(document)["id"] = "wamid.NEXT"
    _message(document)["timestamp"] = str(int(after.timestamp()))
    assert post(encode(document)).status_code == 200
    assert Message.objects.get(wa_message_id="wamid.NEXT").session_id == known_customer.pk
    assert Session.objects.count() == 1


# --- big deliveries: stored first, applied by a task -----------------------------------------


def _many_new_customers(count: int) -> bytes:
    document = load_fixture("text")
    value = document["entry"][0]["changes"][0]["value"]
    value["contacts"] = []
    value["messages"] = []
    for n in range(count):
        phone = f"55119{n:08d}"
        value["contacts"].append({"profile": {"name": f"Cliente {n}"}, "wa_id": phone})
        value["messages"].append(
            {
                "from": phone,
                "id": f"wamid.BIG{n}",
                "timestamp": "1764500000",
                "type": "text",
                "text": {"body": f"Mensagem {n}"},
            }
        )
    return encode(document)


def test_a_delivery_over_the_event_threshold_is_stored_and_deferred_not_applied(
    post: Post, instance: Instance, enqueued: dict[str, Recorder], settings: Settings
) -> None:
    settings.WEBHOOK_INLINE_MAX_EVENTS = 5
    raw = _many_new_customers(6)

    response = post(raw)

    assert response.status_code == 200
    delivery = WebhookDelivery.objects.get()
    assert (delivery.outcome, bytes(delivery.raw_body), delivery.processed_at) == (
        "received",
        raw,
        None,
    )
    # Deferred: nothing of it was applied within the request, and its task was enqueued.
    assert (Session.objects.count(), Message.objects.count()) == (0, 0)
    assert enqueued["deliveries"].calls == [delivery.pk]
    assert enqueued["turns"].calls == []


def test_a_delivery_over_the_byte_threshold_is_deferred_too(
    post: Post, instance: Instance, enqueued: dict[str, Recorder], settings: Settings
) -> None:
    settings.WEBHOOK_INLINE_MAX_BYTES = len(fixture_bytes("text")) - 1

    assert post(fixture_bytes("text")).status_code == 200

    assert WebhookDelivery.objects.get().outcome == "received"
    assert Message.objects.count() == 0


def test_the_task_applies_a_deferred_delivery_exactly_once(
    post: Post,
    instance: Instance,
    enqueued: dict[str, Recorder],
    settings: Settings,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    settings.WEBHOOK_INLINE_MAX_EVENTS = 5
    post(_many_new_customers(6))
    delivery = WebhookDelivery.objects.get()

    with django_capture_on_commit_callbacks(execute=True):
        first = apply_webhook_delivery(delivery.pk)
    with django_capture_on_commit_callbacks(execute=True):
        second = apply_webhook_delivery(delivery.pk)

    assert (first, second) == ("processed", "skipped")
    delivery.refresh_from_db()
    assert (delivery.outcome, delivery.messages_count, delivery.error) == ("processed", 6, "")
    assert Message.objects.count() == 6
    assert sorted(Message.objects.values_list("content", flat=True)) == [
        f"Mensagem {n}" for n in range(6)
    ]
    # One turn per new customer, enqueued by the one run that applied it.
    assert sorted(enqueued["turns"].calls) == sorted(Session.objects.values_list("pk", flat=True))
    assert len(enqueued["turns"].calls) == 6


def test_the_sweep_enqueues_a_deferred_delivery_whose_task_never_ran(
    instance: Instance, enqueued: dict[str, Recorder]
) -> None:
    now = timezone.now()
    lost = baker.make(
        WebhookDelivery,
        raw_body=fixture_bytes("text"),
        outcome="received",
        received_at=now - RECEIVED_GRACE - timedelta(seconds=1),
    )
    baker.make(WebhookDelivery, raw_body=b"{}", outcome="received", received_at=now)  # young
    for outcome in ("processed", "failed", "ignored"):
        baker.make(
            WebhookDelivery, raw_body=b"{}", outcome=outcome, received_at=now - timedelta(hours=1)
        )
    requeued = Recorder()

    assert received_deliveries_requeue(now=now, grace=RECEIVED_GRACE, enqueue=requeued) == [lost.pk]
    assert requeued.calls == [lost.pk]
    # The task it enqueues applies it: the worker's death lost nothing.
    assert apply_webhook_delivery(lost.pk) == "processed"
    assert Message.objects.get().wa_message_id == "wamid.TEXT01"


# --- identical bodies ------------------------------------------------------------------------


def test_an_identical_body_replayed_is_stored_once_with_a_counter(
    post: Post, instance: Instance, enqueued: dict[str, Recorder]
) -> None:
    raw = fixture_bytes("image")

    statuses = [post(raw).status_code for _ in range(3)]
    other = post(fixture_bytes("text")).status_code

    assert [*statuses, other] == [200] * 4
    replayed, different = WebhookDelivery.objects.order_by("id")
    assert (bytes(replayed.raw_body), replayed.times_received, replayed.messages_count) == (
        raw,
        3,
        1,
    )
    assert (different.times_received, WebhookDelivery.objects.count()) == (1, 2)
    assert Message.objects.filter(message_type="image").count() == 1


def test_a_replay_of_a_failed_body_takes_the_outcome_of_its_successful_application(
    post: Post, instance: Instance, enqueued: dict[str, Recorder], monkeypatch: pytest.MonkeyPatch
) -> None:
    def explode(payload: Any, **collaborators: Any) -> NoReturn:
        raise RuntimeError("boom")

    with monkeypatch.context() as patch:
        patch.setattr(deliveries, "payload_apply", explode)
        post(fixture_bytes("text"))
    assert WebhookDelivery.objects.get().outcome == "failed"

    post(fixture_bytes("text"))

    delivery = WebhookDelivery.objects.get()
    assert (delivery.outcome, delivery.error, delivery.messages_count) == ("processed", "", 1)
    assert delivery.times_received == 2


def test_a_known_customer_s_replayed_text_is_stored_once_and_counted(
    post: Post, known_customer: Session, enqueued: dict[str, Recorder]
) -> None:
    raw = fixture_bytes("text")

    for _ in range(3):
        assert post(raw).status_code == 200

    delivery = WebhookDelivery.objects.get()
    assert (delivery.times_received, delivery.messages_count, delivery.outcome) == (
        3,
        1,
        "processed",
    )
    assert Message.objects.count() == 1
    assert enqueued["turns"].calls == [known_customer.pk]


# --- unreadable items ------------------------------------------------------------------------

UNREADABLE_REASON = (
    "131000 Unsupported webhook payload; interactive: expected an object, got NoneType"
)


def test_the_parser_reads_a_message_whatsapp_could_not_render_as_unreadable_with_its_reason() -> (
    None
):
    payload = parse_payload(load_fixture("interactive_unreadable"))

    [message] = payload.messages
    assert (message.wamid, message.kind, message.message_type, message.text) == (
        "wamid.UNREADABLE01",
        InboundKind.UNREADABLE,
        "unsupported",
        "",
    )
    assert message.reason == UNREADABLE_REASON
    assert (message.customer.phone, message.customer.name) == (CUSTOMER_PHONE, "Maria Silva")


def test_an_unreadable_message_alone_is_stored_and_answered_once_without_a_turn(
    post: Post, instance: Instance, enqueued: dict[str, Recorder]
) -> None:
    raw = fixture_bytes("interactive_unreadable")

    responses = [post(raw).status_code for _ in range(2)]  # a replay too

    assert responses == [200, 200]
    delivery = WebhookDelivery.objects.get()
    assert (delivery.outcome, delivery.messages_count, delivery.times_received) == (
        "processed",
        1,
        2,
    )
    assert delivery.error == f"message wamid.UNREADABLE01: {UNREADABLE_REASON}"
    inbound_message = Message.objects.get(direction=Direction.INBOUND)
    assert (
        inbound_message.message_type,
        inbound_message.error,
        inbound_message.processed_at is not None,
    ) == ("unsupported", UNREADABLE_REASON[:64], True)
    [reply] = Message.objects.filter(direction=Direction.OUTBOUND)
    assert (reply.content, reply.action) == (
        DEFAULT_UNSUPPORTED_MEDIA_MESSAGE,
        ACTION_UNSUPPORTED_MEDIA,
    )
    assert enqueued["sends"].calls == [reply.pk]
    assert enqueued["turns"].calls == []  # the model is never called for it


def test_in_a_mixed_batch_the_unreadable_items_never_sink_another_customer_s_text(
    post: Post, instance: Instance, enqueued: dict[str, Recorder]
) -> None:
    response = post(fixture_bytes("batch_with_unreadable"))

    assert response.status_code == 200
    delivery = WebhookDelivery.objects.get()
    assert (delivery.outcome, delivery.messages_count) == ("processed", 2)
    assert delivery.error == (
        "entry[0].changes[messages].value.statuses[0]: timestamp: expected a Unix timestamp\n"
        f"message wamid.UNREADABLE01: {UNREADABLE_REASON}"
    )
    carlos = Session.objects.get(customer_phone="5521912345678")
    text = Message.objects.get(wa_message_id="wamid.CARLOS01")
    assert (text.session_id, text.content, text.processed_at) == (
        carlos.pk,
        "Bom dia, preciso de uma análise de solo.",
        None,
    )
    assert enqueued["turns"].calls == [carlos.pk]  # Carlos is answered by the model
    maria = Session.objects.get(customer_user_id=CUSTOMER_USER_ID)
    [reply] = Message.objects.filter(direction=Direction.OUTBOUND)
    assert (reply.session_id, reply.action) == (maria.pk, ACTION_UNSUPPORTED_MEDIA)
    assert enqueued["sends"].calls == [reply.pk]


def test_the_parser_lists_an_item_without_a_readable_sender_and_reads_the_others() -> None:
    document = load_fixture("batch_with_unreadable")
    del _message(document)["from"], _message(document)["from_user_id"]
    document["entry"][0]["changes"][0]["value"]["contacts"] = []

    payload = parse_payload(document)

    assert [m.wamid for m in payload.messages] == ["wamid.CARLOS01"]
    assert payload.unreadable[0] == UnreadableItem(
        "entry[0].changes[messages].value.messages[0]",
        "131000 Unsupported webhook payload; interactive: expected an object, got NoneType",
    )


def test_webhook_delivery_receive_without_a_task_publisher_applies_a_big_delivery_inline(
    instance: Instance, settings: Settings
) -> None:
    settings.WEBHOOK_INLINE_MAX_EVENTS = 0
    receipt = webhook_delivery_receive(
        raw_body=fixture_bytes("text"),
        headers=HEADERS,
        enqueue_turn=Recorder(),
        enqueue_send=Recorder(),
    )
    assert (receipt.outcome, receipt.messages_count) == ("processed", 1)


def test_the_deferred_delivery_tasks_are_named_for_the_beat_and_the_publisher() -> None:
    from conversations.inbound.tasks import requeue_received_deliveries

    assert apply_webhook_delivery.name == "conversations.apply_webhook_delivery"
    assert requeue_received_deliveries.name == "conversations.requeue_received_deliveries"


def test_a_deeply_nested_timestamp_makes_only_its_message_unreadable() -> None:
    document = load_fixture("batch_with_unreadable")
    nested: list[Any] = []
    for _ in range(5_000):
        nested = [nested]
    _message(document, 1)["timestamp"] = nested
    received_at = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)

    payload = parse_payload(document, received_at=received_at)

    carlos = payload.messages[1]
    assert (carlos.wamid, carlos.kind, carlos.timestamp, carlos.timestamp_replaced) == (
        "wamid.CARLOS01",
        InboundKind.UNREADABLE,
        received_at,
        "list",
    )
    assert carlos.reason.endswith("timestamp: expected a Unix timestamp")


def test_a_broken_system_message_is_listed_unreadable_never_answered_as_the_customer_s() -> None:
    document = load_fixture("system_user_changed_number")
    _message(document)["system"] = "broken"

    payload = parse_payload(document, received_at=datetime(2026, 11, 30, tzinfo=UTC))

    assert payload.messages == ()
    assert [item.reason for item in payload.unreadable] == ["system: expected an object, got str"]
