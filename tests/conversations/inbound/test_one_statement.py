"""PostgreSQL's one-statement path for a known customer's text: the general path's rows, or none.

`conversations.inbound.one_statement` stores the commonest delivery (one TEXT message from a
customer with an open, non-idle session) in one data-modifying statement. Whatever it stores
must be exactly what the general path (`conversations.inbound.events`) stores for the same
delivery; whenever it cannot apply, it writes nothing and `webhook_delivery_receive` falls back.
"""

import json
import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone
from model_bakery import baker

from agents.states import SessionState
from conversations.inbound import deliveries, one_statement
from conversations.inbound.deliveries import webhook_delivery_receive
from conversations.inbound.one_statement import (
    OneStatementReceipt,
    one_statement_receive,
    single_text_message,
)
from conversations.inbound.session_rules import turn_queued_ttl
from conversations.lease import lease_claim
from conversations.models import Direction, Instance, Message, Session, WebhookDelivery
from conversations.whatsapp.payload import parse_payload
from tests.conversations.inbound.conftest import T, make_session
from tests.conversations.whatsapp.conftest import (
    CUSTOMER_PHONE,
    CUSTOMER_USER_ID,
    PHONE_NUMBER_ID,
    Recorder,
    encode,
    load_fixture,
    ttl_boundary_cases,
)

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

TURN_QUEUED_TTL = turn_queued_ttl()  # the settings' TTL, for the boundary tables below

UNKNOWN_PHONE_NUMBER_ID = "100000000000099"
HEADERS = {"Content-Type": "application/json", "User-Agent": "facebookexternalua"}
TEXT = "Olá, gostaria de um orçamento de análise de água."
AT_RECEIPT = "at receipt"


def body(
    fixture: str = "text",
    *,
    phone_number_id: str = PHONE_NUMBER_ID,
    wamid: str | None = None,
    timestamp: datetime | None = None,
) -> bytes:
    """A fixture's delivery, sent to `phone_number_id`, its message's id and time replaced."""
    document = load_fixture(fixture)
    value = document["entry"][0]["changes"][0]["value"]
    value["metadata"]["phone_number_id"] = phone_number_id
    [message] = value["messages"]
    if wamid is not None:
        message["id"] = wamid
    if timestamp is not None:
        message["timestamp"] = str(int(timestamp.timestamp()))
    return encode(document)


def parsed_message(raw: bytes) -> Any:
    message = single_text_message(parse_payload(json.loads(raw)))
    assert message is not None
    return message


def deliver(raw: bytes, turns: Recorder | None = None) -> WebhookDelivery:
    receipt = webhook_delivery_receive(
        raw_body=raw,
        headers=HEADERS,
        enqueue_turn=Recorder() if turns is None else turns,
        enqueue_send=Recorder(),
    )
    return WebhookDelivery.objects.get(pk=receipt.delivery_id)


@contextmanager
def statements() -> Iterator[list[str]]:
    """The first word of every statement run meanwhile (SAVEPOINT, WITH, INSERT...). An execute
    wrapper, not the query log: the log has no text for a statement prepared on the server."""
    kinds: list[str] = []

    def record(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        kinds.append(sql.split()[0])
        return execute(sql, params, many, context)

    with connection.execute_wrapper(record):
        yield kinds


@contextmanager
def general_path(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Choose the general path: the one-statement path declines, as when it does not apply."""
    with monkeypatch.context() as patch:
        patch.setattr(deliveries, "one_statement_receive", lambda message, **kwargs: None)
        yield


def deliver_in_one_statement(
    raw: bytes, turns: Recorder | None = None, *, lookups: int = 1
) -> WebhookDelivery:
    """`webhook_delivery_receive`, checked to have stored the delivery in one statement (one per
    identifier tried: user id first, then phone; a miss writes nothing)."""
    with statements() as kinds:
        receipt = webhook_delivery_receive(
            raw_body=raw,
            headers=HEADERS,
            enqueue_turn=Recorder() if turns is None else turns,
            enqueue_send=Recorder(),
        )
    assert kinds == ["WITH"] * lookups
    return WebhookDelivery.objects.get(pk=receipt.delivery_id)


def database_rows() -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """Every session, message and delivery, field by field."""
    return (
        list(Session.objects.order_by("pk").values()),
        list(Message.objects.order_by("pk").values()),
        list(WebhookDelivery.objects.order_by("pk").values()),
    )


# --- which payloads take the path ------------------------------------------------------------


@pytest.mark.django_db  # pure: no database needed, so spare it the autocommit tests' flush
def test_single_text_message_picks_the_one_text_kind_message_of_a_payload_and_nothing_else():
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


NAMED = {"customer_name": "Maria Silva"}
LATER = T + timedelta(hours=1)

EQUIVALENT_CASES = {
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


def test_the_one_statement_path_stores_exactly_what_the_general_path_stores(monkeypatch):
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
    for name in ("id", "session_id", "wa_message_id", "created_at", "processed_at"):
        del message[name]
    for name in ("id", "raw_body", "body_sha256", "received_at", "processed_at"):
        del delivery[name]
    return message, delivery


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
    general_instance = baker.make(Instance, phone_number_id=general_number, name="Geral")
    one_instance = baker.make(Instance, phone_number_id=one_number, name="Uma instrução")
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


def test_the_statement_names_every_column_of_the_message_and_the_delivery():
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


# --- no open, non-idle session: nothing written, the general path decides --------------------


def receive_in_one_statement(raw: bytes, now: datetime | None = None) -> OneStatementReceipt | None:
    return one_statement_receive(
        parsed_message(raw),
        raw_body=raw,
        headers=HEADERS,
        now=timezone.now() if now is None else now,
    )


def test_a_new_customer_s_text_is_left_to_the_general_path_which_opens_a_session(instance):
    raw = body()

    assert receive_in_one_statement(raw) is None
    assert database_rows() == ([], [], [])

    turns = Recorder()
    delivery = deliver(raw, turns)
    session = Session.objects.get()
    assert (
        session.customer_phone,
        session.customer_user_id,
        session.customer_name,
        session.state,
        session.last_message_at,
    ) == (CUSTOMER_PHONE, CUSTOMER_USER_ID, "Maria Silva", SessionState.TRIAGE, T)
    assert list(session.messages.values_list("wa_message_id", "content")) == [
        ("wamid.TEXT01", TEXT)
    ]
    assert (delivery.outcome, delivery.messages_count, turns.calls) == (
        "processed",
        1,
        [session.pk],
    )


def test_an_idle_session_is_left_to_the_general_path_which_closes_it_and_opens_another(
    instance, settings
):
    settings.SESSION_IDLE_HOURS = 24
    idle = make_session(
        instance,
        customer_name="Maria Silva",
        last_message_at=T - timedelta(hours=24, microseconds=1),
    )
    raw = body()
    rows = database_rows()

    assert receive_in_one_statement(raw) is None
    assert database_rows() == rows

    turns = Recorder()
    deliver(raw, turns)
    idle.refresh_from_db()
    new = Session.objects.exclude(pk=idle.pk).get()
    assert (idle.state, idle.closed_at is not None) == (SessionState.CLOSED, True)
    assert list(idle.messages.values_list("direction", "message_type")) == [
        (Direction.SYSTEM, "session_closed")
    ]
    assert list(new.messages.values_list("wa_message_id", flat=True)) == ["wamid.TEXT01"]
    assert turns.calls == [new.pk]


@pytest.mark.django_db
def test_a_session_quiet_for_exactly_session_idle_hours_still_takes_the_text(instance, settings):
    # Inside the test's transaction (the statement gets a savepoint): only the idle rule matters.
    settings.SESSION_IDLE_HOURS = 24
    session = make_session(instance, last_message_at=T - timedelta(hours=24))

    receipt = receive_in_one_statement(body())

    assert receipt is not None
    assert (receipt.session_id, receipt.state) == (session.pk, SessionState.TRIAGE)
    session.refresh_from_db()
    assert session.last_message_at == T


def test_a_closed_session_is_left_to_the_general_path_which_opens_a_new_one(instance):
    closed_at = T - timedelta(minutes=1)
    closed = make_session(instance, state=SessionState.CLOSED, closed_at=closed_at)
    raw = body()
    rows = database_rows()

    assert receive_in_one_statement(raw) is None
    assert database_rows() == rows

    deliver(raw)
    closed.refresh_from_db()
    new = Session.objects.exclude(pk=closed.pk).get()
    assert (closed.state, closed.closed_at, closed.messages.count()) == (
        SessionState.CLOSED,
        closed_at,
        0,
    )
    assert list(new.messages.values_list("wa_message_id", flat=True)) == ["wamid.TEXT01"]


@pytest.mark.parametrize("number", ["unknown", "inactive"])
def test_a_text_for_an_unknown_or_inactive_number_writes_nothing_and_is_ignored(instance, number):
    # The customer has an open session, but not on an active instance with that number.
    make_session(instance, customer_name="Maria Silva")
    if number == "inactive":
        Instance.objects.filter(pk=instance.pk).update(is_active=False)
        raw = body()
    else:
        raw = body(phone_number_id=UNKNOWN_PHONE_NUMBER_ID)
    sessions, messages, deliveries_before = database_rows()

    assert receive_in_one_statement(raw) is None
    assert database_rows() == (sessions, messages, deliveries_before)

    turns = Recorder()
    delivery = deliver(raw, turns)
    assert (delivery.outcome, delivery.messages_count, turns.calls) == ("ignored", 0, [])
    assert database_rows()[:2] == (sessions, [])


# --- duplicates ------------------------------------------------------------------------------


def test_a_repeated_wamid_is_stored_once_and_every_delivery_is_kept(instance):
    session = make_session(instance, customer_name="Maria Silva")
    raw = body()

    first = receive_in_one_statement(raw)
    second = receive_in_one_statement(raw)
    turns = Recorder()
    third = deliver_in_one_statement(raw, turns)

    [message] = Message.objects.all()
    first_id, second_id, third_id = WebhookDelivery.objects.order_by("pk").values_list(
        "pk", flat=True
    )
    assert first == OneStatementReceipt(
        delivery_id=first_id,
        session_id=session.pk,
        state=SessionState.TRIAGE,
        message_id=message.pk,
        turn_queued=True,
    )
    assert second == OneStatementReceipt(
        delivery_id=second_id,
        session_id=session.pk,
        state=SessionState.TRIAGE,
        message_id=None,
        turn_queued=False,
    )
    assert list(
        WebhookDelivery.objects.order_by("pk").values_list("pk", "outcome", "messages_count")
    ) == [(first_id, "processed", 1), (second_id, "processed", 0), (third_id, "processed", 0)]
    assert (third.pk, turns.calls) == (third_id, [])
    assert (message.session_id, message.wa_message_id) == (session.pk, "wamid.TEXT01")


def test_a_repeated_wamid_after_the_turn_started_queues_a_harmless_extra_turn(
    instance, monkeypatch
):
    # The one exception to "the general path's rows": the statement queues the turn before it
    # knows the message is a duplicate, so it enqueues it (deliveries._one_statement). The extra
    # task claims the lease, which clears the mark, and finds nothing pending.
    session = make_session(instance, customer_name="Maria Silva")
    raw = body()
    deliver_in_one_statement(raw)
    lease_claim(session_id=session.pk, now=timezone.now(), ttl=timedelta(minutes=5))
    general_turns, one_turns = Recorder(), Recorder()

    with general_path(monkeypatch):
        deliver(raw, general_turns)
    session.refresh_from_db()
    assert (general_turns.calls, session.turn_queued_at) == ([], None)

    # Another body carrying the same wamid: an identical one is only counted on its first row.
    repeated = deliver_in_one_statement(raw + b"\n", one_turns)
    session.refresh_from_db()
    assert (repeated.messages_count, one_turns.calls) == (0, [session.pk])
    assert session.turn_queued_at == repeated.processed_at  # both the receipt's time
    assert Message.objects.count() == 1


# --- identity conflicts ----------------------------------------------------------------------


def identity_conflict(instance: Instance) -> tuple[Session, Session]:
    """The customer's phone in one open session, their user id in another without a phone: a
    text from that phone and user id finds the second, whose phone the first holds."""
    holds_phone = make_session(instance, customer_user_id="", customer_name="Maria Silva")
    holds_user_id = make_session(instance, customer_phone="", customer_name="Maria Silva")
    return holds_phone, holds_user_id


def assert_stored_by_the_general_path(
    holds_phone: Session, holds_user_id: Session, rows: tuple, delivery: WebhookDelivery
) -> None:
    """The general path logs the conflict, leaves both identities and stores the text."""
    [message] = Message.objects.all()
    holds_user_id.refresh_from_db()
    assert (message.session_id, message.wa_message_id, message.processed_at) == (
        holds_user_id.pk,
        "wamid.TEXT01",
        None,
    )
    assert (
        holds_user_id.customer_phone,
        holds_user_id.customer_user_id,
        holds_user_id.last_message_at,
        holds_user_id.last_inbound_at,
        holds_user_id.turn_queued_at,
    ) == ("", CUSTOMER_USER_ID, T, T, message.created_at)
    assert list(Session.objects.filter(pk=holds_phone.pk).values()) == [
        row for row in rows[0] if row["id"] == holds_phone.pk
    ]
    assert (delivery.outcome, delivery.messages_count, WebhookDelivery.objects.count()) == (
        "processed",
        1,
        1,
    )


def conflict_logs(caplog: pytest.LogCaptureFixture) -> list[tuple[str, Any]]:
    return [
        (record.getMessage(), getattr(record, "error", None) or getattr(record, "fields", None))
        for record in caplog.records
        if record.getMessage() in ("whatsapp_one_statement_fallback", "whatsapp_identity_conflict")
    ]


def test_an_identity_another_open_session_holds_makes_the_statement_fail_and_fall_back(
    instance, caplog
):
    caplog.set_level(logging.INFO, logger="conversations.inbound")
    holds_phone, holds_user_id = identity_conflict(instance)
    raw = body()
    rows = database_rows()

    assert receive_in_one_statement(raw) is None
    assert database_rows() == rows

    turns = Recorder()
    delivery = deliver(raw, turns)
    assert_stored_by_the_general_path(holds_phone, holds_user_id, rows, delivery)
    assert turns.calls == [holds_user_id.pk]
    assert conflict_logs(caplog) == [
        ("whatsapp_one_statement_fallback", "IntegrityError"),  # receive_in_one_statement
        ("whatsapp_one_statement_fallback", "IntegrityError"),  # deliver's first try
        ("whatsapp_identity_conflict", ["customer_phone"]),
    ]


@pytest.mark.django_db
def test_inside_a_transaction_the_failed_statement_rolls_back_its_savepoint_only(
    instance, django_capture_on_commit_callbacks
):
    holds_phone, holds_user_id = identity_conflict(instance)
    raw = body()
    rows = database_rows()

    with statements() as kinds:
        assert receive_in_one_statement(raw) is None
    # The surrounding transaction is intact: it still reads, and what it wrote is there.
    assert database_rows() == rows
    assert kinds == ["SAVEPOINT", "WITH", "ROLLBACK", "RELEASE"]

    turns = Recorder()
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        delivery = deliver(raw, turns)
    assert_stored_by_the_general_path(holds_phone, holds_user_id, rows, delivery)
    assert (len(callbacks), turns.calls) == (1, [holds_user_id.pk])


@pytest.mark.django_db
def test_inside_a_transaction_the_statement_gets_a_savepoint_and_the_turn_waits_for_commit(
    instance, django_capture_on_commit_callbacks
):
    session = make_session(instance, customer_name="Maria Silva")
    turns = Recorder()

    with django_capture_on_commit_callbacks() as callbacks:
        with statements() as kinds:
            webhook_delivery_receive(
                raw_body=body(), headers=HEADERS, enqueue_turn=turns, enqueue_send=Recorder()
            )
        assert turns.calls == []
    assert kinds == ["SAVEPOINT", "WITH", "RELEASE"]
    [enqueue] = callbacks
    enqueue()
    assert turns.calls == [session.pk]
    assert list(session.messages.values_list("wa_message_id", flat=True)) == ["wamid.TEXT01"]


# --- the queued turn -------------------------------------------------------------------------


def test_a_turn_is_enqueued_once_until_a_worker_starts_it_or_it_is_presumed_lost(instance):
    session = make_session(instance, customer_name="Maria Silva")
    turns = Recorder()

    def text(n: int) -> tuple[Any, Any]:
        deliver_in_one_statement(
            body(wamid=f"wamid.QUEUE{n}", timestamp=T + timedelta(seconds=n)), turns
        )
        session.refresh_from_db()
        received = Message.objects.get(wa_message_id=f"wamid.QUEUE{n}").created_at
        return session.turn_queued_at, received

    queued_at, first = text(0)
    assert (turns.calls, queued_at) == ([session.pk], first)

    # A second text a second later: the turn enqueued for the first will take it too.
    assert text(1)[0] == first
    assert turns.calls == [session.pk]

    # A worker took the lease: the turn started, so the next text enqueues another.
    token = lease_claim(session_id=session.pk, now=timezone.now(), ttl=timedelta(minutes=5))
    assert token is not None
    session.refresh_from_db()
    assert session.turn_queued_at is None
    queued_at, third = text(2)
    assert (turns.calls, queued_at) == ([session.pk, session.pk], third)

    # A turn queued longer ago than the TTL never started: its task is presumed lost.
    Session.objects.filter(pk=session.pk).update(
        turn_queued_at=timezone.now() - TURN_QUEUED_TTL - timedelta(seconds=1)
    )
    queued_at, fourth = text(3)
    assert (turns.calls, queued_at) == ([session.pk] * 3, fourth)


def test_a_session_with_a_human_never_gets_a_turn_queued(instance):
    session = make_session(instance, customer_name="Maria Silva", state=SessionState.HUMAN)
    turns = Recorder()

    for n in range(2):
        deliver_in_one_statement(
            body(wamid=f"wamid.HUMAN{n}", timestamp=T + timedelta(seconds=n)), turns
        )

    session.refresh_from_db()
    assert (turns.calls, session.turn_queued_at) == ([], None)
    assert [
        processed_at == created_at
        for processed_at, created_at in session.messages.values_list("processed_at", "created_at")
    ] == [True, True]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("queued_ago", "turn_queued"),
    ttl_boundary_cases(TURN_QUEUED_TTL),
)
def test_the_statement_queues_the_turn_again_only_once_the_queued_one_is_older_than_the_ttl(
    instance, queued_ago, turn_queued
):
    # The same boundary as `session_rules.turn_queue` (tests/conversations/inbound/test_turn_queue).
    now = timezone.now()
    before = now - queued_ago
    session = make_session(instance, customer_name="Maria Silva", turn_queued_at=before)

    receipt = receive_in_one_statement(body(), now=now)

    assert receipt is not None
    assert receipt.turn_queued is turn_queued
    session.refresh_from_db()
    assert session.turn_queued_at == (now if turn_queued else before)
