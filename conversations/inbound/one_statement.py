"""The commonest delivery — one text from a customer with an open session — in ONE statement.

On PostgreSQL a delivery that carries exactly one TEXT message (text, interactive reply or
template button) and nothing else is first tried as a single data-modifying statement, run in
autocommit, so it is its own transaction and costs one round trip, like the durable floor's
single INSERT (DESIGN.md §11 asks for one transaction per delivery; this is it, without the
BEGIN and COMMIT round trips and with one statement instead of three):

    WITH s AS (UPDATE session: times forward, missing identity filled — RETURNING it),
         m AS (INSERT message ... SELECT FROM s ON CONFLICT DO NOTHING RETURNING id),
         d AS (INSERT delivery ... SELECT FROM s, counting m
               ON CONFLICT (body_sha256) DO UPDATE times_received + 1 RETURNING id)
    SELECT session, state, message id, delivery id FROM s

When the statement finds no open, non-idle session of that customer (a new customer, an idle
session to close, an unknown or inactive number) it writes nothing and returns no row; when it
fails (a missing phone or user id that another open session holds, a lock timeout, anything) it
wrote nothing either. In both cases the caller applies the delivery on the general path
(`conversations.inbound.events`), which handles every case. The result is the same rows the
general path would write (tests/conversations/whatsapp/test_one_statement.py compares the two),
with one difference: a repeated wamid arriving after its turn started queues the session's turn
again here (the UPDATE runs before the insert finds the conflict) and enqueues a task that finds
nothing pending, where the general path queues nothing.

Measured on the 2-core bench machine (bench/webhook.py), this path is what brings the webhook's
throughput near the durable floor: it spends one statement where the general path spends BEGIN,
UPDATE, INSERT, INSERT and COMMIT.
"""

import functools
import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connections, models, transaction

from agents.states import BOT_STATES, SessionState
from conversations.inbound.hot_path import delivery_upsert_clause, hot_cursor
from conversations.inbound.sessions import _NAME_CHARS
from conversations.lease import turn_queued_ttl
from conversations.models import (
    Direction,
    Instance,
    Message,
    Session,
    WebhookDelivery,
    WebhookOutcome,
)
from conversations.whatsapp.payload import InboundKind, InboundMessage, WebhookPayload

logger = logging.getLogger("conversations.inbound")


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
    customer = message.customer
    identifiers = [
        (name, value)
        for name, value in (
            ("customer_user_id", customer.user_id),
            ("customer_phone", customer.phone),
        )
        if value
    ]
    for field_name, value in identifiers:
        try:
            row = _run(connection, field_name, value, message, raw_body, headers, now, body_sha256)
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


def _run(
    connection: Any,
    field_name: str,
    value: str,
    message: InboundMessage,
    raw_body: bytes,
    headers: dict[str, str],
    now: datetime,
    body_sha256: str | None,
) -> tuple[int, str, datetime | None, int | None, int] | None:
    ops = connection.ops
    moment = ops.adapt_datetimefield_value(message.timestamp)
    idle_since = ops.adapt_datetimefield_value(
        message.timestamp - timedelta(hours=settings.SESSION_IDLE_HOURS)
    )
    customer = message.customer
    session_params = [
        moment,
        moment,
        moment,
        moment,
        customer.phone,
        customer.user_id,
        customer.name[:_NAME_CHARS],
        ops.adapt_datetimefield_value(now - turn_queued_ttl()),
        ops.adapt_datetimefield_value(now),
        message.phone_number_id,
        True,
        value,
        SessionState.CLOSED.value,
        idle_since,
    ]
    statement, message_fields, delivery_fields = _statement(connection.alias, field_name)
    message_values = {
        "direction": Direction.INBOUND,
        "message_type": message.message_type,
        "content": message.text,
        "wa_message_id": message.wamid,
        "wa_timestamp": message.timestamp,
        "created_at": now,
    }
    delivery_values = {
        "raw_body": raw_body,
        "headers": headers,
        "received_at": now,
        "processed_at": now,
        "outcome": WebhookOutcome.PROCESSED,
        "body_sha256": body_sha256,
    }
    params = [
        *session_params,
        *_prepared(connection, Message, message_fields, message_values),
        ops.adapt_datetimefield_value(now),  # processed_at, when the session is not a bot's
        *_prepared(connection, WebhookDelivery, delivery_fields, delivery_values),
    ]
    with hot_cursor(connection) as cursor:
        if connection.in_atomic_block:
            # Inside a caller's transaction (tests; never the webhook): a failure must not
            # break it, so the statement gets a savepoint.
            with transaction.atomic(using=connection.alias):
                cursor.execute(statement, params)
                return cursor.fetchone()  # type: ignore[no-any-return]
        cursor.execute(statement, params)
        return cursor.fetchone()  # type: ignore[no-any-return]


def _prepared(
    connection: Any, model: type[models.Model], fields: list[Any], values: dict[str, Any]
) -> list[Any]:
    """The fields' parameters: `values` prepared as the ORM prepares them for a save, the other
    fields' constant defaults prepared once per database (what `Model(**values)` then
    ``pre_save`` and ``get_db_prep_save`` would give, at a tenth of the CPU)."""
    defaults = _prepared_defaults(connection.alias, model)
    return [
        field.get_db_prep_save(values[field.name], connection)
        if field.name in values
        else defaults[field.name]
        for field in fields
    ]


@functools.cache
def _prepared_defaults(alias: str, model: type[models.Model]) -> dict[str, Any]:
    """Each field's default, prepared for the database; fields with a callable default (a
    time, a fresh dict) are left out: the caller must give them (`_run` does)."""
    connection = connections[alias]
    return {
        field.name: field.get_db_prep_save(field.get_default(), connection)
        for field in model._meta.concrete_fields
        if not (field.has_default() and callable(field.default))
    }


# Columns the statement computes instead of taking a parameter.
_MESSAGE_COMPUTED = {"session", "processed_at"}
_DELIVERY_COMPUTED = {"messages_count"}


@functools.cache
def _statement(alias: str, field_name: str) -> tuple[str, list[Any], list[Any]]:
    """The statement for one identifier column, with the message and delivery fields whose
    values it takes as parameters, in order; built once per database and identifier."""
    quote = connections[alias].ops.quote_name

    def column(model: type[models.Model], name: str) -> str:
        return quote(model._meta.get_field(name).column)  # type: ignore[union-attr]

    def table(model: type[models.Model]) -> str:
        return quote(model._meta.db_table)

    def insert_fields(model: type[models.Model], computed: set[str]) -> list[Any]:
        return [
            f
            for f in model._meta.concrete_fields
            if not f.primary_key and not f.generated and f.name not in computed
        ]

    message_fields = insert_fields(Message, _MESSAGE_COMPUTED)
    delivery_fields = insert_fields(WebhookDelivery, _DELIVERY_COMPUTED)

    def forward(name: str) -> str:
        col = column(Session, name)
        return f"{col} = CASE WHEN {col} IS NULL OR {col} < %s THEN %s ELSE {col} END"

    def fill(name: str) -> str:
        col = column(Session, name)
        return f"{col} = CASE WHEN {col} = '' THEN %s ELSE {col} END"

    bot_states = ", ".join(f"'{state.value}'" for state in sorted(BOT_STATES))
    session_table = table(Session)
    sid = column(Session, "id")
    state = column(Session, "state")
    queued = column(Session, "turn_queued_at")
    # Ring for a turn (set `turn_queued_at` to now) in a bot state unless a fresh turn is queued.
    ring = (
        f"{queued} = CASE WHEN {state} IN ({bot_states}) "
        f"AND ({queued} IS NULL OR {queued} < %s) THEN %s ELSE {queued} END"
    )
    update = (
        f"UPDATE {session_table} SET {forward('last_message_at')}, {forward('last_inbound_at')}, "
        f"{fill('customer_phone')}, {fill('customer_user_id')}, {fill('customer_name')}, {ring} "
        f"WHERE {sid} = ("
        f"SELECT o.{sid} FROM {session_table} o "
        f"JOIN {table(Instance)} i ON i.{column(Instance, 'id')} = o.{column(Session, 'instance')} "
        f"WHERE i.{column(Instance, 'phone_number_id')} = %s "
        f"AND i.{column(Instance, 'is_active')} = %s "
        f"AND o.{column(Session, field_name)} = %s AND o.{column(Session, 'state')} <> %s "
        f"AND COALESCE(o.{column(Session, 'last_message_at')}, "
        f"o.{column(Session, 'created_at')}) >= %s "
        "LIMIT 1) "
        f"RETURNING {sid}, {state}, {queued}"
    )
    message_columns = [column(Message, "session"), column(Message, "processed_at")] + [
        quote(f.column) for f in message_fields
    ]
    message_values = [
        f"s.{sid}",
        f"CASE WHEN s.{state} IN ({bot_states}) THEN NULL ELSE %s END",
    ] + ["%s"] * len(message_fields)
    # The processed_at parameter comes after the message fields' (see `_run`): reorder.
    message_values = message_values[:1] + message_values[2:] + message_values[1:2]
    message_columns = message_columns[:1] + message_columns[2:] + message_columns[1:2]
    delivery_columns = [quote(f.column) for f in delivery_fields] + [
        column(WebhookDelivery, "messages_count")
    ]
    delivery_values = ["%s"] * len(delivery_fields) + ["(SELECT count(*) FROM m)"]
    statement = (
        f"WITH s AS ({update}), "
        f"m AS (INSERT INTO {table(Message)} ({', '.join(message_columns)}) "
        f"SELECT {', '.join(message_values)} FROM s ON CONFLICT DO NOTHING "
        f"RETURNING {column(Message, 'id')}), "
        f"d AS (INSERT INTO {table(WebhookDelivery)} ({', '.join(delivery_columns)}) "
        f"SELECT {', '.join(delivery_values)} FROM s {delivery_upsert_clause(alias)} "
        f"RETURNING {column(WebhookDelivery, 'id')}) "
        f"SELECT s.{sid}, s.{state}, s.{queued}, "
        f"(SELECT {column(Message, 'id')} FROM m), (SELECT {column(WebhookDelivery, 'id')} FROM d) "
        "FROM s"
    )
    return statement, message_fields, delivery_fields
