"""Django's private APIs: the one place the project touches them. Checked against Django 5.2
(`CHECKED_VERSIONS`, pinned to pyproject.toml by tests/compat/test_django_private.py).

Private APIs touched, and why:

- ``QueryDict._mutable`` (`freeze`): a copy built with ``mutable=True`` is made immutable again,
  like ``request.GET`` (config.middleware's NUL-free query string). Django has no public setter.
- The ``model_admin`` attribute ``ModelAdmin.get_urls`` sets on each view it wraps
  (`model_admin_of`): which admin a resolved admin view belongs to (config.middleware's check
  of an action's selected ids).
- ``Model._state.adding`` (`mark_saved`): a row inserted outside ``Model.save`` is marked saved,
  as ``Model.save`` does, so a later ``save()`` updates it.
- ``QuerySet._insert`` with ``on_conflict`` and ``returning_fields`` (`insert_unless_conflict`):
  the one INSERT ``bulk_create(ignore_conflicts=True)`` runs, asked for the primary key — the
  public method never says whether the row was inserted, and a savepoint around ``save()``
  costs two round trips on every row.
- ``Field.get_col``, ``DatabaseOperations.get_db_converters`` and ``Col.get_db_converters``
  (`load_model`): the converters ``SQLCompiler.get_converters`` applies to a selected column,
  applied to the row of a hand-written SELECT before the documented ``Model.from_db``.
- Undocumented names of Django's internal modules, re-exported (`__all__`): the template
  nodes ``VariableNode``, ``FilterExpression`` (``django.template.base``), ``IfNode``,
  ``TemplateLiteral``, ``CommentNode`` (``django.template.defaulttags``) that agents.templating
  walks to allow only its tags; ``DeferredAttribute`` (``django.db.models.query_utils``), the
  base of the decrypting field descriptor; ``LOOKUP_SEP``; the admin's ``unquote`` and
  ``flatten_fieldsets`` (``django.contrib.admin.utils``).
"""

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeVar, cast

from django.contrib.admin.utils import flatten_fieldsets, unquote
from django.db import models, router
from django.db.models.constants import LOOKUP_SEP, OnConflict
from django.db.models.query_utils import DeferredAttribute
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
CHECKED_VERSIONS = {"Django": "~=5.2.0"}


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


def insert_unless_conflict(row: models.Model) -> bool:
    """Insert `row` (``INSERT ... ON CONFLICT DO NOTHING RETURNING`` its primary key; SQLite's
    ``INSERT OR IGNORE``), no model signals, as ``bulk_create([row], ignore_conflicts=True)``
    inserts it; True, and `row` has its primary key and is saved, when it was inserted; False
    when a unique constraint kept it out. The database settles the race: a concurrent insert of
    the same key waits for the first transaction, then does nothing."""
    meta = row._meta
    fields = [
        field
        for field in meta.local_concrete_fields
        if not field.generated and (field is not meta.auto_field or row.pk is not None)
    ]
    using = router.db_for_write(type(row), instance=row)
    [returned] = type(row)._base_manager._insert(  # type: ignore[attr-defined]
        [row],
        fields=fields,
        returning_fields=meta.db_returning_fields,
        using=using,
        on_conflict=OnConflict.IGNORE,
    )
    if returned is None:
        return False
    for value, field in zip(returned, meta.db_returning_fields, strict=True):
        setattr(row, field.attname, value)
    row._state.db = using
    mark_saved(row)
    return True


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
