"""The webhook's hot statements: INSERTs compiled once, statements prepared once per connection.

The commonest delivery (one text from a known customer) is one statement on PostgreSQL
(`conversations.inbound.one_statement`). On the general path a known customer's messages cost
one ``UPDATE ... RETURNING`` that finds the open session and moves its times, then an insert per
message and the delivery insert (each compiled once and prepared once per PostgreSQL connection,
see `insert_row` and `hot_cursor`); then one commit and the enqueue.
"""

from collections.abc import Sequence
from typing import Any, TypeVar

from django.conf import settings
from django.db import connections, models

from compat.django_private import (
    compile_insert,
    load_model,
    logs_queries,
    mark_saved,
    prepared_cursor,
)
from conversations.models import WebhookOutcome

M = TypeVar("M", bound=models.Model)


def insert_once(model: type[M], **values: Any) -> M | None:
    """Insert a row unless it conflicts with a unique constraint; None when it did.

    ``INSERT ... ON CONFLICT DO NOTHING RETURNING id``: one round trip, no savepoint, and the
    database settles the race — a concurrent insert of the same wamid waits for the first
    transaction and then does nothing. (The public `bulk_create(ignore_conflicts=True)` cannot
    say whether the row was inserted.)
    """
    row = model(**values)
    pk = insert_row(model, row=row, ignore_conflicts=True)
    if pk is None:
        return None
    row.pk = pk
    mark_saved(row)
    return row


# (database alias, model, ignore_conflicts, upsert) -> (INSERT statement, its fields in order).
_INSERT_STATEMENTS: dict[tuple[str, type[models.Model], bool, bool], tuple[str, list[Any]]] = {}


# ``ON CONFLICT (body_sha256) DO UPDATE``: an identical webhook body is stored once and counted
# (``times_received``), never copied (a replayed 5 MB body would be stored again). The stored row
# keeps its outcome, unless it failed: then the replay's outcome, error, counts and time replace
# them (its events were applied this time, or failed again). It ends the delivery insert of both
# paths: the one-statement path's (PostgreSQL) and the general path's (`insert_row`, every
# database).
_FAILED = f"conversations_webhookdelivery.outcome = '{WebhookOutcome.FAILED.value}'"
DELIVERY_UPSERT_SQL = f"""ON CONFLICT (body_sha256) DO UPDATE SET
        times_received = conversations_webhookdelivery.times_received + 1,
        outcome = CASE WHEN {_FAILED} THEN EXCLUDED.outcome
            ELSE conversations_webhookdelivery.outcome END,
        error = CASE WHEN {_FAILED} THEN EXCLUDED.error
            ELSE conversations_webhookdelivery.error END,
        messages_count = CASE WHEN {_FAILED} THEN EXCLUDED.messages_count
            ELSE conversations_webhookdelivery.messages_count END,
        statuses_count = CASE WHEN {_FAILED} THEN EXCLUDED.statuses_count
            ELSE conversations_webhookdelivery.statuses_count END,
        processed_at = CASE WHEN {_FAILED} THEN EXCLUDED.processed_at
            ELSE conversations_webhookdelivery.processed_at END"""


def insert_row(
    model: type[models.Model],
    *,
    row: models.Model | None = None,
    ignore_conflicts: bool = False,
    upsert_delivery: bool = False,
    **values: Any,
) -> Any:
    """Insert one row (`row`, or a new one from `values`) and return its primary key; None when
    `ignore_conflicts` and it conflicted. No model signals (the channel's models have none).

    The statement is the one the ORM compiles (`QuerySet._insert`, which `bulk_create` uses),
    compiled once per model and reused; each call only prepares the values, as the ORM does
    (``pre_save`` then ``get_db_prep_save``). Compiling the INSERT costs more CPU than running
    it, and the webhook's general path runs one per message and one per delivery.
    """
    if row is None:
        row = model(**values)
    connection = connections[model._default_manager.db]
    key = (connection.alias, model, ignore_conflicts, upsert_delivery)
    compiled = _INSERT_STATEMENTS.get(key)
    if compiled is None:
        compiled = _compile_insert(connection, model, ignore_conflicts)
        if upsert_delivery:
            statement, fields = compiled
            head, returning = statement.rsplit(" RETURNING ", 1)
            compiled = (f"{head} {DELIVERY_UPSERT_SQL} RETURNING {returning}", fields)
        _INSERT_STATEMENTS[key] = compiled
    statement, fields = compiled
    params = [field.get_db_prep_save(field.pre_save(row, True), connection) for field in fields]
    with hot_cursor(connection) as cursor:
        cursor.execute(statement, params)
        returned = cursor.fetchone()
    return returned[0] if returned else None


# (database alias, model, field names) -> (UPDATE statement, its fields in order).
_UPDATE_STATEMENTS: dict[tuple[str, type[models.Model], tuple[str, ...]], tuple[str, list[Any]]]
_UPDATE_STATEMENTS = {}


def update_row(model: type[models.Model], pk: Any, **values: Any) -> int:
    """``model.objects.filter(pk=pk).update(**values)`` for plain values (no expressions): the
    number of rows updated. The statement is the one the ORM compiles
    (``SQLUpdateCompiler.as_sql``: ``column = %s`` per field, each value prepared by
    ``get_db_prep_save``), built once per model and set of fields; compiling the ORM's cost the
    worker more CPU than running it (tests/conversations/test_lease_sql.py compares both)."""
    connection = connections[model._default_manager.db]
    key = (connection.alias, model, tuple(values))
    compiled = _UPDATE_STATEMENTS.get(key)
    if compiled is None:
        concrete = {field.name: field for field in model._meta.concrete_fields}
        fields = [concrete[name] for name in values if name in concrete]
        columns = [field.column for field in fields if field.column is not None]
        primary_key = model._meta.pk.column if model._meta.pk is not None else None
        if (
            len(columns) != len(values)
            or primary_key is None
            or any(field.many_to_many or hasattr(field, "get_placeholder") for field in fields)
        ):
            raise NotImplementedError(f"update_row cannot write {list(values)}")
        quote = connection.ops.quote_name
        assignments = ", ".join(f"{quote(column)} = %s" for column in columns)
        statement = (
            f"UPDATE {quote(model._meta.db_table)} SET {assignments}"
            f" WHERE {quote(primary_key)} = %s"
        )
        compiled = _UPDATE_STATEMENTS[key] = (statement, fields)
    statement, fields = compiled
    if any(hasattr(value, "resolve_expression") for value in values.values()):
        raise NotImplementedError("update_row writes plain values, not expressions")
    params = [
        field.get_db_prep_save(value, connection)
        for field, value in zip(fields, values.values(), strict=True)
    ]
    with hot_cursor(connection) as cursor:
        cursor.execute(statement, [*params, pk])
        return int(cursor.rowcount)


def hot_cursor(connection: Any) -> Any:
    """A cursor for the webhook's hot statements (the one-statement path, the session's
    ``UPDATE ... RETURNING``, the message and delivery inserts): on PostgreSQL it binds on the
    server and prepares each statement once per connection, so PostgreSQL parses and plans it
    once instead of for every delivery (bench/webhook.py and bench/README.md give the saving).

    Django turns psycopg's prepared statements off (``prepare_threshold=None``, for
    transaction-mode connection poolers), and psycopg then ignores ``prepare=True``. Only
    server-binding cursors consult the threshold — Django's own cursors bind on the client — so
    raising it to "never by count" prepares exactly the statements run here, and nothing else.
    ``DB_PREPARE_HOT_STATEMENTS=False`` (behind PgBouncer older than 1.21 in transaction mode)
    runs them on Django's usual cursor instead, as does a connection that logs its queries.
    Elsewhere (SQLite) this is ``connection.cursor()``. The cursor is Django's wrapper, so
    execute wrappers, query logging and error translation apply.
    """
    if (
        connection.vendor != "postgresql"
        or not settings.DB_PREPARE_HOT_STATEMENTS
        # Django's query log reads the SQL text off psycopg's cursor, which a prepared
        # execution leaves empty: where queries are logged (DEBUG, CaptureQueriesContext),
        # the usual cursor keeps the log readable.
        or logs_queries(connection)
    ):
        return connection.cursor()
    return prepared_cursor(connection)


def fetch_models(
    model: type[M], statement: str, params: Sequence[Any], fields: tuple[str, ...]
) -> list[M]:
    """The `model` instances of a hand-written SELECT of `fields` (attnames, in the order the
    statement selects them; the others deferred), as ``Model.objects.raw()`` would give them,
    on the hot cursor: the raw queryset's own machinery cost a turn more CPU than the query."""
    connection = connections[model._default_manager.db]
    with hot_cursor(connection) as cursor:
        cursor.execute(statement, params)
        rows = cursor.fetchall()
    return [load_model(connection, model, row, fields) for row in rows]


def _compile_insert(
    connection: Any, model: type[models.Model], ignore_conflicts: bool
) -> tuple[str, list[Any]]:
    if not connection.features.can_return_columns_from_insert:
        raise NotImplementedError("the channel needs INSERT ... RETURNING (PostgreSQL, SQLite)")
    fields = [f for f in model._meta.concrete_fields if not f.primary_key and not f.generated]
    return compile_insert(connection, model, fields, ignore_conflicts=ignore_conflicts), fields
