"""PostgreSQL's one-statement path for a known customer's text: the general path's rows, or none.

`conversations.inbound.one_statement` stores the commonest delivery (one TEXT message from a
customer with an open, non-idle session) in one data-modifying statement. Whatever it stores
must be exactly what the general path (`conversations.inbound.events`) stores for the same
delivery; whenever it cannot apply, it writes nothing and `webhook_delivery_receive` falls back.
"""

import re
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone

from agents.states import SessionState
from conversations.inbound import one_statement
from conversations.inbound.one_statement import (
    single_text_message,
)
from conversations.models import Direction, Message, Session, WebhookDelivery
from tests import baker_recipes as recipes
from tests.conversations.inbound.conftest import T, make_session
from tests.conversations.inbound.one_statement_support import (
    AT_RECEIPT,
    HEADERS,
    TEXT,
    TURN_QUEUED_TTL,
    body,
    deliver,
    deliver_in_one_statement,
    general_path,
    parsed_message,
    statements,
)
from tests.conversations.whatsapp.conftest import (
    CUSTOMER_PHONE,
    CUSTOMER_USER_ID,
    Recorder,
    load_fixture,
)
from whatsapp.payload import parse_payload

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


# --- which payloads take the path ------------------------------------------------------------


@pytest.mark.django_db  # pure: no database needed, so spare it the autocommit tests' flush
def test_single_text_message_picks_the_one_text_kind_message_of_a_payload_and_nothing_else() -> (
    None
):
    picked = {}
    for fixture in (
        "text",
        "interactive_button_reply",
        "interactive_list_reply",
        "button",
        "bsuid_only",
        "batch",
        "image",
        "reaction",
        "unsupported",
        "echo",
        "status_read",
        "system_user_changed_number",
    ):
        message = single_text_message(parse_payload(load_fixture(fixture)))
        picked[fixture] = None if message is None else message.wamid

    assert picked == {
        "text": "wamid.TEXT01",
        "interactive_button_reply": "wamid.BTNREPLY01",
        "interactive_list_reply": "wamid.LISTREPLY01",
        "button": "wamid.TPLBUTTON01",
        "bsuid_only": "wamid.BSUID01",
        "batch": None,
        "image": None,
        "reaction": None,
        "unsupported": None,
        "echo": None,
        "status_read": None,
        "system_user_changed_number": None,
    }


# --- the same rows as the general path -------------------------------------------------------

AS_BEFORE = "as before"


def stored(
    session: Session,
    delivery: WebhookDelivery,
    turns: Recorder,
    *,
    window: tuple[datetime, datetime],
    queued_before: datetime | None,
) -> dict[str, Any]:
    """What a delivery left in the database, with the receipt's time named, not compared."""
    session.refresh_from_db()
    [message] = session.messages.all()
    received = message.created_at
    assert delivery.processed_at is not None

    def moment(value: datetime | None) -> Any:
        if value is not None and value == received:
            return AT_RECEIPT
        if value is not None and value == queued_before:
            return AS_BEFORE
        return value

    return {
        "session": (
            session.state,
            session.last_message_at,
            session.last_inbound_at,
            session.customer_phone,
            session.customer_user_id,
            session.customer_name,
            moment(session.turn_queued_at),
        ),
        "message": (
            message.direction,
            message.message_type,
            message.content,
            message.wa_timestamp,
            moment(message.processed_at),
            window[0] <= received <= window[1],
        ),
        "delivery": (
            delivery.outcome,
            delivery.error,
            delivery.messages_count,
            delivery.statuses_count,
            delivery.headers,
            window[0] <= delivery.processed_at <= window[1],
        ),
        "turns": ["this session" if call == session.pk else call for call in turns.calls],
    }


def expected(
    *,
    state: str = SessionState.TRIAGE,
    times: tuple[datetime, datetime] = (T, T),
    identity: tuple[str, str, str] = (CUSTOMER_PHONE, CUSTOMER_USER_ID, "Maria Silva"),
    turn_queued_at: str | None = AT_RECEIPT,
    message: tuple[str, str] = ("text", TEXT),
    processed_at: str | None = None,
    turns: int = 1,
) -> dict[str, Any]:
    return {
        "session": (state, *times, *identity, turn_queued_at),
        "message": (Direction.INBOUND, *message, T, processed_at, True),
        "delivery": ("processed", "", 1, 0, HEADERS, True),
        "turns": ["this session"] * turns,
    }


NAMED: dict[str, Any] = {"customer_name": "Maria Silva"}
LATER = T + timedelta(hours=1)

# name: (fixture, the session's fields, how long ago its turn was queued, what is stored)
EQUIVALENT_CASES: dict[str, tuple[str, dict[str, Any], timedelta | None, dict[str, Any]]] = {
    "known customer in TRIAGE": ("text", NAMED, None, expected()),
    "known customer in CONFIRM": (
        "text",
        NAMED | {"state": SessionState.CONFIRM},
        None,
        expected(state=SessionState.CONFIRM),
    ),
    "known customer in HUMAN: read by staff, no turn": (
        "text",
        NAMED | {"state": SessionState.HUMAN},
        None,
        expected(state=SessionState.HUMAN, turn_queued_at=None, processed_at=AT_RECEIPT, turns=0),
    ),
    "session without the customer's name": ("text", {"customer_name": ""}, None, expected()),
    "session without the user id, found by phone": (
        "text",
        NAMED | {"customer_user_id": ""},
        None,
        expected(),
    ),
    "session without the phone, found by user id": (
        "text",
        NAMED | {"customer_phone": ""},
        None,
        expected(),
    ),
    "customer known only by user id": (
        "bsuid_only",
        {"customer_phone": "", "customer_user_id": "BR.5555555555555555"},
        None,
        expected(
            identity=("", "BR.5555555555555555", "Cliente Anônima"),
            message=("text", "Oi, vocês fazem análise de solo?"),
        ),
    ),
    "interactive button reply": (
        "interactive_button_reply",
        NAMED,
        None,
        expected(message=("interactive", "Sim, confirmo")),
    ),
    "template button": ("button", NAMED, None, expected(message=("button", "Quero um orçamento"))),
    "session whose times are newer: never moved backwards": (
        "text",
        NAMED | {"last_message_at": LATER, "last_inbound_at": LATER},
        None,
        expected(times=(LATER, LATER)),
    ),
    "session without a last message yet": (
        "text",
        NAMED | {"last_message_at": None},
        None,
        expected(),
    ),
    "turn queued 10 s ago: not queued again": (
        "text",
        NAMED,
        timedelta(seconds=10),
        expected(turn_queued_at=AS_BEFORE, turns=0),
    ),
    "turn queued longer ago than the TTL: queued again": (
        "text",
        NAMED,
        TURN_QUEUED_TTL + timedelta(seconds=1),
        expected(),
    ),
}


def test_the_one_statement_path_stores_exactly_what_the_general_path_stores(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Every case (one database flush for all: this module's tests run in autocommit, like the
    # webhook): two customers set up identically on two instances, one delivery per path.
    general_results, one_results = {}, {}
    for number, (name, (fixture, fields, queued_ago, _)) in enumerate(EQUIVALENT_CASES.items()):
        general_results[name], one_results[name] = both_paths(
            monkeypatch, number, fixture, fields, queued_ago
        )

    assert one_results == general_results
    assert one_results == {name: case[-1] for name, case in EQUIVALENT_CASES.items()}


def row_without_ids(
    session: Session, delivery_row: WebhookDelivery
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The session's message and the delivery, every column but ids, bodies and times."""
    [message] = Message.objects.filter(session=session).values()
    [delivery] = WebhookDelivery.objects.filter(pk=delivery_row.pk).values()
    message_skipped = ("id", "session_id", "wa_message_id", "created_at", "processed_at")
    delivery_skipped = ("id", "raw_body", "body_sha256", "received_at", "processed_at")
    return (
        {name: value for name, value in message.items() if name not in message_skipped},
        {name: value for name, value in delivery.items() if name not in delivery_skipped},
    )


def both_paths(
    monkeypatch: pytest.MonkeyPatch,
    number: int,
    fixture: str,
    fields: dict[str, Any],
    queued_ago: timedelta | None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """One delivery through the general path and its twin through the one-statement path, each
    to its own instance; what each stored."""
    general_number, one_number = f"2000000000{number:02d}1", f"2000000000{number:02d}2"
    general_instance = recipes.instance.make(phone_number_id=general_number, name="Geral")
    one_instance = recipes.instance.make(phone_number_id=one_number, name="Uma instrução")
    queued_before = None if queued_ago is None else timezone.now() - queued_ago
    start = fields | {"turn_queued_at": queued_before}
    general_session = make_session(general_instance, **start)
    one_session = make_session(one_instance, **start)
    message = parsed_message(body(fixture))
    general_wamid, one_wamid = f"{message.wamid}.{number}.GENERAL", f"{message.wamid}.{number}.ONE"
    general_body = body(fixture, phone_number_id=general_number, wamid=general_wamid)
    one_body = body(fixture, phone_number_id=one_number, wamid=one_wamid)
    general_turns, one_turns = Recorder(), Recorder()

    before = timezone.now()
    with general_path(monkeypatch), statements() as kinds:
        general_delivery = deliver(general_body, general_turns)
    # A session without the customer's user id is missed by the user id, found by the phone.
    lookups = 1 if one_session.customer_user_id == message.customer.user_id else 2
    one_delivery = deliver_in_one_statement(one_body, one_turns, lookups=lookups)
    after = timezone.now()

    assert "WITH" not in kinds
    assert (bytes(general_delivery.raw_body), bytes(one_delivery.raw_body)) == (
        general_body,
        one_body,
    )
    assert (
        general_session.messages.get().wa_message_id,
        one_session.messages.get().wa_message_id,
    ) == (general_wamid, one_wamid)
    # Every other column too: the statement's literal defaults are the ORM's.
    assert row_without_ids(general_session, general_delivery) == row_without_ids(
        one_session, one_delivery
    )
    window = (before, after)
    return (
        stored(
            general_session,
            general_delivery,
            general_turns,
            window=window,
            queued_before=queued_before,
        ),
        stored(one_session, one_delivery, one_turns, window=window, queued_before=queued_before),
    )


def test_the_statement_names_every_column_of_the_message_and_the_delivery() -> None:
    # Its values are literal: a column added to either model must be added to the statement.
    statement = one_statement.STATEMENTS["customer_phone"]

    def columns(table: str) -> set[str]:
        listed = re.search(rf"INSERT INTO {table} \((.*?)\)", statement, re.S)
        assert listed is not None
        return {column.strip() for column in listed.group(1).split(",")}

    assert columns("conversations_message") == {
        f.column for f in Message._meta.concrete_fields if not f.primary_key
    }
    assert columns("conversations_webhookdelivery") == {
        f.column for f in WebhookDelivery._meta.concrete_fields if not f.primary_key
    }
