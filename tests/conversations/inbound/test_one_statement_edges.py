"""PostgreSQL's one-statement path where it declines or meets a race: no open, non-idle session
(nothing written, the general path decides), repeated wamids, an identity another open session
holds (the statement fails and falls back), and the queued turn's TTL."""

import logging
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone
from pytest_django import DjangoCaptureOnCommitCallbacks, Settings

from agents.states import SessionState
from conversations.inbound.deliveries import webhook_delivery_receive
from conversations.inbound.one_statement import (
    OneStatementReceipt,
    one_statement_receive,
)
from conversations.lease import lease_claim
from conversations.models import Direction, Instance, Message, Session, WebhookDelivery
from tests.conversations.inbound.conftest import T, make_session
from tests.conversations.inbound.one_statement_support import (
    HEADERS,
    TEXT,
    TURN_QUEUED_TTL,
    UNKNOWN_PHONE_NUMBER_ID,
    Rows,
    body,
    database_rows,
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
    ttl_boundary_cases,
)

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


# --- no open, non-idle session: nothing written, the general path decides --------------------


def receive_in_one_statement(raw: bytes, now: datetime | None = None) -> OneStatementReceipt | None:
    return one_statement_receive(
        parsed_message(raw),
        raw_body=raw,
        headers=HEADERS,
        now=timezone.now() if now is None else now,
    )


def test_a_new_customer_s_text_is_left_to_the_general_path_which_opens_a_session(
    instance: Instance,
) -> None:
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
    instance: Instance, settings: Settings
) -> None:
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
def test_a_session_quiet_for_exactly_session_idle_hours_still_takes_the_text(
    instance: Instance, settings: Settings
) -> None:
    # Inside the test's transaction (the statement gets a savepoint): only the idle rule matters.
    settings.SESSION_IDLE_HOURS = 24
    session = make_session(instance, last_message_at=T - timedelta(hours=24))

    receipt = receive_in_one_statement(body())

    assert receipt is not None
    assert (receipt.session_id, receipt.state) == (session.pk, SessionState.TRIAGE)
    session.refresh_from_db()
    assert session.last_message_at == T


def test_a_closed_session_is_left_to_the_general_path_which_opens_a_new_one(
    instance: Instance,
) -> None:
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
def test_a_text_for_an_unknown_or_inactive_number_writes_nothing_and_is_ignored(
    instance: Instance, number: str
) -> None:
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


def test_a_repeated_wamid_is_stored_once_and_every_delivery_is_kept(instance: Instance) -> None:
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
    instance: Instance, monkeypatch: pytest.MonkeyPatch
) -> None:
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
    holds_phone: Session,
    holds_user_id: Session,
    rows: tuple[Rows, Rows, Rows],
    delivery: WebhookDelivery,
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
    instance: Instance, caplog: pytest.LogCaptureFixture
) -> None:
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
    instance: Instance, django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks
) -> None:
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
    instance: Instance, django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks
) -> None:
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


def test_a_turn_is_enqueued_once_until_a_worker_starts_it_or_it_is_presumed_lost(
    instance: Instance,
) -> None:
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


def test_a_session_with_a_human_never_gets_a_turn_queued(instance: Instance) -> None:
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
    instance: Instance, queued_ago: timedelta, turn_queued: bool
) -> None:
    # The same boundary as `session_rules.turn_queue` (tests/conversations/inbound/test_turn_queue).
    now = timezone.now()
    before = now - queued_ago
    session = make_session(instance, customer_name="Maria Silva", turn_queued_at=before)

    receipt = receive_in_one_statement(body(), now=now)

    assert receipt is not None
    assert receipt.turn_queued is turn_queued
    session.refresh_from_db()
    assert session.turn_queued_at == (now if turn_queued else before)
