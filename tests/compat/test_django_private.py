"""compat.django_private: Django's (and psycopg's, through Django's PostgreSQL backend) private
APIs the project uses exist and behave as the adapter expects, on the versions pyproject.toml
pins — an upgrade of Django or psycopg fails here first."""

import sys

import pytest
from django.contrib import admin
from django.contrib.auth.models import Group
from django.db import connection
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models.sql import InsertQuery
from django.http import QueryDict
from django.urls import resolve

from compat import django_private
from compat.django_private import (
    CHECKED_VERSIONS,
    compile_insert,
    freeze,
    logs_queries,
    mark_saved,
    model_admin_of,
    prepared_cursor,
)
from tests.compat.pins import assert_pinned


def test_the_checked_versions_are_pyprojects_and_the_installed_ones() -> None:
    assert CHECKED_VERSIONS == {"Django": "~=5.2.0", "psycopg": "~=3.3"}
    assert_pinned(CHECKED_VERSIONS)


def test_the_private_apis_the_adapter_touches_exist() -> None:
    assert QueryDict()._mutable is False
    assert Group()._state.adding is True
    assert hasattr(InsertQuery, "insert_values")
    assert hasattr(InsertQuery, "get_compiler")
    for name in (
        "close_if_health_check_failed",
        "ensure_connection",
        "wrap_database_errors",
        "make_cursor",
        "make_debug_cursor",
        "queries_logged",
    ):
        assert hasattr(BaseDatabaseWrapper, name), name


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
def test_a_row_inserted_by_the_compiled_statement_and_marked_saved_updates_on_save() -> None:
    fields = [Group._meta.get_field("name")]
    statement = compile_insert(connection, Group, fields, ignore_conflicts=True)
    with connection.cursor() as cursor:
        cursor.execute(statement, ["lab"])
        [(pk,)] = [cursor.fetchone()]
        cursor.execute(statement, ["lab"])  # the unique name conflicts: nothing inserted
        conflicted = cursor.fetchone()
    row = Group(pk=pk, name="lab")
    mark_saved(row)
    row.name = "lab ops"
    row.save()

    assert conflicted is None
    assert list(Group.objects.filter(name__startswith="lab").values_list("pk", "name")) == [
        (pk, "lab ops")
    ]


@pytest.mark.django_db
def test_the_compiled_insert_without_ignore_conflicts_raises_on_a_conflict() -> None:
    from django.db import IntegrityError, transaction

    fields = [Group._meta.get_field("name")]
    statement = compile_insert(connection, Group, fields, ignore_conflicts=False)
    Group.objects.create(name="lab")

    with pytest.raises(IntegrityError), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(statement, ["lab"])

    assert list(Group.objects.filter(name__startswith="lab").values_list("name", flat=True)) == [
        "lab"
    ]


@pytest.mark.django_db
def test_logs_queries_follows_the_connections_query_log() -> None:
    from django.test.utils import CaptureQueriesContext

    before = logs_queries(connection)
    with CaptureQueriesContext(connection):
        during = logs_queries(connection)

    assert (before, during) == (False, True)


@pytest.mark.django_db
@pytest.mark.skipif(connection.vendor != "postgresql", reason="psycopg's prepared statements")
def test_the_prepared_cursor_prepares_its_statement_once_on_the_server() -> None:
    statement = "SELECT %s::int + 41 /* compat prepared cursor */"
    with prepared_cursor(connection) as cursor:
        results = []
        for n in (1, 2):
            cursor.execute(statement, [n])
            results.append(cursor.fetchone())
        wrapped = cursor.cursor
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE %s",
            ["%compat prepared cursor%"],
        )
        [(prepared,)] = cursor.fetchall()

    assert results == [(42,), (43,)]
    assert isinstance(wrapped, django_private._PreparingCursor)
    assert connection.connection.prepare_threshold == sys.maxsize
    assert prepared == 1


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


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(connection.vendor != "postgresql", reason="psycopg's prepared statements")
def test_the_prepared_cursor_is_reused_until_its_driver_connection_changes() -> None:
    with prepared_cursor(connection) as cursor:
        cursor.execute("SELECT %s::int", [1])
        first = cursor.cursor
    with prepared_cursor(connection) as cursor:
        cursor.execute("SELECT %s::int + 1", [1])
        again = cursor.cursor
        second_row = cursor.fetchone()
    connection.close()
    with prepared_cursor(connection) as cursor:
        cursor.execute("SELECT %s::int + 2", [1])
        reconnected = cursor.cursor
        third_row = cursor.fetchone()

    assert again is first
    assert second_row == (2,)
    assert first.closed is False
    assert reconnected is not first
    assert reconnected.connection is connection.connection
    assert third_row == (3,)


@pytest.mark.django_db
def test_load_model_with_only_takes_any_column_order_and_defers_the_rest() -> None:
    group = Group.objects.create(name="Suporte")
    with connection.cursor() as cursor:
        cursor.execute("SELECT name, id FROM auth_group WHERE id = %s", [group.pk])
        row = cursor.fetchone()

    loaded = django_private.load_model(connection, Group, row, ("name", "id"))

    assert (loaded.pk, loaded.name, loaded._state.adding) == (group.pk, "Suporte", False)
    assert loaded.get_deferred_fields() == set()
    with pytest.raises(ValueError, match=r"Group has no concrete fields \['nome'\]"):
        django_private.load_model(connection, Group, row, ("nome", "id"))
