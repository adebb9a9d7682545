"""The queue's selector (support.queue): who waits, since when, in what order, and what a
row shows (age, SLA colour, WhatsApp window, reason label, next action)."""

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import translation
from model_bakery import baker

from conversations.models import Direction, HandoffSummary, Instance, Message, Session
from support.queue import (
    SlaStatus,
    duration_text,
    handoff_reason_label,
    queue_entry,
    sla_status,
    waiting_count,
    waiting_sessions,
)

NOW = datetime(2026, 11, 30, 15, 0, tzinfo=UTC)


def minutes_ago(minutes: float) -> datetime:
    return NOW - timedelta(minutes=minutes)


def human(instance: Instance | None = None, **fields: Any) -> Session:
    """A session handed off `handed_off` minutes ago (default 10), its customer's last message
    just before the handoff."""
    handed_off_at = fields.pop("handed_off_at", minutes_ago(10))
    session: Session = baker.make(
        Session,
        instance=instance or baker.make(Instance),
        state="HUMAN",
        handoff_reason="model_requested",
        handed_off_at=handed_off_at,
        last_inbound_at=fields.pop("last_inbound_at", handed_off_at),
        **fields,
    )
    return session


def inbound_at(session: Session, at: datetime) -> Message:
    return baker.make(
        Message, session=session, direction=Direction.INBOUND, content="oi", wa_timestamp=at
    )


# --- Who waits, and since when ----------------------------------------------------------------


@pytest.mark.django_db
def test_who_is_waiting_and_who_is_not() -> None:
    instance = baker.make(Instance)
    no_reply = human(instance, customer_phone="5511900000001")
    reply_before_handoff = human(
        instance, customer_phone="5511900000002", last_staff_reply_at=minutes_ago(30)
    )
    newer_message = human(
        instance,
        customer_phone="5511900000003",
        last_staff_reply_at=minutes_ago(8),
        last_inbound_at=minutes_ago(5),
    )
    inbound_at(newer_message, minutes_ago(5))
    # Answered, and the customer has not written since: not waiting.
    human(
        instance,
        customer_phone="5511900000004",
        last_staff_reply_at=minutes_ago(8),
        last_inbound_at=minutes_ago(9),
    )
    # Not with a human: not in the queue.
    baker.make(Session, instance=instance, state="CLOSED", customer_phone="5511900000005")
    baker.make(Session, instance=instance, state="TRIAGE", customer_phone="5511900000006")

    listed = list(waiting_sessions())

    assert {s.pk for s in listed} == {no_reply.pk, reply_before_handoff.pk, newer_message.pk}
    assert waiting_count() == 3


@pytest.mark.django_db
def test_a_closed_session_leaves_the_queue_even_unanswered() -> None:
    session = human()
    session.state = "CLOSED"
    session.save()

    assert list(waiting_sessions()) == []
    assert waiting_count() == 0


@pytest.mark.django_db
def test_oldest_wait_first_with_the_exact_waiting_since() -> None:
    instance = baker.make(Instance)
    handed_off_5 = human(instance, customer_phone="5511900000001", handed_off_at=minutes_ago(5))
    handed_off_20 = human(instance, customer_phone="5511900000002", handed_off_at=minutes_ago(20))
    # Answered 15 minutes ago; the customer wrote at -12, -9 and -3: waiting since -12.
    replied = human(
        instance,
        customer_phone="5511900000003",
        handed_off_at=minutes_ago(40),
        last_staff_reply_at=minutes_ago(15),
        last_inbound_at=minutes_ago(3),
    )
    for at in (minutes_ago(16), minutes_ago(12), minutes_ago(9), minutes_ago(3)):
        inbound_at(replied, at)
    # A staff reply older than the handoff counts as none: waiting since the handoff (-8).
    old_reply = human(
        instance,
        customer_phone="5511900000004",
        handed_off_at=minutes_ago(8),
        last_staff_reply_at=minutes_ago(60),
    )

    listed = [(s.pk, vars(s)["waiting_since"]) for s in waiting_sessions()]

    assert listed == [
        (handed_off_20.pk, minutes_ago(20)),
        (replied.pk, minutes_ago(12)),
        (old_reply.pk, minutes_ago(8)),
        (handed_off_5.pk, minutes_ago(5)),
    ]


@pytest.mark.django_db
def test_waiting_since_falls_back_when_the_messages_have_no_whatsapp_time() -> None:
    replied = human(
        handed_off_at=minutes_ago(40),
        last_staff_reply_at=minutes_ago(15),
        last_inbound_at=minutes_ago(3),
    )
    baker.make(Message, session=replied, direction=Direction.INBOUND, wa_timestamp=None)
    # Without a handoff time (a session handed off before the column existed): its creation.
    legacy = human(
        handed_off_at=None,
        last_inbound_at=minutes_ago(50),
        created_at=minutes_ago(90),
        customer_phone="5511900000009",
    )

    listed = [(s.pk, vars(s)["waiting_since"]) for s in waiting_sessions()]

    assert listed == [(legacy.pk, minutes_ago(90)), (replied.pk, minutes_ago(3))]


@pytest.mark.django_db
def test_mine_lists_only_the_sessions_assigned_to_me() -> None:
    me, colleague = baker.make(User, _quantity=2)
    instance = baker.make(Instance)
    mine = human(instance, customer_phone="5511900000001", assigned_to=me)
    human(instance, customer_phone="5511900000002", assigned_to=colleague)
    human(instance, customer_phone="5511900000003")

    assert [s.pk for s in waiting_sessions(assigned_to_id=me.pk)] == [mine.pk]


@pytest.mark.django_db
def test_the_next_action_is_the_latest_summarys_or_none_before_any() -> None:
    instance = baker.make(Instance)
    summarised = human(instance, customer_phone="5511900000001", handed_off_at=minutes_ago(9))
    baker.make(HandoffSummary, session=summarised, next_action="Ligar", created_at=minutes_ago(8))
    baker.make(
        HandoffSummary,
        session=summarised,
        next_action="Enviar orçamento",
        created_at=minutes_ago(2),
    )
    pending = human(instance, customer_phone="5511900000002", handed_off_at=minutes_ago(1))

    listed = [(s.pk, vars(s)["summary_next_action"]) for s in waiting_sessions()]

    assert listed == [(summarised.pk, "Enviar orçamento"), (pending.pk, None)]


# --- What a row shows ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("waited", "expected"),
    [
        (timedelta(minutes=0), SlaStatus.OK),
        (timedelta(minutes=11, seconds=14), SlaStatus.OK),
        (timedelta(minutes=11, seconds=15), SlaStatus.NEAR),  # 75 % of 15 min
        (timedelta(minutes=14, seconds=59), SlaStatus.NEAR),
        (timedelta(minutes=15), SlaStatus.LATE),
        (timedelta(hours=3), SlaStatus.LATE),
    ],
)
def test_sla_status_against_15_minutes(waited: timedelta, expected: SlaStatus) -> None:
    assert sla_status(waited, sla_minutes=15) is expected


@pytest.mark.parametrize(
    ("delta", "expected"),
    [
        (timedelta(seconds=-30), "0 min"),
        (timedelta(seconds=59), "0 min"),
        (timedelta(minutes=12, seconds=40), "12 min"),
        (timedelta(hours=2, minutes=5), "2 h 05 min"),
        (timedelta(hours=23, minutes=59), "23 h 59 min"),
        (timedelta(days=3, hours=4, minutes=30), "3 d 4 h"),
    ],
)
def test_duration_text(delta: timedelta, expected: str) -> None:
    assert duration_text(delta) == expected


@pytest.mark.parametrize(
    ("reason", "detail", "expected"),
    [
        ("model_requested", "pedido_cliente", "Cliente pediu um atendente"),
        ("model_requested", "fora_escopo", "Pedido fora do catálogo"),
        ("model_requested", "", "Transferida pela assistente"),
        ("qualified_lead", "", "Lead qualificado"),
        ("staff_takeover", "", "Assumida pela equipe"),
        ("", "", "—"),
    ],
)
def test_handoff_reason_labels_in_portuguese(reason: str, detail: str, expected: str) -> None:
    with translation.override("pt-br"):
        assert handoff_reason_label(reason, detail) == expected


@pytest.mark.django_db
def test_a_rows_display_values() -> None:
    session = human(
        handed_off_at=minutes_ago(12),
        last_inbound_at=minutes_ago(60 * 20 + 30),  # the window closes in 3 h 30 min
        handoff_detail="pedido_cliente",
    )
    baker.make(HandoffSummary, session=session, next_action="")
    row = waiting_sessions().get()

    with translation.override("pt-br"):
        entry = queue_entry(row, now=NOW, sla_minutes=15)

    assert entry.waiting_since == minutes_ago(12)
    assert entry.waited == timedelta(minutes=12)
    assert entry.waited_text == "12 min"
    assert entry.sla is SlaStatus.NEAR
    assert entry.reason == "Cliente pediu um atendente"
    assert entry.next_action == "—"
    assert entry.window_closes_at == NOW + timedelta(hours=3, minutes=30)
    assert entry.window_text == "3 h 30 min"
    assert entry.window_open is True


@pytest.mark.django_db
def test_a_row_past_the_window_before_any_summary() -> None:
    human(handed_off_at=minutes_ago(30), last_inbound_at=NOW - timedelta(hours=24, seconds=1))
    row = waiting_sessions().get()

    with translation.override("pt-br"):
        entry = queue_entry(row, now=NOW, sla_minutes=15)

    assert entry.sla is SlaStatus.LATE
    assert entry.waited_text == "30 min"
    assert entry.next_action == "sem resumo: use “Gerar resumo” na conversa"
    assert entry.window_closes_at == NOW - timedelta(seconds=1)
    assert entry.window_text == "fechada"
    assert entry.window_open is False


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("handed_off_ago", "text"),
    [
        (timedelta(minutes=4, seconds=59), "resumo em preparo"),
        (timedelta(minutes=5), "resumo em preparo"),
        (timedelta(minutes=5, seconds=1), "sem resumo: use “Gerar resumo” na conversa"),
    ],
)
def test_a_summary_still_missing_five_minutes_after_the_handoff_is_said_to_be_missing(
    handed_off_ago: timedelta, text: str
) -> None:
    human(handed_off_at=NOW - handed_off_ago)

    with translation.override("pt-br"):
        entry = queue_entry(waiting_sessions().get(), now=NOW, sla_minutes=15)

    assert entry.next_action == text


@pytest.mark.django_db
def test_a_failed_summary_says_so_and_a_partial_one_keeps_its_next_action() -> None:
    failed = human(customer_phone="5511900000001")
    partial = human(customer_phone="5511900000002", handed_off_at=minutes_ago(9))
    HandoffSummary.objects.create(session=failed, error="APITimeoutError")
    HandoffSummary.objects.create(session=partial, next_action="Ligar", error="parcial")

    with translation.override("pt-br"):
        entries = [queue_entry(row, now=NOW, sla_minutes=15) for row in waiting_sessions()]

    assert [e.next_action for e in entries] == [
        "o resumo falhou: use “Gerar resumo” na conversa",
        "Ligar",
    ]


@pytest.mark.django_db
def test_a_simulated_session_is_never_in_the_queue() -> None:
    instance = baker.make(Instance)
    real = human(instance, customer_phone="5511900000001")
    human(instance, customer_phone="5500000000001", is_simulated=True)

    assert [s.pk for s in waiting_sessions()] == [real.pk]
    assert waiting_count() == 1
