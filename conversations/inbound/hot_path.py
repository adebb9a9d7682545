"""Four plain helpers the turn's modules still import (conversations/turns/, lease.py,
agent_sources.py, provider_circuit.py, sending.py); the webhook uses none of them. Each is the
ORM's or Django's cursor, nothing compiled or prepared ahead.
"""

from collections.abc import Sequence
from typing import Any, TypeVar

from django.db import connections, models

from compat.django_private import insert_unless_conflict, load_model

M = TypeVar("M", bound=models.Model)


def insert_row(
    model: type[models.Model],
    *,
    row: models.Model | None = None,
    ignore_conflicts: bool = False,
    **values: Any,
) -> Any:
    """Insert one row (`row`, or a new one from `values`), no model signals, and return its
    primary key; None when `ignore_conflicts` and a unique constraint kept it out."""
    if row is None:
        row = model(**values)
    if ignore_conflicts:
        return row.pk if insert_unless_conflict(row) else None
    model._base_manager.bulk_create([row])
    return row.pk


def update_row(model: type[models.Model], pk: Any, **values: Any) -> int:
    """``model.objects.filter(pk=pk).update(**values)`` for plain values (no expressions): the
    number of rows updated."""
    if any(hasattr(value, "resolve_expression") for value in values.values()):
        raise NotImplementedError("update_row writes plain values, not expressions")
    return int(model._base_manager.filter(pk=pk).update(**values))


def hot_cursor(connection: Any) -> Any:
    """Django's cursor of `connection`."""
    return connection.cursor()


def fetch_models(
    model: type[M], statement: str, params: Sequence[Any], fields: tuple[str, ...]
) -> list[M]:
    """The `model` instances of a hand-written SELECT of `fields` (attnames, in the order the
    statement selects them; the others deferred), as ``Model.objects.raw()`` would give them."""
    connection = connections[model._default_manager.db]
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        rows = cursor.fetchall()
    return [load_model(connection, model, row, fields) for row in rows]
