"""Receive a WhatsApp webhook delivery: keep its raw body and apply its events, in ONE transaction.

`webhook_delivery_receive` decodes the JSON (a body that is not JSON is refused before anything
is written) and parses it into typed events — pure code, before any write, so a payload that
cannot be parsed is stored alone: its raw body, marked ``failed``. A parsed payload is applied
and the `WebhookDelivery` row (raw body, relevant headers, outcome, counts) inserted in one
transaction. A failure while applying rolls that whole transaction back (its turns are discarded
with it) and stores the raw body alone, marked ``failed``, in a transaction of its own — so the
events are stored with their raw body or not at all, the body always, and the database sees one
commit per delivery, the floor of a durable webhook (DESIGN.md §11). `webhook_delivery_reprocess`
and the ``reprocess_webhooks`` command apply a failed delivery again.

Poison deliveries (docs/operations.md, Poison deliveries): the body's SHA-256 is stored with it
and is unique, so an identical body is stored once and counted (``times_received``,
`DELIVERY_STORE_SQL`); a delivery over ``WEBHOOK_INLINE_MAX_EVENTS`` events or
``WEBHOOK_INLINE_MAX_BYTES`` bytes is only stored (outcome ``received``) and applied by the
``apply_webhook_delivery`` task (`webhook_delivery_apply`, idempotent), the beat sweep enqueueing it
again if that task is lost; whatever fails while applying — any exception, in either path — leaves
the raw body stored, marked ``failed``: `DeliveryNotStored` (a 503) means the database refused even
that.

Why no savepoint around the events, as DESIGN.md §11 first put it: a savepoint costs two round
trips (SAVEPOINT, RELEASE) on every delivery to spare a second transaction on the rare failure;
parsing failures, the expected ones, now happen before the transaction starts.
"""

import hashlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import OperationalError, connections, transaction
from django.utils import timezone

from conversations.inbound.events import ApplyResult, EnqueueFn, describe_error, payload_apply
from conversations.models import WebhookDelivery, WebhookOutcome
from conversations.prometheus import webhook_delivery_counted
from whatsapp.payload import (
    PayloadError,
    WebhookPayload,
    decode_body,
    parse_payload,
)

# The package's name, not the module's: every inbound module logs under one logger name.
logger = logging.getLogger("conversations.inbound")

_STORED_HEADERS = ("Content-Type", "Content-Length", "User-Agent", "X-Hub-Signature-256")


@dataclass(frozen=True, slots=True)
class DeliveryReceipt:
    delivery_id: int
    outcome: str
    messages_count: int
    statuses_count: int


class DeliveryNotStored(Exception):
    """Even the raw body could not be stored (database down): the webhook must not answer 200."""


def stored_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """The request headers worth keeping with a delivery (never cookies or credentials), in
    text any database stores (no NUL: PostgreSQL's jsonb refuses it)."""
    return {name: headers[name].replace("\x00", "") for name in _STORED_HEADERS if name in headers}


def webhook_delivery_receive(
    *,
    raw_body: bytes,
    headers: Mapping[str, str],
    enqueue_turn: EnqueueFn,
    enqueue_send: EnqueueFn,
    enqueue_delivery: EnqueueFn | None = None,
) -> DeliveryReceipt:
    """Store and apply one signature-checked webhook body (see the module docstring).

    With `enqueue_delivery`, a delivery over `WEBHOOK_INLINE_MAX_EVENTS` events or
    `WEBHOOK_INLINE_MAX_BYTES` bytes is only stored (outcome ``received``) and its id handed to
    `enqueue_delivery` after the commit, for `webhook_delivery_apply` in a task.

    Raises `MalformedBodyError` (nothing stored) when the body is not JSON, and
    `DeliveryNotStored` when the database refuses even the raw body.
    """
    now = timezone.now()
    body_sha256 = hashlib.sha256(raw_body).hexdigest()
    stored = Stored(raw_body, stored_headers(headers), body_sha256, now)
    document = decode_body(raw_body)
    try:
        payload = parse_payload(document, received_at=now)
    except Exception as exc:
        # Parsing is pure: nothing was written, so the body alone is stored, marked failed.
        _log_apply_failure(exc)
        receipt = _store_failed_body(stored, exc)
    else:
        if enqueue_delivery is not None and _deferred(payload, raw_body):
            receipt = _store_for_task(stored, payload, enqueue_delivery)
        else:
            receipt = _apply_and_store(payload, stored, enqueue_turn, enqueue_send)
    logger.info("whatsapp_webhook_received", extra=_log_fields(receipt))
    webhook_delivery_counted(receipt.outcome)
    return receipt


@dataclass(frozen=True, slots=True)
class Stored:
    """What is stored of a delivery whatever happens to its events."""

    raw_body: bytes
    headers: dict[str, str]
    body_sha256: str
    received_at: datetime


# A delivery stored once per body: an identical body (``body_sha256``) is stored once and counted
# (``times_received``), never copied (a replayed 5 MB body would be stored again); the stored row
# keeps its outcome, unless it failed: then the replay's outcome, error, counts and time replace
# them (its events were applied this time, or failed again). A concurrent delivery of the same
# body waits for the first one's commit, then counts itself.
#
# Hand-written because the ORM has no spelling of it (``bulk_create(update_conflicts=True)``
# sets a column to the new row's value, never to an expression of the old one), and its nearest
# (an INSERT ignoring conflicts, then on a conflict two UPDATEs and a SELECT) cost 0.25 ms of
# CPU per delivery to compile (the webhook's use case 2.0 against 1.7 ms, the least of five runs
# of 1,000 known customers' texts, 2026-12-02). Both databases run it.
DELIVERY_STORE_SQL = """INSERT INTO conversations_webhookdelivery (
    raw_body, headers, received_at, processed_at, outcome, error,
    messages_count, statuses_count, body_sha256, times_received
) VALUES (
    %(raw_body)s, %(headers)s, %(received_at)s, %(processed_at)s, %(outcome)s, %(error)s,
    %(messages_count)s, %(statuses_count)s, %(body_sha256)s, 1
)
ON CONFLICT (body_sha256) DO UPDATE SET
    times_received = conversations_webhookdelivery.times_received + 1,
    outcome = CASE WHEN conversations_webhookdelivery.outcome = 'failed'
        THEN excluded.outcome ELSE conversations_webhookdelivery.outcome END,
    error = CASE WHEN conversations_webhookdelivery.outcome = 'failed'
        THEN excluded.error ELSE conversations_webhookdelivery.error END,
    messages_count = CASE WHEN conversations_webhookdelivery.outcome = 'failed'
        THEN excluded.messages_count ELSE conversations_webhookdelivery.messages_count END,
    statuses_count = CASE WHEN conversations_webhookdelivery.outcome = 'failed'
        THEN excluded.statuses_count ELSE conversations_webhookdelivery.statuses_count END,
    processed_at = CASE WHEN conversations_webhookdelivery.outcome = 'failed'
        THEN excluded.processed_at ELSE conversations_webhookdelivery.processed_at END
RETURNING id"""
_FIELDS = {field.name: field for field in WebhookDelivery._meta.concrete_fields}


def delivery_store(
    stored: Stored,
    *,
    outcome: str,
    error: str = "",
    messages_count: int = 0,
    statuses_count: int = 0,
    processed_at: datetime | None = None,
) -> int:
    """Store the delivery (`DELIVERY_STORE_SQL`, each value prepared as a save prepares it):
    its id."""
    connection = connections[WebhookDelivery.objects.db]
    values = {
        "raw_body": stored.raw_body,
        "headers": stored.headers,
        "received_at": stored.received_at,
        "processed_at": processed_at,
        "outcome": outcome,
        "error": error,
        "messages_count": messages_count,
        "statuses_count": statuses_count,
        "body_sha256": stored.body_sha256,
    }
    params = {
        name: _FIELDS[name].get_db_prep_save(value, connection) for name, value in values.items()
    }
    with connection.cursor() as cursor:
        cursor.execute(DELIVERY_STORE_SQL, params)
        (delivery_id,) = cursor.fetchone()
    return int(delivery_id)


def _deferred(payload: WebhookPayload, raw_body: bytes) -> bool:
    """Too big to apply within the request (thousands of events come near gunicorn's
    timeout; docs/operations.md, Poison deliveries, gives the measure): applied by a task
    instead."""
    return (
        payload.event_count > settings.WEBHOOK_INLINE_MAX_EVENTS
        or len(raw_body) > settings.WEBHOOK_INLINE_MAX_BYTES
    )


def _store_for_task(
    stored: Stored, payload: WebhookPayload, enqueue_delivery: EnqueueFn
) -> DeliveryReceipt:
    """The raw body alone, outcome ``received``, its task enqueued after the commit. A publish
    that fails (broker down) or a worker that dies leaves it ``received``: the beat sweep
    (`received_deliveries_requeue`) enqueues it again, and the task applies it once."""
    try:
        # Autocommit: a new body's INSERT is its own transaction, the one commit of the delivery.
        delivery_id = delivery_store(stored, outcome=WebhookOutcome.RECEIVED)
    except Exception as exc:
        logger.exception("whatsapp_webhook_body_lost")
        raise DeliveryNotStored(str(exc)) from exc
    transaction.on_commit(lambda: enqueue_delivery(delivery_id), robust=True)
    logger.info(
        "whatsapp_webhook_deferred",
        extra={"delivery_id": delivery_id, "events": payload.event_count},
    )
    return DeliveryReceipt(
        delivery_id=delivery_id,
        outcome=WebhookOutcome.RECEIVED,
        messages_count=0,
        statuses_count=0,
    )


def _apply_and_store(
    payload: WebhookPayload,
    stored: Stored,
    enqueue_turn: EnqueueFn,
    enqueue_send: EnqueueFn,
    *,
    attempts: int = 2,
) -> DeliveryReceipt:
    """The events and the raw body in one transaction, without a savepoint: on a failure the
    whole transaction rolls back (its turns are discarded with it) and the raw body is stored
    alone, marked failed, in a transaction of its own — never both, never neither (short of
    `DeliveryNotStored`). A savepoint around the events would spare that second transaction on
    the rare failure at the price of two round trips (SAVEPOINT, RELEASE) on every delivery.
    """
    try:
        with transaction.atomic():
            result = payload_apply(
                payload,
                enqueue_turn=enqueue_turn,
                enqueue_send=enqueue_send,
                now=stored.received_at,
            )
            fields = result.delivery_fields()
            delivery_id = delivery_store(stored, **fields)
    except OperationalError as exc:
        # A deadlock or a lock timeout: the rollback released our locks, so try once more.
        if attempts > 1:
            logger.warning("whatsapp_webhook_apply_retry", extra={"error": describe_error(exc)})
            return _apply_and_store(
                payload, stored, enqueue_turn, enqueue_send, attempts=attempts - 1
            )
        _log_apply_failure(exc)
        return _store_failed_body(stored, exc)
    except Exception as exc:
        _log_apply_failure(exc)
        return _store_failed_body(stored, exc)
    return DeliveryReceipt(
        delivery_id=delivery_id,
        outcome=fields["outcome"],
        messages_count=fields["messages_count"],
        statuses_count=fields["statuses_count"],
    )


def _log_apply_failure(exc: BaseException) -> None:
    if isinstance(exc, PayloadError):
        logger.warning("whatsapp_webhook_payload_refused", extra={"error": describe_error(exc)})
    else:
        logger.exception("whatsapp_webhook_apply_failed", extra={"error": describe_error(exc)})


def webhook_delivery_reprocess(
    *, delivery_id: int, enqueue_turn: EnqueueFn, enqueue_send: EnqueueFn
) -> DeliveryReceipt | None:
    """Apply a ``failed`` delivery again; None when it is not (or no longer) failed."""
    return _apply_stored(delivery_id, WebhookOutcome.FAILED, enqueue_turn, enqueue_send)


def webhook_delivery_apply(
    *, delivery_id: int, enqueue_turn: EnqueueFn, enqueue_send: EnqueueFn
) -> DeliveryReceipt | None:
    """Apply a delivery stored for a task (outcome ``received``); None when it is not (or no
    longer) waiting — so the task is idempotent: a second run, or a sweep's extra task, waits for
    the first one's lock and then finds it applied."""
    return _apply_stored(delivery_id, WebhookOutcome.RECEIVED, enqueue_turn, enqueue_send)


def _apply_stored(
    delivery_id: int, outcome: str, enqueue_turn: EnqueueFn, enqueue_send: EnqueueFn
) -> DeliveryReceipt | None:
    with transaction.atomic():
        delivery = (
            WebhookDelivery.objects.select_for_update()
            .filter(pk=delivery_id, outcome=outcome)
            .first()
        )
        if delivery is None:
            return None
        try:
            document = decode_body(bytes(delivery.raw_body))
        except ValueError as exc:
            result = ApplyResult.failed(exc)
        else:
            result = _apply_in_savepoint(document, delivery.received_at, enqueue_turn, enqueue_send)
        fields = result.delivery_fields()
        for name, value in fields.items():
            setattr(delivery, name, value)
        delivery.save(update_fields=list(fields))
    receipt = _receipt(delivery)
    logger.info("whatsapp_webhook_reprocessed", extra=_log_fields(receipt))
    return receipt


def _apply_in_savepoint(
    document: Any,
    received_at: datetime,
    enqueue_turn: EnqueueFn,
    enqueue_send: EnqueueFn,
    *,
    attempts: int = 2,
) -> ApplyResult:
    """Reprocessing's apply: the delivery row is locked and updated in the same transaction, so
    the events get a savepoint of their own (a rare path; see `_apply_and_store` for the hot
    one). Timestamps are judged against the delivery's reception, as on its first pass."""
    try:
        with transaction.atomic():
            payload = parse_payload(document, received_at=received_at)
            return payload_apply(payload, enqueue_turn=enqueue_turn, enqueue_send=enqueue_send)
    except OperationalError as exc:
        # A deadlock or a lock timeout: the savepoint released its locks, so try once more.
        if attempts > 1:
            logger.warning("whatsapp_webhook_apply_retry", extra={"error": describe_error(exc)})
            return _apply_in_savepoint(
                document, received_at, enqueue_turn, enqueue_send, attempts=attempts - 1
            )
        logger.exception("whatsapp_webhook_apply_failed", extra={"error": describe_error(exc)})
        return ApplyResult.failed(exc)
    except PayloadError as exc:
        # Everything the savepoint wrote is gone; the raw body is kept for reprocessing.
        logger.warning("whatsapp_webhook_payload_refused", extra={"error": describe_error(exc)})
        return ApplyResult.failed(exc)
    except Exception as exc:
        logger.exception("whatsapp_webhook_apply_failed", extra={"error": describe_error(exc)})
        return ApplyResult.failed(exc)


def _store_failed_body(stored: Stored, exc: BaseException) -> DeliveryReceipt:
    """The raw body alone, marked failed for `webhook_delivery_reprocess`, in one transaction
    (whatever failed before, this fails only when the database does: then 503)."""
    try:
        with transaction.atomic():
            delivery_id = delivery_store(
                stored,
                outcome=WebhookOutcome.FAILED,
                error=describe_error(exc),
                processed_at=timezone.now(),
            )
    except Exception as second:
        logger.exception("whatsapp_webhook_body_lost")
        raise DeliveryNotStored(str(second)) from exc
    return DeliveryReceipt(
        delivery_id=delivery_id, outcome=WebhookOutcome.FAILED, messages_count=0, statuses_count=0
    )


def _receipt(delivery: WebhookDelivery) -> DeliveryReceipt:
    return DeliveryReceipt(
        delivery_id=delivery.pk,
        outcome=delivery.outcome,
        messages_count=delivery.messages_count,
        statuses_count=delivery.statuses_count,
    )


def _log_fields(receipt: DeliveryReceipt) -> dict[str, Any]:
    return {
        "delivery_id": receipt.delivery_id,
        "outcome": receipt.outcome,
        "messages": receipt.messages_count,
        "statuses": receipt.statuses_count,
    }
