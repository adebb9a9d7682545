"""Django's (and, through its PostgreSQL backend, psycopg's) private APIs: the one place the
project touches them. Checked against Django 5.2 and psycopg 3.3 (`CHECKED_VERSIONS`, pinned
to pyproject.toml by tests/compat/test_django_private.py).

Private APIs touched, and why:

- ``QueryDict._mutable`` (`freeze`): a copy built with ``mutable=True`` is made immutable again,
  like ``request.GET`` (config.middleware's NUL-free query string). Django has no public setter.
- ``Model._state.adding`` (`mark_saved`): a row inserted by a compiled statement is marked
  saved, as ``Model.save`` does, so a later ``save()`` updates it.
- ``django.db.models.sql.InsertQuery``, ``Query.insert_values``, ``Query.get_compiler``,
  ``SQLInsertCompiler.returning_fields`` and ``.as_sql()`` (`compile_insert`): the INSERT the
  ORM compiles for ``QuerySet._insert``, compiled once and reused on the webhook's hot path.
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
from typing import TYPE_CHECKING, Any, cast

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
    "DeferredAttribute",  # conversations.encryption: the decrypting field descriptor's base
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


def _preparing_cursor_class() -> type:
    try:
        import psycopg
    except ImportError:  # SQLite-only installs never reach `prepared_cursor`
        return object

    class PreparingCursor(psycopg.Cursor):  # server-side binding, like Django's own option
        def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
            return super().execute(query, params, prepare=True)

    return PreparingCursor


_PreparingCursor = _preparing_cursor_class()


def logs_queries(connection: Any) -> bool:
    """Whether `connection` records its queries (DEBUG, ``CaptureQueriesContext``)."""
    return bool(connection.queries_logged)


def prepared_cursor(connection: Any) -> Any:
    """A Django cursor (its wrapper: execute wrappers, query logging, error translation) over a
    psycopg cursor that binds on the server and prepares each statement once per connection.
    PostgreSQL connections only."""
    connection.close_if_health_check_failed()
    connection.ensure_connection()
    raw = connection.connection
    if raw.prepare_threshold is None:
        raw.prepare_threshold = sys.maxsize  # prepare when asked (prepare=True), never by count
    with connection.wrap_database_errors:
        cursor = _PreparingCursor(raw)
    wrap = connection.make_debug_cursor if connection.queries_logged else connection.make_cursor
    return wrap(cursor)
