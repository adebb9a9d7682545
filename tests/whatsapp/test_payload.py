"""The pure webhook parser: fixtures of Meta's real shapes -> exact typed events."""

import contextlib
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from tests.helpers.meta_payloads import (
    JSON,
    MUTATED_BATCHES,
    fixture_bytes,
    load_fixture,
)
from whatsapp.payload import (
    ChangeErrors,
    Customer,
    Echo,
    IdentityChange,
    InboundKind,
    InboundMessage,
    MalformedBodyError,
    MediaInfo,
    PayloadError,
    StatusUpdate,
    WebhookPayload,
    WhatsAppError,
    decode_body,
    parse_payload,
    parse_webhook_body,
)

PNID = "100000000000001"
T = datetime.fromtimestamp(1764500000, tz=UTC)
MARIA = Customer(phone="5511987654321", user_id="BR.1234567890123456", name="Maria Silva")


def inbound(
    wamid: str, message_type: str, kind: InboundKind, text: str, **extra: Any
) -> InboundMessage:
    fields = {"customer": MARIA, "timestamp": T, **extra}
    return InboundMessage(
        phone_number_id=PNID,
        wamid=wamid,
        message_type=message_type,
        kind=kind,
        text=text,
        **fields,
    )


def status(
    status: str, seconds: int, *errors: WhatsAppError, user_id: str = MARIA.user_id
) -> StatusUpdate:
    return StatusUpdate(
        phone_number_id=PNID,
        wamid="wamid.OUT01",
        status=status,
        timestamp=datetime.fromtimestamp(1764500000 + seconds, tz=UTC),
        recipient_phone=MARIA.phone,
        recipient_user_id=user_id,
        errors=errors,
    )


MEDIA = InboundKind.MEDIA
EXPECTED_MESSAGES = {
    "text": inbound(
        "wamid.TEXT01",
        "text",
        InboundKind.TEXT,
        "Olá, gostaria de um orçamento de análise de água.",
    ),
    "interactive_button_reply": inbound(
        "wamid.BTNREPLY01",
        "interactive",
        InboundKind.TEXT,
        "Sim, confirmo",
        context_wamid="wamid.OUT01",
        reply_type="button_reply",
        reply_id="sim",
    ),
    "interactive_list_reply": inbound(
        "wamid.LISTREPLY01",
        "interactive",
        InboundKind.TEXT,
        "Análise de água",
        context_wamid="wamid.OUT02",
        reply_type="list_reply",
        reply_id="agua",
    ),
    "button": inbound(
        "wamid.TPLBUTTON01",
        "button",
        InboundKind.TEXT,
        "Quero um orçamento",
        context_wamid="wamid.TPL01",
    ),
    "image": inbound(
        "wamid.MEDIA00",
        "image",
        MEDIA,
        "Foto do laudo",
        media=MediaInfo(
            kind="image",
            media_id="900000000000001",
            mime_type="image/jpeg",
            sha256="aGFzaA==",
            caption="Foto do laudo",
        ),
    ),
    "audio": inbound(
        "wamid.MEDIA01",
        "audio",
        MEDIA,
        "",
        media=MediaInfo(
            kind="audio",
            media_id="900000000000002",
            mime_type="audio/ogg; codecs=opus",
            sha256="aGFzaA==",
            voice=True,
        ),
    ),
    "video": inbound(
        "wamid.MEDIA02",
        "video",
        MEDIA,
        "Vídeo da coleta",
        media=MediaInfo(
            kind="video",
            media_id="900000000000003",
            mime_type="video/mp4",
            sha256="aGFzaA==",
            caption="Vídeo da coleta",
        ),
    ),
    "document": inbound(
        "wamid.MEDIA03",
        "document",
        MEDIA,
        "Pedido",
        media=MediaInfo(
            kind="document",
            media_id="900000000000004",
            mime_type="application/pdf",
            sha256="aGFzaA==",
            caption="Pedido",
            filename="pedido.pdf",
        ),
    ),
    "sticker": inbound(
        "wamid.MEDIA04",
        "sticker",
        MEDIA,
        "",
        media=MediaInfo(
            kind="sticker", media_id="900000000000005", mime_type="image/webp", sha256="aGFzaA=="
        ),
    ),
    "location": inbound(
        "wamid.MEDIA05",
        "location",
        MEDIA,
        "Laboratório Central - Av. Paulista, 1000 (-23.5613, -46.6565)",
        media=MediaInfo(
            kind="location",
            data={
                "latitude": -23.5613,
                "longitude": -46.6565,
                "name": "Laboratório Central",
                "address": "Av. Paulista, 1000",
            },
        ),
    ),
    "contacts": inbound(
        "wamid.MEDIA06",
        "contacts",
        MEDIA,
        "João Souza",
        media=MediaInfo(
            kind="contacts",
            data={
                "contacts": [
                    {
                        "name": "João Souza",
                        "phones": [{"phone": "+55 11 91234-5678", "wa_id": "5511912345678"}],
                    }
                ]
            },
        ),
    ),
    "reaction": inbound(
        "wamid.REACTION01",
        "reaction",
        InboundKind.REACTION,
        "\U0001f44d",
        reacted_wamid="wamid.OUT01",
    ),
    "unsupported": inbound(
        "wamid.UNSUPPORTED01", "unsupported", InboundKind.LOG_ONLY, "poll_creation"
    ),
    "system_user_changed_number": inbound(
        "wamid.SYSTEM01",
        "system",
        InboundKind.IDENTITY_CHANGE,
        "User Maria Silva changed from 5511987654321 to 5511912340000",
        customer=Customer(phone=MARIA.phone, user_id=MARIA.user_id),
        identity_change=IdentityChange(
            change="user_changed_number",
            new_phone="5511912340000",
            new_user_id="BR.9999999999999999",
            previous_user_id=MARIA.user_id,
        ),
    ),
    "system_user_changed_user_id": inbound(
        "wamid.SYSTEM02",
        "system",
        InboundKind.IDENTITY_CHANGE,
        "User Maria Silva changed their user ID",
        customer=Customer(phone="", user_id=MARIA.user_id),
        identity_change=IdentityChange(
            change="user_changed_user_id",
            new_phone="",
            new_user_id="BR.8888888888888888",
            previous_user_id=MARIA.user_id,
        ),
    ),
    "bsuid_only": inbound(
        "wamid.BSUID01",
        "text",
        InboundKind.TEXT,
        "Oi, vocês fazem análise de solo?",
        customer=Customer(phone="", user_id="BR.5555555555555555", name="Cliente Anônima"),
    ),
}


@pytest.mark.parametrize(("fixture", "expected"), list(EXPECTED_MESSAGES.items()))
def test_each_message_fixture_parses_to_exactly_one_typed_message(
    fixture: str, expected: InboundMessage
) -> None:
    assert parse_webhook_body(fixture_bytes(fixture)) == WebhookPayload(messages=(expected,))


RE_ENGAGEMENT = WhatsAppError(
    131047,
    "Re-engagement message",
    "Message failed to send because more than 24 hours have passed since the customer "
    "last replied to this number.",
)


@pytest.mark.parametrize(
    ("fixture", "expected"),
    [
        ("status_sent", status("sent", 10)),
        ("status_delivered", status("delivered", 20)),
        ("status_read", status("read", 30)),
        ("status_played", status("played", 40)),
        ("status_failed", status("failed", 5, RE_ENGAGEMENT, user_id="")),
    ],
)
def test_each_status_fixture_parses_to_one_status(fixture: str, expected: StatusUpdate) -> None:
    assert parse_webhook_body(fixture_bytes(fixture)) == WebhookPayload(statuses=(expected,))


def test_a_status_error_is_masked_before_it_is_stored_or_logged() -> None:
    body = load_fixture("status_failed")
    [error] = body["entry"][0]["changes"][0]["value"]["statuses"][0]["errors"]
    error["title"] = "Malformed access token EAAGSENTINEL0123456789abcdefXYZ"
    error["error_data"]["details"] = "Recipient +55 11 98765-4321 (ana@x.com.br) is not valid"

    [parsed] = parse_payload(body).statuses

    assert parsed.errors == (
        WhatsAppError(
            131047,
            "Malformed access token EAA[redacted]",
            "Recipient [phone] ([email]) is not valid",
        ),
    )


def test_an_echo_is_a_staff_message_to_the_customer() -> None:
    assert parse_webhook_body(fixture_bytes("echo")) == WebhookPayload(
        echoes=(
            Echo(
                phone_number_id=PNID,
                wamid="wamid.ECHO01",
                timestamp=T,
                message_type="text",
                customer=Customer(phone=MARIA.phone, user_id=MARIA.user_id),
                text="Oi Maria, aqui é a Ana da equipe. Vou cuidar do seu pedido.",
            ),
        )
    )


def test_a_batch_yields_every_message_and_status_of_every_entry_with_the_right_sender() -> None:
    payload = parse_webhook_body(fixture_bytes("batch"))

    carlos = Customer(phone="5521988887777", user_id="BR.2222222222222222", name="Carlos Lima")
    assert [(m.wamid, m.customer, m.text) for m in payload.messages] == [
        ("wamid.BATCH01", MARIA, "Bom dia"),
        ("wamid.BATCH02", carlos, "Preciso de um laudo"),
        ("wamid.BATCH03", MARIA, "Vocês atendem em Campinas?"),
    ]
    assert [(s.wamid, s.status) for s in payload.statuses] == [
        ("wamid.OUT01", "delivered"),
        ("wamid.OUT02", "read"),
    ]
    assert payload.phone_number_ids == frozenset({PNID})
    assert payload.event_count == 5


def test_changes_of_other_fields_and_other_objects_are_listed_as_ignored() -> None:
    document = load_fixture("text")
    document["entry"][0]["changes"].append({"field": "account_update", "value": {"x": 1}})

    assert parse_payload(document).ignored_changes == ("account_update",)
    assert parse_payload({"object": "page", "entry": []}) == WebhookPayload(
        ignored_changes=("object:page",)
    )


def test_value_level_errors_are_reported_with_their_code_title_and_details() -> None:
    document = load_fixture("text")
    value = document["entry"][0]["changes"][0]["value"]
    del value["messages"]
    value["errors"] = [
        {
            "code": 130429,
            "title": "Rate limit hit",
            "message": "Rate limit hit",
            "error_data": {"details": "Too many messages"},
        }
    ]

    assert parse_payload(document) == WebhookPayload(
        errors=(
            ChangeErrors(PNID, (WhatsAppError(130429, "Rate limit hit", "Too many messages"),)),
        )
    )


def test_optional_fields_may_be_missing() -> None:
    document = {
        "entry": [
            {
                "changes": [
                    {
                        "field": "messages",
                        "value": {
                            "metadata": {"phone_number_id": PNID},
                            "messages": [
                                {"from": "5511987654321", "id": "w1", "timestamp": "1764500000"}
                                | {"type": "image", "image": {"id": "1"}}
                            ],
                        },
                    }
                ]
            }
        ]
    }

    assert parse_payload(document) == WebhookPayload(
        messages=(
            InboundMessage(
                phone_number_id=PNID,
                wamid="w1",
                timestamp=T,
                message_type="image",
                kind=MEDIA,
                customer=Customer(phone="5511987654321", user_id=""),
                text="",
                media=MediaInfo(kind="image", media_id="1"),
            ),
        )
    )


def test_nul_characters_are_removed_from_text() -> None:
    document = load_fixture("text")
    document["entry"][0]["changes"][0]["value"]["messages"][0]["text"]["body"] = "a\x00b"

    assert parse_payload(document).messages[0].text == "ab"


def _message_of(document: dict[str, Any]) -> dict[str, Any]:
    message: dict[str, Any] = document["entry"][0]["changes"][0]["value"]["messages"][0]
    return message


def _mutated(change: Callable[[dict[str, Any]], object]) -> dict[str, Any]:
    document = load_fixture("text")
    change(document)
    return document


@pytest.mark.parametrize(
    ("change", "error"),
    [
        (lambda d: d.update(entry={}), "body.entry: expected a list, got dict"),
        (lambda d: d.update(entry=[1]), "entry[0]: expected an object, got int"),
        (
            lambda d: d["entry"][0].update(changes="x"),
            "entry[0].changes: expected a list, got str",
        ),
        (
            lambda d: d["entry"][0]["changes"][0].update(value=None),
            "entry[0].changes[messages].value: expected an object, got NoneType",
        ),
        (
            lambda d: d["entry"][0]["changes"][0]["value"]["metadata"].pop("phone_number_id"),
            "entry[0].changes[messages].value: metadata.phone_number_id: expected digits",
        ),
        (lambda d: _message_of(d).pop("id"), ".id: expected a string, got NoneType"),
        (lambda d: _message_of(d).update(id=""), ".id: expected 1 to 128 characters"),
        (lambda d: _message_of(d).update(id="w" * 129), ".id: expected 1 to 128 characters"),
        (lambda d: _message_of(d).pop("timestamp"), ".timestamp: expected a Unix timestamp"),
        (lambda d: _message_of(d).update(timestamp="12a"), ".timestamp: expected a Unix timestamp"),
        (lambda d: _message_of(d).update(timestamp=10**30), ".timestamp: out of range"),
        (lambda d: _message_of(d).update(timestamp=True), ".timestamp: expected a Unix timestamp"),
        (lambda d: _message_of(d).pop("type"), ".type: expected a string, got NoneType"),
        (lambda d: _message_of(d).update(text="hi"), ".text: expected an object, got str"),
        (lambda d: _message_of(d).update(text={}), ".body: expected a string, got NoneType"),
        (
            lambda d: _message_of(d).update(**{"from": "+55 11"}),
            ".from: expected a phone number of up to 20 digits",
        ),
        (
            lambda d: _message_of(d).update(**{"from": "٥٥١١"}),  # Arabic-Indic digits
            ".from: expected a phone number of up to 20 digits",
        ),
        (
            lambda d: (
                _message_of(d).pop("from"),
                _message_of(d).pop("from_user_id"),
                d["entry"][0]["changes"][0]["value"].pop("contacts"),
            ),
            ": no sender (neither from/wa_id nor from_user_id/user_id)",
        ),
    ],
)
def test_shapes_that_cannot_be_accepted_are_reported_unreadable_with_the_reason(
    change: Callable[[dict[str, Any]], object], error: str
) -> None:
    # An unreadable item does not refuse the delivery; it is reported, with why.
    payload = parse_payload(_mutated(change))

    reasons = [f"{item.where}: {item.reason}" for item in payload.unreadable] + [
        message.reason for message in payload.messages
    ]
    assert len(reasons) == 1
    assert reasons[0].endswith(error.lstrip(".: "))
    assert (payload.statuses, payload.echoes) == ((), ())


@pytest.mark.parametrize("document", [[], "text", 1, None])
def test_a_body_that_is_not_an_object_is_refused(document: object) -> None:
    with pytest.raises(PayloadError, match=r"^body: expected an object$"):
        parse_payload(document)


@pytest.mark.parametrize(
    "raw", [b"", b"{", b"{'a': 1}", b"\xff\xfe{}", b"[" * 100_000, b"1" * 5000]
)
def test_bodies_that_are_not_json_raise_malformed_body(raw: bytes) -> None:
    with pytest.raises(MalformedBodyError):
        decode_body(raw)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(JSON)
def test_any_json_either_parses_or_raises_payload_error(document: object) -> None:
    # Any other exception fails the test: the parser never crashes on a shape.
    with contextlib.suppress(PayloadError):
        parse_payload(document)


@settings(max_examples=300, deadline=None)
@given(MUTATED_BATCHES)
def test_mutated_valid_payloads_either_parse_or_raise_payload_error(document: object) -> None:
    # Any other exception fails the test: the parser never crashes on a shape.
    with contextlib.suppress(PayloadError):
        parse_payload(document)


def test_broken_media_fields_read_as_empty_and_never_refuse_the_message() -> None:
    document = load_fixture("audio")
    _message_of(document)["audio"] = {
        "id": 900000000000002,  # a number, not a string
        "mime_type": ["audio/ogg"],
        "sha256": None,
        "voice": "true",  # only the JSON true is a voice note
    }

    (message,) = parse_payload(document).messages

    assert (message.kind, message.media) == (MEDIA, MediaInfo(kind="audio"))


@pytest.mark.parametrize(("length", "kept"), [(127, True), (128, True), (129, False)])
def test_a_media_id_too_long_to_store_reads_as_empty(length: int, kept: bool) -> None:
    document = load_fixture("image")
    _message_of(document)["image"]["id"] = "9" * length

    (message,) = parse_payload(document).messages

    assert message.media is not None
    assert message.media.media_id == ("9" * length if kept else "")


def test_contact_cards_without_name_or_phones_and_broken_phones_are_skipped() -> None:
    document = load_fixture("contacts")
    _message_of(document)["contacts"] = [
        {
            "name": {"formatted_name": "Ana"},
            "phones": [{"type": "CELL"}, "+55 11 1", {"wa_id": "5511"}],
        },
        {"name": {}, "phones": []},
        "not a card",
    ]

    (message,) = parse_payload(document).messages

    assert message.media == MediaInfo(
        kind="contacts",
        data={"contacts": [{"name": "Ana", "phones": [{"phone": "", "wa_id": "5511"}]}]},
    )


def test_a_location_without_coordinates_keeps_them_null() -> None:
    document = load_fixture("location")
    _message_of(document)["location"] = {"latitude": "-23.5", "name": "Lab"}

    (message,) = parse_payload(document).messages

    assert message.media == MediaInfo(
        kind="location", data={"latitude": None, "longitude": None, "name": "Lab", "address": ""}
    )


def test_text_messages_carry_no_media() -> None:
    (message,) = parse_webhook_body(fixture_bytes("text")).messages

    assert message.media is None
