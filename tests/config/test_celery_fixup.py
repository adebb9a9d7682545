"""Around each task the worker closes its database connection as Django does around a request
(`close_old_connections`: CONN_MAX_AGE, an unusable connection), not unconditionally as Celery's
own Django fix-up does: a persistent connection serves the next task (config/celery_fixup.py)."""

from collections.abc import Iterator

import pytest
from celery.fixups import django as celery_django
from django.db import connection

from config.celery import app
from config.celery_fixup import Fixup, WorkerFixup
from conversations.sending.worker import send_message

# Autocommit, as in a worker: inside a test's transaction any connection counts as unusable.
pytestmark = pytest.mark.django_db(transaction=True)
# Django never closes the test run's in-memory SQLite database (closing it would drop it), so
# what is closed or kept can be seen on PostgreSQL only; and a connection left out of autocommit
# would stay so for the tests after it.
needs_a_closable_connection = pytest.mark.skipif(
    connection.vendor != "postgresql",
    reason="needs PostgreSQL: Django never closes the in-memory SQLite test database",
)


@pytest.fixture
def max_age(request: pytest.FixtureRequest) -> Iterator[int]:
    """A fresh connection opened with CONN_MAX_AGE = the test's parameter."""
    saved = connection.settings_dict["CONN_MAX_AGE"]
    connection.close()
    connection.settings_dict["CONN_MAX_AGE"] = request.param
    connection.ensure_connection()
    yield request.param
    connection.close()
    connection.settings_dict["CONN_MAX_AGE"] = saved


def test_the_app_uses_the_project_s_fixup() -> None:
    [fixup] = [f for f in app._fixups if isinstance(f, celery_django.DjangoFixup)]  # type: ignore[attr-defined]

    assert type(fixup) is Fixup
    assert type(fixup.worker_fixup) is WorkerFixup


@needs_a_closable_connection
@pytest.mark.parametrize("max_age", [60], indirect=True)
def test_a_persistent_connection_serves_the_next_task(max_age: int) -> None:
    opened = connection.connection
    fixup = WorkerFixup(app)

    fixup.on_task_postrun(sender=send_message)
    fixup.on_task_prerun(sender=send_message)

    assert opened is not None
    assert connection.connection is opened


@needs_a_closable_connection
@pytest.mark.parametrize("max_age", [0], indirect=True)
def test_with_conn_max_age_0_the_connection_is_closed_after_each_task(max_age: int) -> None:
    WorkerFixup(app).on_task_postrun(sender=send_message)

    assert connection.connection is None


@needs_a_closable_connection
@pytest.mark.parametrize("max_age", [60], indirect=True)
def test_a_connection_left_in_a_transaction_is_closed(max_age: int) -> None:
    connection.set_autocommit(False)
    try:
        WorkerFixup(app).on_task_postrun(sender=send_message)

        assert connection.connection is None
    finally:
        if connection.connection is not None:
            connection.set_autocommit(True)


@needs_a_closable_connection
@pytest.mark.parametrize("max_age", [60], indirect=True)
def test_celery_s_own_fixup_would_close_it_after_every_task(max_age: int) -> None:
    celery_django.DjangoWorkerFixup(app).on_task_postrun(sender=send_message)  # type: ignore[attr-defined]

    assert connection.connection is None
