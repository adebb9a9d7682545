"""Django's (and, through its PostgreSQL backend, psycopg's) private APIs: the one place the
project touches them. Checked against Django 5.2 and psycopg 3.3 (`CHECKED_VERSIONS`, pinned
to pyproject.toml by tests/compat/test_django_private.py).

Private APIs touched, and why:

- ``QueryDict._mutable`` (`freeze`): a copy built with ``mutable=True`` is made immutable again,
  like ``request.GET`` (config.middleware's NUL-free query string). Django has no public setter.
- The ``model_admin`` attribute ``ModelAdmin.get_urls`` sets on each view it wraps
  (`model_admin_of`): which admin a resolved admin view belongs to (config.middleware's check
  of an action's selected ids).
- ``Model._state.adding`` (`mark_saved`): a row inserted by a compiled statement is marked
  saved, as ``Model.save`` does, so a later ``save()`` updates it.
- ``django.db.models.sql.InsertQuery``, ``Query.insert_values``, ``Query.get_compiler``,
  ``SQLInsertCompiler.returning_fields`` and ``.as_sql()`` (`compile_insert`): the INSERT the
  ORM compiles for ``QuerySet._insert``, compiled once and reused on the webhook's hot path.
- ``Field.get_col``, ``DatabaseOperations.get_db_converters`` and ``Col.get_db_converters``
  (`load_model`): the converters ``SQLCompiler.get_converters`` applies to a selected column,
  applied to the row of a hand-written SELECT before the documented ``Model.from_db``.
- ``BaseDatabaseWrapper.connection`` (the driver connection), ``close_if_health_check_failed``,
  ``ensure_connection``, ``wrap_database_errors``, ``make_cursor`` / ``make_debug_cursor``,
  ``queries_logged`` (`prepared_cursor`, `logs_queries`): a Django cursor wrapper around a
  psycopg cursor of our own class, so execute wrappers, query logging and error translation
  still apply.
- Undocumented names of Django's internal modules, re-exported (`__all__`): the template
  nodes ``VariableNode``, ``FilterExpression`` (``django.template.base``), ``IfNode``,
  ``TemplateLiteral``, ``CommentNode`` (``django.template.defaulttags``) that agents.templating
  walks to allow only its tags; ``DeferredAttribute`` (``django.db.models.query_utils``), the
  base of the decrypting field descriptor; ``LOOKUP_SEP``; the admin's ``unquote`` and
  ``flatten_fieldsets`` (``django.contrib.admin.utils``).
- psycopg's ``Connection.prepare_threshold`` and ``Cursor.execute(prepare=True)`` are public
  psycopg APIs, but what they are set against is Django's private choice: its PostgreSQL backend
  sets ``prepare_threshold=None`` (for transaction-mode poolers), and psycopg then ignores
  ``prepare=True``. Only server-binding cursors (``psycopg.Cursor``) consult the threshold —
  Django's own bind on the client — so raising it prepares only the statements run here.
"""

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeVar, cast

from django.contrib.admin.utils import flatten_fieldsets, unquote
from django.db import models
from django.db.models.constants import LOOKUP_SEP, OnConflict
from django.db.models.query_utils import DeferredAttribute
from django.db.models.sql import InsertQuery
from django.http import QueryDict
from django.template.base import FilterExpression, VariableNode
from django.template.defaulttags import CommentNode, IfNode, TemplateLiteral

if TYPE_CHECKING:
    # Declared by django-stubs only: the type of an immutable QueryDict such as request.GET.
    from django.http.request import _ImmutableQueryDict

# Undocumented names imported from Django's internal modules, re-exported for the project:
__all__ = [
    "LOOKUP_SEP",  # conversations.admin.masking: a lookup's field name
    "CommentNode",  # agents.templating: the prompt templates' allowed tags
    "DeferredAttribute",  # conversations.privacy.encryption: the decrypting field descriptor's base
    "FilterExpression",  # agents.templating
    "IfNode",  # agents.templating
    "TemplateLiteral",  # agents.templating
    "VariableNode",  # agents.templating
    "flatten_fieldsets",  # versioning.admin
    "unquote",  # prompts_admin.preview, versioning.admin: an admin URL's object id
]

# Requirement specifiers this module was checked against, as declared in pyproject.toml.
CHECKED_VERSIONS = {"Django": "~=5.2.0", "psycopg": "~=3.3"}


def freeze(query: QueryDict) -> "_ImmutableQueryDict":
    """`query`, made immutable (as Django's ``request.GET`` is)."""
    query._mutable = False
    return cast("_ImmutableQueryDict", query)


def model_admin_of(view: Any) -> Any:
    """The `ModelAdmin` whose URLs serve `view`, or None for any other view."""
    return getattr(view, "model_admin", None)


def mark_saved(row: models.Model) -> None:
    """Mark `row` as in the database (``save()`` then updates it), as ``Model.save`` does."""
    row._state.adding = False


def compile_insert(
    connection: Any, model: type[models.Model], fields: list[Any], *, ignore_conflicts: bool
) -> str:
    """The ``INSERT ... RETURNING pk`` of one row of `model` over `fields` that the ORM compiles
    (``ON CONFLICT DO NOTHING`` when `ignore_conflicts`); its parameters are the fields' values
    in order."""
    query = InsertQuery(model, on_conflict=OnConflict.IGNORE if ignore_conflicts else None)
    query.insert_values(fields, [model()])
    compiler = query.get_compiler(connection=connection)
    compiler.returning_fields = [model._meta.pk]
    [(statement, _params)] = compiler.as_sql()
    return str(statement)


M = TypeVar("M", bound=models.Model)

# (database alias, model, the attnames loaded or None for all) -> (those attnames in the model's
# field order, the row's index of each, (index, converters, column) of each field that has
# converters).
_LoaderKey = tuple[str, type[models.Model], tuple[str, ...] | None]
_Loader = tuple[list[str], list[int], list[tuple[int, list[Any], Any]]]
_LOADERS: dict[_LoaderKey, _Loader] = {}


def select_columns(model: type[models.Model], alias: str) -> str:
    """The columns of `model`'s concrete fields, in `load_model`'s order, qualified by `alias`."""
    return ", ".join(f"{alias}.{field.column}" for field in model._meta.concrete_fields)


def load_model(
    connection: Any,
    model: type[M],
    values: Sequence[Any],
    only: tuple[str, ...] | None = None,
) -> M:
    """A `model` instance from the values of its concrete fields (`select_columns`) as one row of
    a hand-written SELECT returned them, built as the ORM builds a fetched row: the backend's and
    the field's converters (``SQLCompiler.get_converters``, e.g. SQLite's datetimes and UUIDs,
    JSON, the encrypted fields' decryption), then ``Model.from_db``. With `only` (attnames, the
    primary key's included), the row holds those fields in that order and the others are
    deferred, as ``.only()`` loads them."""
    key = (connection.alias, model, only)
    loader = _LOADERS.get(key)
    if loader is None:
        fields = [
            field for field in model._meta.concrete_fields if only is None or field.attname in only
        ]
        if only is not None and len(fields) != len(only):
            unknown = set(only) - {field.attname for field in fields}
            raise ValueError(f"{model.__name__} has no concrete fields {sorted(unknown)}")
        # `from_db` takes a partial row in the model's field order.
        positions = (
            list(range(len(fields)))
            if only is None
            else [only.index(field.attname) for field in fields]
        )
        converters = []
        for index, field in enumerate(fields):
            column = field.get_col(model._meta.db_table)
            found = connection.ops.get_db_converters(column) + column.get_db_converters(connection)
            if found:
                converters.append((index, found, column))
        loader = _LOADERS[key] = ([field.attname for field in fields], positions, converters)
    names, positions, converters = loader
    row = list(values) if only is None else [values[position] for position in positions]
    for index, functions, column in converters:
        value = row[index]
        for function in functions:
            value = function(value, column, connection)
        row[index] = value
    return model.from_db(connection.alias, names, row)


def _preparing_cursor_class() -> type:
    try:
        import psycopg
    except ImportError:  # SQLite-only installs never reach `prepared_cursor`
        return object

    class PreparingCursor(psycopg.Cursor):  # server-side binding, like Django's own option
        def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
            return super().execute(query, params, prepare=True)

        def close(self) -> None:
            # Reused for as long as its connection lasts (`prepared_cursor`): the Django
            # wrapper's ``with`` block ends here, and the next ``execute`` drops the results.
            pass

    return PreparingCursor


_PreparingCursor = _preparing_cursor_class()
# The attribute of a psycopg connection holding its `prepared_cursor` psycopg cursor.
_CURSOR_ATTRIBUTE = "_project_prepared_cursor"


def logs_queries(connection: Any) -> bool:
    """Whether `connection` records its queries (DEBUG, ``CaptureQueriesContext``)."""
    return bool(connection.queries_logged)


def prepared_cursor(connection: Any) -> Any:
    """A Django cursor (its wrapper: execute wrappers, query logging, error translation) over a
    psycopg cursor that binds on the server and prepares each statement once per connection.
    PostgreSQL connections only.

    The psycopg cursor is made once per driver connection and kept on it (a pooled connection
    keeps it across checkouts; one thread uses a driver connection at a time): creating one
    copies the connection's adapters map, which cost the worker more than the statements it
    runs (~15 a turn). It never closes (its ``close`` does nothing); it goes with its connection.
    """
    connection.close_if_health_check_failed()
    connection.ensure_connection()
    raw = connection.connection
    if raw.prepare_threshold is None:
        raw.prepare_threshold = sys.maxsize  # prepare when asked (prepare=True), never by count
    cursor = getattr(raw, _CURSOR_ATTRIBUTE, None)
    if cursor is None:
        with connection.wrap_database_errors:
            cursor = _PreparingCursor(raw)
        setattr(raw, _CURSOR_ATTRIBUTE, cursor)
    wrap = connection.make_debug_cursor if connection.queries_logged else connection.make_cursor
    return wrap(cursor)
