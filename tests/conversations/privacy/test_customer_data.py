"""A customer's LGPD requests: who is chosen (phone or WhatsApp user id, never an empty one),
what an export lists and an erasure cleans beyond the sessions (webhook bodies, replay results,
delivery statuses, the admin log), and how conversations are named in the admin log."""

import importlib
import json
from io import StringIO
from types import SimpleNamespace
from typing import Any

import pytest
from django.apps import apps as django_apps
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.auth.models import Permission
from django.contrib.contenttypes.models import ContentType
from django.core.management import CommandError, call_command
from django.db import connection
from django.utils import timezone

from conversations.models import (
    DeliveryStatusEvent,
    Instance,
    LLMCall,
    MediaStatus,
    Message,
    MessageMedia,
    ReadingStatus,
    Session,
    WebhookDelivery,
)
from conversations.privacy.customer_data import (
    CustomerSelector,
    InvalidSelector,
    body_split,
    customer_data_erase,
    customer_data_export,
    customer_selector,
    customer_sessions,
)
from conversations.privacy.retention import session_anonymise
from governance.models import ReplayResult, ReplayRun
from tests import baker_recipes as recipes

PHONE = "5511987650123"
OTHER_PHONE = "5521999998888"
USER_ID = "BR.7777666655554444"
NAME = "Joana Erasmo"


def customer(instance: Instance, **fields: Any) -> Session:
    values = {"customer_phone": PHONE, "customer_name": NAME, **fields}
    session: Session = recipes.session.make(instance=instance, **values)
    return session


def body(*values: dict[str, Any]) -> bytes:
    changes = [{"value": value, "field": "messages"} for value in values]
    return json.dumps(
        {"object": "whatsapp_business_account", "entry": [{"id": "1", "changes": changes}]}
    ).encode()


def text_value(phone: str, name: str, text: str, *, user_id: str = "") -> dict[str, Any]:
    contact: dict[str, Any] = {"profile": {"name": name}, "wa_id": phone}
    message: dict[str, Any] = {"from": phone, "id": f"wamid.{phone}", "type": "text"}
    if user_id:
        contact["user_id"] = user_id
        message["from_user_id"] = user_id
    message["text"] = {"body": text}
    return {
        "metadata": {"phone_number_id": recipes.PHONE_NUMBER_ID},
        "contacts": [contact],
        "messages": [message],
    }


# --- Who is chosen ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "selector"),
    [
        pytest.param({"phone": "12345678"}, CustomerSelector(phone="12345678"), id="8 digits"),
        pytest.param(
            {"phone": "1" * 20}, CustomerSelector(phone="1" * 20), id="20 digits (the column)"
        ),
        pytest.param(
            {"phone": " +55 (11) 98765-0123 "},
            CustomerSelector(phone="5511987650123"),
            id="written with punctuation",
        ),
        pytest.param({"user_id": USER_ID}, CustomerSelector(user_id=USER_ID), id="user id"),
        pytest.param(
            {"user_id": "B" * 128}, CustomerSelector(user_id="B" * 128), id="user id of 128"
        ),
    ],
)
def test_a_phone_or_a_user_id_chooses_the_customer(
    given: dict[str, str], selector: CustomerSelector
) -> None:
    assert customer_selector(**given) == selector


@pytest.mark.parametrize(
    ("given", "message"),
    [
        pytest.param(
            {}, "Informe o telefone ou o ID de usuário do WhatsApp do cliente.", id="none"
        ),
        pytest.param(
            {"phone": ""},
            "Informe o telefone ou o ID de usuário do WhatsApp do cliente.",
            id="empty",
        ),
        pytest.param(
            {"phone": "   ", "user_id": " "},
            "Informe o telefone ou o ID de usuário do WhatsApp do cliente.",
            id="blank",
        ),
        pytest.param(
            {"phone": "1234567"},
            "Use o telefone com o código do país, só os dígitos (de 8 a 20 dígitos).",
            id="7 digits",
        ),
        pytest.param(
            {"phone": "1" * 21},
            "Use o telefone com o código do país, só os dígitos (de 8 a 20 dígitos).",
            id="21 digits",
        ),
        pytest.param(
            {"phone": "maria"},
            "Use o telefone com o código do país, só os dígitos (de 8 a 20 dígitos).",
            id="letters",
        ),
        pytest.param(
            {"user_id": "B" * 129},
            "Um ID de usuário do WhatsApp tem até 128 caracteres e nenhum espaço.",
            id="user id of 129",
        ),
        pytest.param(
            {"user_id": "BR 123"},
            "Um ID de usuário do WhatsApp tem até 128 caracteres e nenhum espaço.",
            id="user id with a space",
        ),
        pytest.param(
            {"phone": PHONE, "user_id": USER_ID},
            "Informe o telefone ou o ID de usuário do WhatsApp, não os dois.",
            id="both",
        ),
    ],
)
def test_an_empty_or_malformed_selector_is_refused(given: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidSelector) as refused:
        customer_selector(**given)

    assert refused.value.message == message


@pytest.mark.django_db
def test_an_empty_phone_is_refused_and_no_session_without_a_phone_is_touched(
    instance: Instance,
) -> None:
    known_by_user_id = recipes.session.make(
        instance=instance, customer_phone="", customer_user_id=USER_ID, customer_name=NAME
    )

    with pytest.raises(CommandError) as refused:
        call_command("erase_customer_data", "--phone", "", "--no-input")

    assert str(refused.value) == "Informe o telefone ou o ID de usuário do WhatsApp do cliente."
    known_by_user_id.refresh_from_db()
    assert (known_by_user_id.customer_name, known_by_user_id.anonymised_at) == (NAME, None)


@pytest.mark.django_db
def test_the_commands_need_a_phone_or_a_user_id() -> None:
    with pytest.raises(CommandError) as refused:
        call_command("export_customer_data")

    assert str(refused.value) == "Error: one of the arguments --phone --user-id is required"


@pytest.mark.django_db
def test_a_customer_known_only_by_user_id_is_erased_by_it(instance: Instance) -> None:
    session = recipes.session.make(
        instance=instance, customer_phone="", customer_user_id=USER_ID, customer_name=NAME
    )
    stranger = recipes.session.make(instance=instance, customer_phone="", customer_user_id="BR.1")
    out = StringIO()

    call_command("erase_customer_data", "--user-id", USER_ID, "--no-input", stdout=out)

    assert out.getvalue() == (
        "Anonymised 1 conversation(s); removed the customer from 0 webhook body(ies).\n"
    )
    session.refresh_from_db()
    stranger.refresh_from_db()
    assert (session.customer_user_id, session.customer_name) == ("", "")
    assert (stranger.customer_user_id, stranger.anonymised_at) == ("BR.1", None)
    [event] = session.messages.filter(message_type="personal_data_erased")
    assert (event.direction, event.staff_user) == ("SYSTEM", None)


@pytest.mark.django_db
def test_a_phone_reaches_the_sessions_of_the_user_ids_its_sessions_carry(
    instance: Instance,
) -> None:
    second = Instance.objects.create(phone_number_id="100000000000002", name="Filial")
    by_phone = customer(instance, customer_user_id=USER_ID)
    by_user_id = customer(second, customer_phone="", customer_user_id=USER_ID)
    new_number = customer(
        second, customer_phone=OTHER_PHONE, customer_user_id=USER_ID, state="CLOSED"
    )
    stranger = customer(instance, customer_phone="5511900001111", customer_name="Ana")

    found = customer_sessions(CustomerSelector(phone=PHONE))

    assert [s.pk for s in found] == [by_phone.pk, by_user_id.pk, new_number.pk]
    assert stranger.pk not in [s.pk for s in customer_sessions(CustomerSelector(user_id=USER_ID))]


# --- Webhook bodies ---------------------------------------------------------------------------


def test_a_body_splits_into_the_customers_items_and_everyone_elses() -> None:
    raw = body(
        text_value(PHONE, NAME, "Oi"),
        {
            **text_value(OTHER_PHONE, "Ana", "Bom dia"),
            "statuses": [{"id": "wamid.X", "status": "read", "recipient_id": PHONE}],
        },
    )

    split = body_split(raw, frozenset({PHONE}))

    assert [
        item.get("wa_id") or item.get("from") or item["recipient_id"] for item in split.items
    ] == [
        PHONE,
        PHONE,
        PHONE,
    ]
    assert split.others == 2
    values = [c["value"] for c in split.rest["entry"][0]["changes"]]
    assert [(v["contacts"], [m["from"] for m in v["messages"]]) for v in values] == [
        ([], []),
        ([{"profile": {"name": "Ana"}, "wa_id": OTHER_PHONE}], [OTHER_PHONE]),
    ]
    assert values[1]["statuses"] == []


def test_a_body_that_is_not_a_whatsapp_document_cannot_be_split() -> None:
    assert body_split(b"not json " + PHONE.encode(), frozenset({PHONE})).rest is None
    assert body_split(b'["a list"]', frozenset({PHONE})).rest is None


@pytest.mark.django_db
def test_erasure_empties_the_customers_bodies_and_keeps_everyone_elses_items(
    instance: Instance,
) -> None:
    customer(instance, customer_user_id=USER_ID)
    alone = WebhookDelivery.objects.create(
        raw_body=body(text_value(PHONE, NAME, "Oi, sou a Joana")),
        headers={"x-hub-signature-256": "sha256=1"},
        messages_count=1,
        body_sha256="a" * 64,
    )
    by_user_id = WebhookDelivery.objects.create(
        raw_body=body(text_value("", NAME, "Oi", user_id=USER_ID)), body_sha256="b" * 64
    )
    mixed = WebhookDelivery.objects.create(
        raw_body=body(
            text_value(PHONE, NAME, "Oi"),
            text_value(OTHER_PHONE, "Ana", "Minha amiga Joana Erasmo indicou"),
        ),
        body_sha256="c" * 64,
        error="KeyError for Joana Erasmo",
    )
    not_json = WebhookDelivery.objects.create(raw_body=b"{" + PHONE.encode(), body_sha256="d" * 64)
    someone_else = WebhookDelivery.objects.create(
        raw_body=body(text_value(OTHER_PHONE, "Ana", "Oi")), body_sha256="e" * 64
    )
    # Found by the bytes of the phone, inside a longer number: nothing of the customer's.
    longer_number = WebhookDelivery.objects.create(
        raw_body=body(text_value(f"1{PHONE}", "Ana", "Oi")), body_sha256="9" * 64
    )

    report = customer_data_erase(CustomerSelector(phone=PHONE), now=timezone.now(), operator="ops")

    assert (report.sessions, report.webhook_deliveries) == (1, 4)
    for delivery in (alone, by_user_id, mixed, not_json, someone_else, longer_number):
        delivery.refresh_from_db()
    assert [bytes(d.raw_body) for d in (alone, by_user_id, not_json)] == [b"", b"", b""]
    assert (alone.headers, alone.messages_count, alone.body_sha256) == ({}, 1, "a" * 64)
    [_theirs, others] = json.loads(bytes(mixed.raw_body))["entry"][0]["changes"]
    assert others["value"]["contacts"] == [{"profile": {"name": "Ana"}, "wa_id": OTHER_PHONE}]
    assert others["value"]["messages"][0]["text"]["body"] == "Minha amiga J*** E*** indicou"
    assert mixed.error == "KeyError for J*** E***"
    assert bytes(someone_else.raw_body) == body(text_value(OTHER_PHONE, "Ana", "Oi"))
    assert bytes(longer_number.raw_body) == body(text_value(f"1{PHONE}", "Ana", "Oi"))


# --- Replay results, statuses, the admin log --------------------------------------------------


@pytest.mark.django_db
def test_anonymising_masks_the_replay_results_statuses_and_admin_log_of_the_session(
    instance: Instance,
) -> None:
    session = customer(instance, state="CLOSED", closed_at=timezone.now())
    sent = Message.objects.create(
        session=session, direction="OUTBOUND", content="Olá, Joana!", wa_message_id="wamid.OUT9"
    )
    status = DeliveryStatusEvent.objects.create(
        wa_message_id="wamid.OUT9",
        status="failed",
        message=sent,
        error_details=f"Recipient {PHONE} is not a WhatsApp user",
    )
    call = LLMCall.objects.create(session=session, agent="triagem", purpose="agent", model="m")
    run = ReplayRun.objects.create(agent="triagem", content="Rascunho", content_hash="h")
    result = ReplayResult.objects.create(
        run=run,
        llm_call=call,
        session=session,
        recorded_prompt_version="builtin",
        recorded_text="Olá, Joana!",
        replayed_text="Oi, Joana Erasmo, tudo bem?",
        replayed_raw='{"s":1}Oi, Joana Erasmo, tudo bem?',
    )
    entry = LogEntry.objects.create(
        user=recipes.staff_user.make(),
        content_type=ContentType.objects.get_for_model(Session),
        object_id=str(session.pk),
        object_repr=f"#{session.pk} {NAME}",
        action_flag=CHANGE,
        change_message=f"Ligou para {PHONE}",
    )

    assert session_anonymise(session.pk, now=timezone.now()) is True

    result.refresh_from_db()
    status.refresh_from_db()
    sent.refresh_from_db()
    entry.refresh_from_db()
    assert (result.recorded_text, result.replayed_text, result.replayed_raw) == (
        "Olá, J***!",
        "Oi, J*** E***, tudo bem?",
        '{"s":1}Oi, J*** E***, tudo bem?',
    )
    assert (status.wa_message_id, status.error_details) == (
        f"erased.{status.pk}",
        "Recipient ************* is not a WhatsApp user",
    )
    assert sent.wa_message_id is None
    assert (entry.object_repr, entry.change_message) == (
        f"Conversa #{session.pk}",
        "Ligou para *************",
    )


@pytest.mark.django_db
def test_a_conversation_is_named_by_its_id_in_the_admin_log(instance: Instance) -> None:
    session = customer(instance)

    LogEntry.objects.log_actions(
        user_id=recipes.staff_user.make().pk, queryset=[session], action_flag=CHANGE
    )

    assert (str(session), LogEntry.objects.get().object_repr) == (
        f"Conversa #{session.pk}",
        f"Conversa #{session.pk}",
    )


@pytest.mark.django_db
def test_the_migration_names_the_existing_entries_of_conversations_by_id(
    instance: Instance,
) -> None:
    session = customer(instance)
    user = recipes.staff_user.make()
    named = LogEntry.objects.create(
        user=user,
        content_type=ContentType.objects.get_for_model(Session),
        object_id=str(session.pk),
        object_repr=f"#{session.pk} {NAME}",
        action_flag=CHANGE,
    )
    other = LogEntry.objects.create(
        user=user,
        content_type=ContentType.objects.get_for_model(Instance),
        object_id=str(instance.pk),
        object_repr="Laboratório Demo (5511999990000)",
        action_flag=CHANGE,
    )
    migration = importlib.import_module(
        "conversations.migrations.0016_erase_customer_data_permission"
    )

    # The function reads only the editor's connection (SQLite refuses a schema editor inside
    # the test's transaction).
    migration.name_sessions_by_id(django_apps, SimpleNamespace(connection=connection))

    named.refresh_from_db()
    other.refresh_from_db()
    assert (named.object_repr, other.object_repr) == (
        f"Conversa #{session.pk}",
        "Laboratório Demo (5511999990000)",
    )


@pytest.mark.django_db
def test_no_group_has_the_permission_to_erase() -> None:
    permission = Permission.objects.get(
        content_type__app_label="conversations", codename="erase_customer_data"
    )

    assert (permission.name, list(permission.group_set.all())) == (
        "Can export and erase a customer's personal data",
        [],
    )


# --- Export -----------------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_export_adds_model_calls_replays_admin_log_and_webhook_items(
    instance: Instance,
) -> None:
    session = customer(instance, customer_user_id=USER_ID)
    call = LLMCall.objects.create(
        session=session,
        agent="triagem",
        purpose="agent",
        model="gpt-4o-mini",
        outcome="ok",
        raw_response='{"s":1}Olá, Joana!',
        context_snapshot={"customer_name": NAME},
    )
    run = ReplayRun.objects.create(agent="triagem", content="Rascunho", content_hash="h")
    ReplayResult.objects.create(
        run=run,
        llm_call=call,
        session=session,
        recorded_prompt_version="builtin",
        recorded_text="Olá, Joana!",
        replayed_text="Oi, Joana!",
    )
    LogEntry.objects.log_actions(
        user_id=recipes.staff_user.make().pk,
        queryset=[session],
        action_flag=CHANGE,
        change_message="Took the conversation over.",
    )
    WebhookDelivery.objects.create(
        raw_body=body(text_value(PHONE, NAME, "Oi"), text_value(OTHER_PHONE, "Ana", "Oi")),
        body_sha256="f" * 64,
    )

    export = customer_data_export(CustomerSelector(user_id=USER_ID))

    assert (export["phone"], export["user_id"]) == ("", USER_ID)
    [exported] = export["sessions"]
    assert (exported["customer_phone"], exported["customer_name"]) == (PHONE, NAME)
    [exported_call] = exported["model_calls"]
    assert (exported_call["raw_response"], exported_call["context_snapshot"]) == (
        '{"s":1}Olá, Joana!',
        {"customer_name": NAME},
    )
    assert [
        (r["run"], r["recorded_text"], r["replayed_text"]) for r in exported["replay_results"]
    ] == [(run.pk, "Olá, Joana!", "Oi, Joana!")]
    assert [(e["object"], e["change_message"]) for e in exported["admin_log"]] == [
        (f"Conversa #{session.pk}", "Took the conversation over.")
    ]
    [delivery] = export["webhook_deliveries"]
    assert delivery["items"] == [
        {"profile": {"name": NAME}, "wa_id": PHONE},
        {"from": PHONE, "id": f"wamid.{PHONE}", "type": "text", "text": {"body": "Oi"}},
    ]


@pytest.mark.django_db
def test_the_export_lists_each_media_of_the_messages(instance: Instance) -> None:
    session = customer(instance)
    report = Message.objects.create(
        session=session, direction="INBOUND", message_type="document", content="laudo.pdf"
    )
    MessageMedia.objects.create(
        message=report,
        kind="document",
        filename="laudo.pdf",
        mime_type="application/pdf",
        file_size=48_213,
        sha256="n4bQgYhMfWWaL+qgxVrQFaO/TxsrC4Is0V1sFbDwCgg=",
        status=MediaStatus.DOWNLOADED,
    )
    voice = Message.objects.create(session=session, direction="INBOUND", message_type="audio")
    MessageMedia.objects.create(
        message=voice,
        kind="audio",
        mime_type="audio/ogg; codecs=opus",
        voice=True,
        status=MediaStatus.EXPIRED,
        transcript="Quero analisar a água do poço",
        reading_status=ReadingStatus.DONE,
    )
    Message.objects.create(session=session, direction="OUTBOUND", content="Recebido!")

    [exported] = customer_data_export(CustomerSelector(phone=PHONE))["sessions"]

    assert [m["media"] for m in exported["messages"]] == [
        {
            "kind": "document",
            "file_name": "laudo.pdf",
            "mime_type": "application/pdf",
            "size": 48_213,
            "sha256": "n4bQgYhMfWWaL+qgxVrQFaO/TxsrC4Is0V1sFbDwCgg=",
            "status": "downloaded",
            "caption": "",
            "data": {},
            "transcript": "",
            "description": "",
        },
        {
            "kind": "audio",
            "file_name": "",
            "mime_type": "audio/ogg; codecs=opus",
            "size": None,
            "sha256": "",
            "status": "expired",
            "caption": "",
            "data": {},
            "transcript": "Quero analisar a água do poço",
            "description": "",
        },
        None,
    ]
