"""LGPD retention and requests: anonymising a conversation everywhere, the daily sweeps, and the
export / erase commands."""

import json
from datetime import UTC, datetime, timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone
from pytest_django import Settings

from conversations.models import (
    HandoffSummary,
    Instance,
    Lead,
    LLMCall,
    Message,
    SatisfactionSurvey,
    Session,
    WebhookDelivery,
)
from conversations.privacy.retention import (
    closed_sessions_anonymise,
    session_anonymise,
    webhook_bodies_delete,
)
from conversations.privacy.retention_tasks import apply_retention
from tests import baker_recipes as recipes

pytestmark = pytest.mark.django_db

PHONE = "5511988887777"
PERSONAL = ("Maria", "Souza", "988887777", "98888-7777", "52998224725", "529.982.247-25", "maria@")


def customer(instance: Instance, **fields: Any) -> Session:
    session: Session = recipes.session.make(
        instance=instance,
        customer_phone=PHONE,
        customer_name="Maria Souza",
        customer_document="52998224725",
        segment="AMBIENTAL",
        registration_data={
            "nome": "Maria Souza",
            "email": "maria@example.com",
            "telefone": "11 98888-7777",
            "cpf": "529.982.247-25",
        },
        **fields,
    )
    Message.objects.create(
        session=session, direction="INBOUND", content="Sou Maria Souza, maria@example.com"
    )
    Message.objects.create(
        session=session,
        direction="OUTBOUND",
        content="Obrigada, Maria! Confirmo o CPF 529.982.247-25 e o telefone (11) 98888-7777.",
        json_part={"cadastro": {"nome": "Maria Souza"}},
    )
    LLMCall.objects.create(
        session=session,
        agent="coleta",
        purpose="agent",
        model="gpt-4o-mini",
        tokens_input=900,
        raw_response='{"s":4}Obrigada, Maria Souza!',
        context_snapshot={"customer_name": "Maria Souza"},
    )
    HandoffSummary.objects.create(
        session=session,
        summary_text="Maria Souza (maria@example.com) quer análise de água.",
        key_points=["Cliente Maria Souza"],
        collected_data={"cpf": "529.982.247-25"},
        next_action="Ligar para 11 98888-7777",
    )
    Lead.objects.create(
        session=session, data={"nome_cliente": "Maria Souza", "email": "maria@example.com"}
    )
    return session


def everything_written(session: Session) -> str:
    session.refresh_from_db()
    parts = [
        session.customer_name,
        session.customer_phone,
        session.customer_document,
        json.dumps(session.registration_data, ensure_ascii=False),
        *Message.objects.filter(session=session).values_list("content", flat=True),
        *(
            json.dumps(j, ensure_ascii=False)
            for j in Message.objects.filter(session=session).values_list("json_part", flat=True)
        ),
        *LLMCall.objects.filter(session=session).values_list("raw_response", flat=True),
        *(
            json.dumps(j)
            for j in LLMCall.objects.filter(session=session).values_list(
                "context_snapshot", flat=True
            )
        ),
        *HandoffSummary.objects.filter(session=session)
        .values_list("summary_text", "next_action", flat=False)
        .get(),
        json.dumps(HandoffSummary.objects.get(session=session).key_points, ensure_ascii=False),
        json.dumps(HandoffSummary.objects.get(session=session).collected_data, ensure_ascii=False),
        json.dumps(Lead.objects.get(session=session).data, ensure_ascii=False),
    ]
    return "\n".join(str(p) for p in parts)


def test_anonymising_masks_the_customer_everywhere_and_keeps_the_aggregates(
    instance: Instance,
) -> None:
    now = timezone.now()
    session = customer(instance, state="CLOSED", closed_at=now - timedelta(days=400))
    assert all(value in everything_written(session) for value in ("Maria", "maria@"))

    assert session_anonymise(session.pk, now=now) is True

    written = everything_written(session)
    assert [value for value in PERSONAL if value in written] == []
    assert (session.customer_name, session.customer_phone, session.customer_document) == (
        "",
        "",
        "",
    )
    assert (session.state, session.segment, session.anonymised_at) == ("CLOSED", "AMBIENTAL", now)
    call = LLMCall.objects.get(session=session)
    assert (call.context_snapshot, call.tokens_input, call.model) == (None, 900, "gpt-4o-mini")
    assert session_anonymise(session.pk, now=now) is False


def test_the_daily_sweep_anonymises_only_conversations_closed_beyond_the_retention(
    settings: Settings, instance: Instance
) -> None:
    settings.RETENTION_DAYS = 365
    now = timezone.now()
    old = customer(instance, state="CLOSED", closed_at=now - timedelta(days=366))
    recent = recipes.session.make(
        instance=instance, state="CLOSED", closed_at=now - timedelta(days=30)
    )
    open_old = recipes.session.make(
        instance=instance, state="HUMAN", created_at=now - timedelta(days=800)
    )

    assert closed_sessions_anonymise(now=now) == 1

    assert [
        s.anonymised_at is not None
        for s in Session.objects.filter(pk__in=[old.pk, recent.pk, open_old.pk]).order_by("pk")
    ] == [True, False, False]


def test_old_webhook_bodies_are_emptied_and_their_metadata_kept(settings: Settings) -> None:
    settings.WEBHOOK_BODY_RETENTION_DAYS = 30
    now = timezone.now()
    old = WebhookDelivery.objects.create(
        raw_body=b'{"name": "Maria"}',
        headers={"x": "1"},
        received_at=now - timedelta(days=31),
        messages_count=1,
    )
    recent = WebhookDelivery.objects.create(
        raw_body=b'{"name": "Ana"}', received_at=now - timedelta(days=29)
    )

    assert webhook_bodies_delete(now=now) == 1
    assert webhook_bodies_delete(now=now) == 0

    old.refresh_from_db()
    recent.refresh_from_db()
    assert (bytes(old.raw_body), old.headers, old.messages_count) == (b"", {}, 1)
    assert bytes(recent.raw_body) == b'{"name": "Ana"}'


def test_export_prints_everything_held_about_the_customer(instance: Instance) -> None:
    session = customer(instance)
    out = StringIO()

    call_command("export_customer_data", "--phone", PHONE, stdout=out)

    export = json.loads(out.getvalue())
    assert export["phone"] == PHONE
    [exported] = export["sessions"]
    assert (exported["id"], exported["customer_name"], exported["customer_document"]) == (
        session.pk,
        "Maria Souza",
        "52998224725",
    )
    assert [m["content"] for m in exported["messages"]] == [
        "Sou Maria Souza, maria@example.com",
        "Obrigada, Maria! Confirmo o CPF 529.982.247-25 e o telefone (11) 98888-7777.",
    ]
    assert exported["lead"]["data"] == {"nome_cliente": "Maria Souza", "email": "maria@example.com"}
    assert exported["satisfaction"] is None


def test_export_includes_the_satisfaction_answer(instance: Instance) -> None:
    session = customer(instance, state="CLOSED")
    asked = datetime(2026, 11, 20, 14, 0, tzinfo=UTC)
    SatisfactionSurvey.objects.create(
        session=session,
        trigger="staff_close",
        style="buttons",
        asked_at=asked,
        score=5,
        answered_at=asked + timedelta(minutes=2),
    )
    out = StringIO()

    call_command("export_customer_data", "--phone", PHONE, stdout=out)

    [exported] = json.loads(out.getvalue())["sessions"]
    assert exported["satisfaction"] == {
        "asked_at": "2026-11-20T14:00:00+00:00",
        "not_sent": "",
        "score": 5,
        "answered_at": "2026-11-20T14:02:00+00:00",
    }


def test_erase_anonymises_every_conversation_of_the_phone_open_ones_included(
    instance: Instance,
) -> None:
    closed = customer(instance, state="CLOSED", closed_at=timezone.now())
    open_one = recipes.session.make(
        instance=instance, customer_phone=PHONE, customer_name="Maria Souza", state="TRIAGE"
    )
    out = StringIO()

    call_command("erase_customer_data", "--phone", PHONE, "--no-input", stdout=out)

    assert out.getvalue() == (
        "Anonymised 2 conversation(s); removed the customer from 0 webhook body(ies).\n"
    )
    assert [
        (s.customer_phone, s.customer_name, s.state, s.anonymised_at is not None)
        for s in Session.objects.filter(pk__in=[closed.pk, open_one.pk]).order_by("pk")
    ] == [("", "", "CLOSED", True), ("", "", "CLOSED", True)]
    with pytest.raises(CommandError) as none_left:
        call_command("erase_customer_data", "--phone", PHONE, "--no-input")
    assert str(none_left.value) == f"No conversation with {PHONE}."


def test_erase_asks_first_and_a_no_erases_nothing(
    monkeypatch: pytest.MonkeyPatch, instance: Instance
) -> None:
    session = customer(instance)
    monkeypatch.setattr("builtins.input", lambda prompt: "no")

    with pytest.raises(CommandError) as refused:
        call_command("erase_customer_data", "--phone", PHONE)

    assert str(refused.value) == "Nothing erased."
    session.refresh_from_db()
    assert (session.customer_name, session.anonymised_at) == ("Maria Souza", None)


def test_the_daily_task_runs_both_sweeps_and_beat_schedules_it(
    settings: Settings, instance: Instance
) -> None:
    now = timezone.now()
    customer(instance, state="CLOSED", closed_at=now - timedelta(days=settings.RETENTION_DAYS + 1))
    WebhookDelivery.objects.create(
        raw_body=b"{}", received_at=now - timedelta(days=settings.WEBHOOK_BODY_RETENTION_DAYS + 1)
    )

    assert apply_retention.delay().get() == {"sessions_anonymised": 1, "webhook_bodies_deleted": 1}
    assert settings.CELERY_BEAT_SCHEDULE["apply-retention"] == {
        "task": "conversations.apply_retention",
        "schedule": 86400.0,
    }


def test_anonymising_masks_an_interactive_message_s_body_and_options(instance: Instance) -> None:
    now = timezone.now()
    session = customer(instance, state="CLOSED", closed_at=now - timedelta(days=400))
    summary = "Confere: Maria Souza, CPF 529.982.247-25, maria@example.com. Está tudo certo?"
    Message.objects.create(
        session=session,
        direction="OUTBOUND",
        message_type="interactive",
        content=summary,
        interactive={
            "type": "button",
            "body": {"text": summary},
            "action": {
                "buttons": [
                    {"type": "reply", "reply": {"id": "opt1", "title": "Maria Souza"}},
                    {"type": "reply", "reply": {"id": "opt2", "title": "Outra pessoa"}},
                ]
            },
        },
    )

    session_anonymise(session.pk, now=now)

    [interactive] = Message.objects.filter(session=session, interactive__isnull=False)
    written = json.dumps(interactive.interactive, ensure_ascii=False)
    assert [value for value in PERSONAL if value in written] == []
    assert interactive.interactive is not None
    assert interactive.interactive["action"]["buttons"][1] == {
        "type": "reply",
        "reply": {"id": "opt2", "title": "Outra pessoa"},
    }
