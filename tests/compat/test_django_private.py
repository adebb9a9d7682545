"""compat.django_private: Django's private APIs the project uses exist and behave as the adapter
expects, on the version pyproject.toml pins — an upgrade of Django fails here first."""

import pytest
from django.contrib import admin
from django.contrib.auth.models import Group
from django.db import connection
from django.db.models import QuerySet
from django.http import QueryDict
from django.test.utils import CaptureQueriesContext
from django.urls import resolve

from compat.django_private import (
    CHECKED_VERSIONS,
    freeze,
    insert_unless_conflict,
    model_admin_of,
)
from tests.compat.pins import assert_pinned


def test_the_checked_versions_are_pyprojects_and_the_installed_ones() -> None:
    assert CHECKED_VERSIONS == {"Django": "~=5.2.0"}
    assert_pinned(CHECKED_VERSIONS)


def test_the_private_apis_the_adapter_touches_exist() -> None:
    assert QueryDict()._mutable is False
    assert Group()._state.adding is True
    assert hasattr(QuerySet, "_insert")


def test_an_admin_view_names_its_model_admin_and_another_view_none() -> None:
    changelist = resolve("/admin/auth/group/").func

    assert model_admin_of(changelist) is admin.site._registry[Group]
    assert model_admin_of(resolve("/admin/").func) is None


def test_freeze_makes_a_mutable_query_dict_immutable_and_keeps_its_values() -> None:
    query = QueryDict(mutable=True)
    query.setlist("q", ["a", "b"])

    frozen = freeze(query)

    assert frozen is query
    with pytest.raises(AttributeError, match="This QueryDict instance is immutable"):
        frozen["other"] = "x"  # type: ignore[misc]  # the write the types refuse too
    assert list(frozen.lists()) == [("q", ["a", "b"])]


@pytest.mark.django_db
def test_insert_unless_conflict_inserts_once_and_the_row_then_updates_on_save() -> None:
    row = Group(name="lab")
    again = Group(name="lab")

    with CaptureQueriesContext(connection) as queries:
        inserted = insert_unless_conflict(row)
        conflicted = insert_unless_conflict(again)  # the unique name conflicts: nothing inserted
    row.name = "lab ops"
    row.save()

    assert (inserted, conflicted, again.pk is None) == (True, False, True)
    assert (row._state.adding, again._state.adding) == (False, True)
    assert [query["sql"].split()[0] for query in queries.captured_queries] == ["INSERT", "INSERT"]
    assert list(Group.objects.filter(name__startswith="lab").values_list("pk", "name")) == [
        (row.pk, "lab ops")
    ]


def test_the_reexported_internal_names_exist_and_behave_as_the_project_uses_them() -> None:
    from django.contrib.admin.utils import quote
    from django.db.models import CharField
    from django.template import Engine

    from compat.django_private import (
        LOOKUP_SEP,
        CommentNode,
        DeferredAttribute,
        FilterExpression,
        IfNode,
        TemplateLiteral,
        VariableNode,
        flatten_fieldsets,
        unquote,
    )

    template = Engine().from_string(
        "{% if a == 1 %}{{ b|upper }}{% endif %}{% comment %}note{% endcomment %}"
    )
    if_node, comment_node = template.nodelist
    assert isinstance(if_node, IfNode)
    [(condition, branch)] = if_node.conditions_nodelists
    [variable_node] = branch

    assert (type(if_node), type(comment_node)) == (IfNode, CommentNode)
    assert condition is not None
    assert isinstance(condition.first, TemplateLiteral)
    assert type(variable_node) is VariableNode
    assert isinstance(variable_node.filter_expression, FilterExpression)
    assert CharField.descriptor_class is DeferredAttribute
    assert LOOKUP_SEP == "__"
    assert unquote(quote("a/b_c:1")) == "a/b_c:1"
    assert flatten_fieldsets([(None, {"fields": ["a", ("b", "c")]})]) == ["a", "b", "c"]


@pytest.mark.django_db
def test_the_conventions_used_in_place_hold_field_values_in_dict_and_backend_ops() -> None:
    """Left where they are used (docs/decisions/0033-private-apis-behind-adapters.md), pinned here: a loaded field's value is in the
    instance ``__dict__`` under its attname and a deferred one is not (conversations.privacy.personal_data,
    conversations.admin.logs); the backend operations the hot statements call exist."""
    from django.db.backends.base.operations import BaseDatabaseOperations

    group = Group.objects.create(name="lab")
    loaded = Group.objects.get(pk=group.pk)
    deferred = Group.objects.defer("name").get(pk=group.pk)

    assert loaded.__dict__["name"] == "lab"
    assert "name" not in deferred.__dict__
    assert deferred.get_deferred_fields() == {"name"}
    assert hasattr(BaseDatabaseOperations, "adapt_datetimefield_value")
    assert hasattr(BaseDatabaseOperations, "quote_name")
