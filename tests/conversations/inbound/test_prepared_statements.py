"""The webhook's hot statements are prepared once per PostgreSQL connection, and only they;
DB_PREPARE_HOT_STATEMENTS=False turns that off (for poolers that cannot keep them)."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from pytest_django import Settings

from conversations.inbound.deliveries import webhook_delivery_receive
from conversations.models import Message, Session
from tests.conversations.whatsapp.conftest import (
    Recorder,
    encode,
    load_fixture,
)

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def text(wamid: str) -> bytes:
    document = load_fixture("text")
    document["entry"][0]["changes"][0]["value"]["messages"][0]["id"] = wamid
    return encode(document)


def receive(raw: bytes) -> None:
    webhook_delivery_receive(
        raw_body=raw, headers={}, enqueue_turn=Recorder(), enqueue_send=Recorder()
    )


def prepared_statements() -> list[tuple[str, int]]:
    """This connection's prepared statements: (first words, times run with a generic plan)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT left(statement, 14), generic_plans + custom_plans FROM pg_prepared_statements"
        )
        return sorted(cursor.fetchall())


def test_the_one_statement_path_is_prepared_once_and_run_from_the_plan(
    known_customer: Session,
) -> None:
    connection.close()  # a fresh connection: no statement prepared yet

    for n in range(3):
        receive(text(f"wamid.PREPARED{n}"))

    # Prepared by the first delivery, then run three times; Django's own queries stay unprepared.
    assert prepared_statements() == [("WITH s AS (UPD", 3)]
    assert Message.objects.count() == 3


def test_with_db_prepare_hot_statements_false_nothing_is_prepared(
    known_customer: Session, settings: Settings
) -> None:
    settings.DB_PREPARE_HOT_STATEMENTS = False
    connection.close()

    for n in range(2):
        receive(text(f"wamid.UNPREPARED{n}"))

    assert prepared_statements() == []
    assert Message.objects.count() == 2


def test_where_queries_are_logged_the_log_shows_the_statement_s_text(
    known_customer: Session,
) -> None:
    connection.close()

    with CaptureQueriesContext(connection) as logged:
        receive(text("wamid.LOGGED"))

    assert [query["sql"].split()[:3] for query in logged.captured_queries] == [["WITH", "s", "AS"]]
    assert prepared_statements() == []  # the logged run took Django's usual cursor
