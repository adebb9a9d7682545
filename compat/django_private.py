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
- Undocumented names of Django's internal modules, re-exported (`__all__`): the template
  nodes ``VariableNode``, ``FilterExpression`` (``django.template.base``), ``IfNode``,
  ``TemplateLiteral``, ``CommentNode`` (``django.template.defaulttags``) that agents.templating
  walks to allow only its tags; ``DeferredAttribute`` (``django.db.models.query_utils``), the
  base of the decrypting field descriptor; ``LOOKUP_SEP``; the admin's ``unquote`` and
  ``flatten_fieldsets`` (``django.contrib.admin.utils``).
"""

from typing import TYPE_CHECKING, Any, cast

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
