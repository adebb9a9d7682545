"""`/webhooks/whatsapp/`: verification, the POST's gates, and never a 500 for any body."""

from typing import Any

import pytest
from django.db import OperationalError, connection, transaction
from django.test import Client
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pytest_django import Settings

from conversations import publishers
from conversations.models import Instance, Message, Session, WebhookDelivery
from tests.helpers.meta_payloads import (
    JSON,
    MUTATED_BATCHES,
    WEBHOOK_URL,
    Recorder,
    encode,
    fixture_bytes,
    signed_post,
)
from whatsapp.payload import PayloadError, parse_payload

pytestmark = pytest.mark.django_db


@pytest.fixture
def enqueued(monkeypatch: pytest.MonkeyPatch) -> tuple[Recorder, Recorder]:
    """The view's collaborators, recorded instead of reaching Celery."""
    turns, sends = Recorder(), Recorder()
    monkeypatch.setattr(publishers, "enqueue_turn", turns)
    monkeypatch.setattr(publishers, "enqueue_send", sends)
    return turns, sends


# --- GET verification ------------------------------------------------------------------------


def test_verification_echoes_the_challenge_as_plain_text(
    client: Client, settings: Settings
) -> None:
    settings.WHATSAPP_VERIFY_TOKEN = "s3cret"

    response = client.get(
        WEBHOOK_URL,
        {"hub.mode": "subscribe", "hub.verify_token": "s3cret", "hub.challenge": "1158201444"},
    )

    assert (response.status_code, response.content, response["Content-Type"]) == (
        200,
        b"1158201444",
        "text/plain",
    )


@pytest.mark.parametrize(
    ("configured", "query"),
    [
        ("s3cret", {"hub.mode": "subscribe", "hub.verify_token": "wrong", "hub.challenge": "1"}),
        ("s3cret", {"hub.mode": "unsubscribe", "hub.verify_token": "s3cret", "hub.challenge": "1"}),
        ("s3cret", {"hub.verify_token": "s3cret", "hub.challenge": "1"}),
        ("s3cret", {"hub.mode": "subscribe", "hub.verify_token": "s3cret"}),
        ("", {"hub.mode": "subscribe", "hub.verify_token": "", "hub.challenge": "1"}),
    ],
)
def test_verification_is_refused_unless_mode_and_a_configured_token_match(
    client: Client, settings: Settings, configured: str, query: dict[str, str]
) -> None:
    settings.WHATSAPP_VERIFY_TOKEN = configured

    response = client.get(WEBHOOK_URL, query)

    assert (response.status_code, response.content) == (403, b"")


# --- POST gates ------------------------------------------------------------------------------


def test_a_signed_delivery_is_stored_applied_and_answered_200(
    client: Client, instance: Instance, enqueued: tuple[Recorder, Recorder]
) -> None:
    response = signed_post(client, fixture_bytes("text"))

    assert (response.status_code, response.content) == (200, b"ok")
    delivery = WebhookDelivery.objects.get()
    assert (delivery.outcome, delivery.headers["Content-Type"]) == ("processed", "application/json")
    assert sorted(delivery.headers) == ["Content-Length", "Content-Type", "X-Hub-Signature-256"]
    assert Message.objects.get().wa_message_id == "wamid.TEXT01"


def test_the_webhook_needs_no_csrf_token(
    instance: Instance, enqueued: tuple[Recorder, Recorder]
) -> None:
    response = signed_post(Client(enforce_csrf_checks=True), fixture_bytes("text"))

    assert response.status_code == 200


@pytest.mark.parametrize(
    "signature",
    [
        "sha256=" + "0" * 64,  # invalid
        None,  # missing
        "sha1=0123456789abcdef0123456789abcdef01234567",  # wrong prefix
        "",
    ],
)
def test_a_bad_or_missing_signature_is_refused_and_nothing_is_stored(
    client: Client, instance: Instance, signature: str | None
) -> None:
    extra: dict[str, Any] = {} if signature is None else {"HTTP_X_HUB_SIGNATURE_256": signature}

    response = client.generic(
        "POST", WEBHOOK_URL, fixture_bytes("text"), content_type="application/json", **extra
    )

    assert response.status_code == 403
    assert (WebhookDelivery.objects.count(), Message.objects.count()) == (0, 0)


def test_a_body_signed_with_another_secret_is_refused(
    client: Client, instance: Instance, settings: Settings
) -> None:
    settings.WHATSAPP_APP_SECRET = "rotated-secret"

    assert signed_post(client, fixture_bytes("text")).status_code == 403
    assert WebhookDelivery.objects.count() == 0


def test_a_declared_length_over_the_limit_is_refused_before_reading(
    client: Client, settings: Settings
) -> None:
    settings.WEBHOOK_MAX_BODY_BYTES = 100

    response = signed_post(client, b"{}", CONTENT_LENGTH="101")

    assert response.status_code == 413
    assert WebhookDelivery.objects.count() == 0


def test_a_body_over_the_limit_is_refused(
    client: Client, instance: Instance, settings: Settings
) -> None:
    body = fixture_bytes("text")
    settings.WEBHOOK_MAX_BODY_BYTES = len(body) - 1

    assert signed_post(client, body).status_code == 413
    settings.WEBHOOK_MAX_BODY_BYTES = len(body)
    assert signed_post(client, body).status_code == 200


@pytest.mark.parametrize("body", [b"not json", b'{"entry": [', b"\xff\xfe", b""])
def test_a_signed_body_that_is_not_json_gets_400_and_is_not_stored(
    client: Client, body: bytes
) -> None:
    assert signed_post(client, body).status_code == 400
    assert WebhookDelivery.objects.count() == 0


def test_a_payload_that_cannot_be_parsed_is_kept_and_answered_200(
    client: Client, instance: Instance, enqueued: tuple[Recorder, Recorder]
) -> None:
    body = encode({"object": "whatsapp_business_account", "entry": {"not": "a list"}})

    response = signed_post(client, body)

    assert response.status_code == 200
    delivery = WebhookDelivery.objects.get()
    assert (delivery.outcome, bytes(delivery.raw_body)) == ("failed", body)


def test_other_methods_are_not_allowed(client: Client) -> None:
    assert client.put(WEBHOOK_URL).status_code == 405


def test_when_even_the_raw_body_cannot_be_stored_meta_is_asked_to_retry(
    client: Client, instance: Instance
) -> None:
    table = WebhookDelivery._meta.db_table

    def database_down(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        # The database refuses the delivery row, in the transaction and again on its own.
        if sql.startswith("INSERT") and table in sql:
            raise OperationalError("server closed the connection unexpectedly")
        return execute(sql, params, many, context)

    with connection.execute_wrapper(database_down):
        response = signed_post(client, fixture_bytes("text"))

    assert response.status_code == 503
    assert (WebhookDelivery.objects.count(), Message.objects.count()) == (0, 0)


# --- fuzz ------------------------------------------------------------------------------------


def _post_in_rolled_back_savepoint(
    body: bytes,
) -> tuple[int, str | None, list[tuple[str | None, str]], int]:
    """Each example starts from the same database: its writes are undone afterwards."""
    with transaction.atomic():
        client = Client()
        response = signed_post(client, body)
        delivery = WebhookDelivery.objects.order_by("-id").first()
        state = (
            response.status_code,
            delivery.outcome if delivery else None,
            list(Message.objects.order_by("id").values_list("wa_message_id", "content")),
            Session.objects.count(),
        )
        transaction.set_rollback(True)
    return state


FUZZ = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@FUZZ
@given(st.binary(max_size=300))
def test_arbitrary_bytes_signed_get_200_or_400_never_500(
    instance: Instance, enqueued: tuple[Recorder, Recorder], body: bytes
) -> None:
    status, outcome, _, _ = _post_in_rolled_back_savepoint(body)

    assert status in (200, 400)
    assert (outcome is None) == (status == 400)


@FUZZ
@given(JSON)
def test_arbitrary_json_signed_is_kept_and_never_yields_a_500(
    instance: Instance, enqueued: tuple[Recorder, Recorder], document: object
) -> None:
    status, outcome, rows, sessions = _post_in_rolled_back_savepoint(encode(document))

    assert status == 200
    if outcome == "failed":
        assert (rows, sessions) == ([], 0)


@FUZZ
@given(MUTATED_BATCHES)
def test_a_mutated_valid_payload_has_every_readable_item_applied(
    instance: Instance, enqueued: tuple[Recorder, Recorder], document: dict[str, Any]
) -> None:
    # Each message, status and echo is read on its own, never the delivery whole or nothing.
    status, outcome, rows, sessions = _post_in_rolled_back_savepoint(encode(document))

    assert status == 200
    try:
        payload = parse_payload(document, received_at=timezone.now())
    except PayloadError:
        # Refused: the body is kept, and not one half-parsed message or session was written.
        assert (outcome, rows, sessions) == ("failed", [], 0)
        return
    expected: dict[str, str] = {}
    for message in sorted(payload.messages, key=lambda m: m.timestamp):
        if message.phone_number_id == instance.phone_number_id and message.kind.value != (
            "identity_change"
        ):
            expected.setdefault(message.wamid, message.text)  # a repeated wamid is a duplicate
    if payload.unreadable and payload.event_count == len(payload.unreadable):
        assert (outcome, rows, sessions) == ("failed", [], 0)  # nothing readable at all
        return
    assert outcome in ("processed", "ignored")
    assert set(expected.items()) <= set(rows)  # every readable message stored, with its text
