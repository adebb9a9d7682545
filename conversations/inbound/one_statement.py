"""The commonest delivery — one text from a customer with an open session — in ONE statement.

On PostgreSQL a delivery that carries exactly one TEXT message (text, interactive reply or
template button) and nothing else is first tried as a single data-modifying statement
(`STATEMENTS`), run in autocommit, so it is its own transaction and costs one round trip, like
the durable floor's single INSERT (DESIGN.md §11 asks for one transaction per delivery; this is
it, without the BEGIN and COMMIT round trips and with one statement instead of three):
``WITH s AS (UPDATE the session), m AS (INSERT the message), d AS (INSERT the delivery)``. The
session's UPDATE spells the session rules in SQL, from `conversations.inbound.session_rules`,
where each rule's Python form used by the general path sits beside it.

When the statement finds no open, non-idle session of that customer (a new customer, an idle
session to close, an unknown or inactive number) it writes nothing and returns no row; when it
fails (a missing phone or user id that another open session holds, a lock timeout, anything) it
wrote nothing either. In both cases the caller applies the delivery on the general path
(`conversations.inbound.events`), which handles every case. The result is the same rows the
general path would write (tests/conversations/inbound/test_one_statement.py compares the two),
with one difference: a repeated wamid arriving after its turn started queues the session's turn
again here (the UPDATE runs before the insert finds the conflict) and enqueues a task that finds
nothing pending, where the general path queues nothing.

Why it exists: it is what brings the webhook's throughput near the durable floor
(bench/webhook.py; the figures are in bench/README.md), spending one statement where the general
path spends BEGIN, UPDATE, INSERT, INSERT and COMMIT.
"""

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connections, transaction

from conversations.inbound.hot_path import DELIVERY_UPSERT_SQL, hot_cursor
from conversations.inbound.session_rules import (
    IDENTIFIERS,
    PROCESSED_AT_SQL,
    RECEIVE_TEXT_SESSION_SQL,
    customer_identifiers,
    identity_params,
    idle_cutoff,
    turn_queued_before,
)
from conversations.models import Direction, Session, WebhookDelivery, WebhookOutcome
from whatsapp.payload import InboundKind, InboundMessage, WebhookPayload

logger = logging.getLogger("conversations.inbound")

# The statement, per identifier: the session's UPDATE (`session_rules`: the open, non-idle
# session, times forward, identity filled in, turn queued), the message's INSERT (pending only in
# a bot state, `session_rules.PROCESSED_AT_SQL`) and the delivery's upsert. Every column of both
# tables is named: a column added to Message or WebhookDelivery must be added here too
# (tests/conversations/inbound/test_one_statement.py checks it). It must start with
# "WITH s AS (UPDATE": the prepared-statement test finds it by that text.
STATEMENTS = {
    identifier: f"""WITH s AS ({RECEIVE_TEXT_SESSION_SQL[identifier]}),
m AS (
    INSERT INTO conversations_message (
        session_id, direction, message_type, agent, content, raw_response, json_part, code,
        action, error, turn_id, part_index, wa_message_id, wa_timestamp, processed_at,
        delivery_status, delivery_status_at, delivery_error_code, delivery_error_title,
        send_attempts, last_send_attempt_at, staff_user_id, created_at
    )
    SELECT s.id, %(direction)s, %(message_type)s, '', %(content)s, '', NULL, NULL,
        '', '', NULL, 0, %(wamid)s, %(at)s, {PROCESSED_AT_SQL},
        '', NULL, NULL, '',
        0, NULL, NULL, %(now)s
    FROM s
    ON CONFLICT DO NOTHING
    RETURNING id
),
d AS (
    INSERT INTO conversations_webhookdelivery (
        raw_body, headers, received_at, processed_at, outcome, error,
        messages_count, statuses_count, body_sha256, times_received
    )
    SELECT %(raw_body)s, %(headers)s, %(now)s, %(now)s, %(outcome)s, '',
        (SELECT count(*) FROM m), 0, %(body_sha256)s, 1
    FROM s
    {DELIVERY_UPSERT_SQL}
    RETURNING id
)
SELECT s.id, s.state, s.turn_queued_at, (SELECT id FROM m), (SELECT id FROM d) FROM s"""
    for identifier in IDENTIFIERS
}


@dataclass(frozen=True, slots=True)
class OneStatementReceipt:
    delivery_id: int
    session_id: int
    state: str
    message_id: int | None  # None: the wamid was received before (a duplicate delivery)
    # This delivery queued the session's turn (set `turn_queued_at`): it must enqueue the task.
    # False in HUMAN (no turn) and while a turn enqueued earlier has not started.
    turn_queued: bool


def single_text_message(payload: WebhookPayload) -> InboundMessage | None:
    """The payload's one TEXT message when that is all it carries, else None."""
    if (
        len(payload.messages) != 1
        or payload.statuses
        or payload.echoes
        or payload.errors
        or payload.ignored_changes
        or payload.unreadable
    ):
        return None
    [message] = payload.messages
    # A replaced timestamp gets a SYSTEM event: the general path writes it.
    if message.kind is not InboundKind.TEXT or message.timestamp_replaced:
        return None
    return message


def one_statement_receive(
    message: InboundMessage,
    *,
    raw_body: bytes,
    headers: dict[str, str],
    now: datetime,
    body_sha256: str | None = None,
) -> OneStatementReceipt | None:
    """Store the delivery of one text message in one statement (see the module docstring).

    None when the statement did not apply (nothing was written): the caller takes the general
    path. Never raises: a database error (or any other) too means "take the general path".
    """
    connection = connections[Session.objects.db]
    if connection.vendor != "postgresql":
        return None
    params: dict[str, Any] = {}
    for identifier, value in customer_identifiers(message.customer):
        try:
            params = params or _params(connection, message, raw_body, headers, now, body_sha256)
            row = _run(connection, STATEMENTS[identifier], params | {"identifier": value})
        except Exception as exc:  # a DatabaseError mostly; whatever it is, nothing was written
            logger.info(
                "whatsapp_one_statement_fallback",
                extra={"wamid": message.wamid, "error": exc.__class__.__name__},
            )
            return None
        if row is not None:
            session_id, state, queued_at, message_id, delivery_id = row
            return OneStatementReceipt(
                delivery_id=delivery_id,
                session_id=session_id,
                state=state,
                message_id=message_id,
                turn_queued=queued_at == now,
            )
    return None


def _params(
    connection: Any,
    message: InboundMessage,
    raw_body: bytes,
    headers: dict[str, str],
    now: datetime,
    body_sha256: str | None,
) -> dict[str, Any]:
    """The statement's parameters but the identifier's value, prepared as the ORM prepares them
    for a save (a binary body, JSON headers; PostgreSQL takes times and text as they are)."""
    adapt = connection.ops.adapt_datetimefield_value
    return {
        "phone_number_id": message.phone_number_id,
        # A webhook's delivery: never a simulated session (`session_rules.open_sessions`).
        "simulated": False,
        "at": adapt(message.timestamp),
        "idle_cutoff": adapt(idle_cutoff(message.timestamp)),
        **identity_params(message.customer),
        "queued_before": adapt(turn_queued_before(now)),
        "now": adapt(now),
        "direction": Direction.INBOUND.value,
        "message_type": message.message_type,
        "content": message.text,
        "wamid": message.wamid,
        "raw_body": _DELIVERY_FIELDS["raw_body"].get_db_prep_save(raw_body, connection),
        "headers": _DELIVERY_FIELDS["headers"].get_db_prep_save(headers, connection),
        "outcome": WebhookOutcome.PROCESSED.value,
        "body_sha256": body_sha256,
    }


_DELIVERY_FIELDS = {f.name: f for f in WebhookDelivery._meta.concrete_fields}


def _run(connection: Any, statement: str, params: dict[str, Any]) -> Any:
    with hot_cursor(connection) as cursor:
        if connection.in_atomic_block:
            # Inside a caller's transaction (tests; never the webhook): a failure must not
            # break it, so the statement gets a savepoint.
            with transaction.atomic(using=connection.alias):
                cursor.execute(statement, params)
                return cursor.fetchone()
        cursor.execute(statement, params)
        return cursor.fetchone()
