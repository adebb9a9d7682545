"""Helpers of the one-statement tests: bodies, the two paths, the statements run."""

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import pytest
from django.db import connection

from conversations.inbound import deliveries
from conversations.inbound.deliveries import webhook_delivery_receive
from conversations.inbound.one_statement import single_text_message
from conversations.inbound.session_rules import turn_queued_ttl
from conversations.models import Message, Session, WebhookDelivery
from tests.conversations.whatsapp.conftest import PHONE_NUMBER_ID, Recorder, encode, load_fixture
from whatsapp.payload import parse_payload

TURN_QUEUED_TTL = turn_queued_ttl()  # the settings' TTL, for the boundary tables below

UNKNOWN_PHONE_NUMBER_ID = "100000000000099"
HEADERS = {"Content-Type": "application/json", "User-Agent": "facebookexternalua"}
TEXT = "Olá, gostaria de um orçamento de análise de água."
AT_RECEIPT = "at receipt"


def body(
    fixture: str = "text",
    *,
    phone_number_id: str = PHONE_NUMBER_ID,
    wamid: str | None = None,
    timestamp: datetime | None = None,
) -> bytes:
    """A fixture's delivery, sent to `phone_number_id`, its message's id and time replaced."""
    document = load_fixture(fixture)
    value = document["entry"][0]["changes"][0]["value"]
    value["metadata"]["phone_number_id"] = phone_number_id
    [message] = value["messages"]
    if wamid is not None:
        message["id"] = wamid
    if timestamp is not None:
        message["timestamp"] = str(int(timestamp.timestamp()))
    return encode(document)


def parsed_message(raw: bytes) -> Any:
    message = single_text_message(parse_payload(json.loads(raw)))
    assert message is not None
    return message


def deliver(raw: bytes, turns: Recorder | None = None) -> WebhookDelivery:
    receipt = webhook_delivery_receive(
        raw_body=raw,
        headers=HEADERS,
        enqueue_turn=Recorder() if turns is None else turns,
        enqueue_send=Recorder(),
    )
    return WebhookDelivery.objects.get(pk=receipt.delivery_id)


@contextmanager
def statements() -> Iterator[list[str]]:
    """The first word of every statement run meanwhile (SAVEPOINT, WITH, INSERT...). An execute
    wrapper, not the query log: the log has no text for a statement prepared on the server."""
    kinds: list[str] = []

    def record(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        kinds.append(sql.split()[0])
        return execute(sql, params, many, context)

    with connection.execute_wrapper(record):
        yield kinds


@contextmanager
def general_path(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Choose the general path: the one-statement path declines, as when it does not apply."""
    with monkeypatch.context() as patch:
        patch.setattr(deliveries, "one_statement_receive", lambda message, **kwargs: None)
        yield


def deliver_in_one_statement(
    raw: bytes, turns: Recorder | None = None, *, lookups: int = 1
) -> WebhookDelivery:
    """`webhook_delivery_receive`, checked to have stored the delivery in one statement (one per
    identifier tried: user id first, then phone; a miss writes nothing)."""
    with statements() as kinds:
        receipt = webhook_delivery_receive(
            raw_body=raw,
            headers=HEADERS,
            enqueue_turn=Recorder() if turns is None else turns,
            enqueue_send=Recorder(),
        )
    assert kinds == ["WITH"] * lookups
    return WebhookDelivery.objects.get(pk=receipt.delivery_id)


Rows = list[Mapping[str, Any]]


def database_rows() -> tuple[Rows, Rows, Rows]:
    """Every session, message and delivery, field by field."""
    return (
        list(Session.objects.order_by("pk").values()),
        list(Message.objects.order_by("pk").values()),
        list(WebhookDelivery.objects.order_by("pk").values()),
    )
