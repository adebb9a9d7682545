"""A Brazilian mobile with or without its ninth digit is one customer: the webhook continues the
same session (and so the same lead and queue entry), the session keeps the wa_id WhatsApp gave
last and the replies go there; the customer data requests find both forms."""

from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from model_bakery import baker
from pytest_django import DjangoCaptureOnCommitCallbacks

from agents.states import SessionState
from conversations.models import Direction, Instance, Lead, Session, WebhookDelivery
from conversations.privacy.customer_data import (
    CustomerSelector,
    customer_data_erase,
    customer_find,
)
from tests import baker_recipes as recipes
from tests.fakes.graph_server import FakeGraphAPI
from tests.fakes.openai_server import FakeOpenAIServer
from tests.helpers.inbound import Receiver, T, messages
from tests.helpers.meta_payloads import CUSTOMER_USER_ID, encode, load_fixture, signed_post

pytestmark = pytest.mark.django_db

WITH_NINTH = "5511987654321"  # the fixtures' customer
WITHOUT_NINTH = "551187654321"


def text_from(phone: str, *, wamid: str, at: int = 0, body: str = "Oi, ainda estou aqui") -> bytes:
    """The fixtures' customer's text from `phone`, `at` seconds after T, without a user id (the
    phone is then all that names them)."""
    document = load_fixture("text")
    value = document["entry"][0]["changes"][0]["value"]
    [contact] = value["contacts"]
    contact["wa_id"] = phone
    del contact["user_id"]
    [message] = value["messages"]
    message.update(id=wamid, timestamp=str(int(T.timestamp()) + at), text={"body": body})
    message["from"] = phone
    del message["from_user_id"]
    return encode(document)


def customer_session(instance: Instance, phone: str, **fields: Any) -> Session:
    before = T - timedelta(minutes=5)
    defaults = {"last_message_at": before, "last_inbound_at": before}
    session: Session = recipes.session.make(
        instance=instance, customer_phone=phone, customer_name="Maria Silva", **defaults | fields
    )
    return session


@pytest.mark.parametrize(
    ("first", "then"),
    [(WITH_NINTH, WITHOUT_NINTH), (WITHOUT_NINTH, WITH_NINTH)],
    ids=["then without the ninth digit", "then with it"],
)
def test_a_customer_writing_in_the_other_form_continues_the_same_session_and_lead(
    instance: Instance, receive: Receiver, first: str, then: str
) -> None:
    session = customer_session(instance, first, state=SessionState.CONFIRM)
    lead = baker.make(Lead, session=session, data={"nome_cliente": "Maria Silva"})

    receive(text_from(then, wamid="wamid.OTHERFORM"))

    assert list(Session.objects.values_list("pk", flat=True)) == [session.pk]
    session.refresh_from_db()
    assert (session.customer_phone, session.customer_phone_key, session.state) == (
        then,
        WITH_NINTH,
        SessionState.CONFIRM,
    )
    assert [m.wa_message_id for m in messages(session, Direction.INBOUND)] == ["wamid.OTHERFORM"]
    assert list(Lead.objects.values_list("pk", "session_id")) == [(lead.pk, session.pk)]
    assert receive.turns.calls == [session.pk]


@pytest.mark.parametrize(
    ("late_at", "phone"),
    [
        pytest.param(-1, WITH_NINTH, id="1 s older than the last: the phone stays"),
        pytest.param(0, WITHOUT_NINTH, id="the same second: the phone changes"),
        pytest.param(1, WITHOUT_NINTH, id="1 s newer: the phone changes"),
    ],
)
def test_the_session_s_phone_is_the_form_of_the_customer_s_newest_message(
    instance: Instance, receive: Receiver, late_at: int, phone: str
) -> None:
    session = customer_session(instance, WITH_NINTH, last_inbound_at=T)

    receive(text_from(WITHOUT_NINTH, wamid="wamid.LATE", at=late_at))

    session.refresh_from_db()
    assert (session.customer_phone, session.customer_phone_key) == (phone, WITH_NINTH)
    assert Session.objects.count() == 1


def test_a_new_customer_without_the_ninth_digit_gets_a_session_keyed_with_it(
    instance: Instance, receive: Receiver
) -> None:
    receive(text_from(WITHOUT_NINTH, wamid="wamid.NEW"))
    receive(text_from(WITH_NINTH, wamid="wamid.NEXT", at=1))

    [session] = Session.objects.all()
    assert (session.customer_phone, session.customer_phone_key) == (WITH_NINTH, WITH_NINTH)
    assert len(messages(session, Direction.INBOUND)) == 2


def test_both_forms_in_one_delivery_are_one_customer(instance: Instance, receive: Receiver) -> None:
    document = load_fixture("text")
    [message] = document["entry"][0]["changes"][0]["value"]["messages"]
    other = load_fixture("text")["entry"][0]["changes"][0]["value"]["messages"][0]
    other.update(id="wamid.OTHERFORM", timestamp=str(int(T.timestamp()) + 1))
    other["from"] = WITHOUT_NINTH
    del other["from_user_id"]
    document["entry"][0]["changes"][0]["value"]["messages"] = [message, other]

    receive(encode(document))

    [session] = Session.objects.all()
    assert len(messages(session, Direction.INBOUND)) == 2


def test_a_landline_is_never_taken_for_a_mobile_without_its_ninth_digit(
    instance: Instance, receive: Receiver
) -> None:
    mobile = customer_session(instance, "5511933334444")

    receive(text_from("551133334444", wamid="wamid.LANDLINE"))

    assert Session.objects.count() == 2
    mobile.refresh_from_db()
    assert mobile.customer_phone == "5511933334444"


def test_another_open_session_holding_the_new_form_keeps_each_session_s_phone(
    instance: Instance, receive: Receiver
) -> None:
    # Two open sessions of one customer from before the key (one in each form): the message
    # goes to the one of its own form, and neither phone moves.
    without = customer_session(instance, WITHOUT_NINTH)
    with_ninth = customer_session(instance, WITH_NINTH)

    receive(text_from(WITHOUT_NINTH, wamid="wamid.OWNFORM"))

    [message] = without.messages.all()
    assert message.wa_message_id == "wamid.OWNFORM"
    assert sorted(Session.objects.values_list("customer_phone", flat=True)) == sorted(
        [WITHOUT_NINTH, WITH_NINTH]
    )
    assert not with_ninth.messages.exists()


def test_a_session_found_by_user_id_keeps_its_phone_when_another_holds_the_new_form(
    instance: Instance, receive: Receiver
) -> None:
    by_user_id = customer_session(instance, WITHOUT_NINTH, customer_user_id=CUSTOMER_USER_ID)
    customer_session(instance, WITH_NINTH)

    delivery = receive("text")  # from WITH_NINTH, with the user id

    assert delivery.outcome == "processed"
    [message] = by_user_id.messages.all()
    assert message.wa_message_id == "wamid.TEXT01"
    by_user_id.refresh_from_db()
    assert by_user_id.customer_phone == WITHOUT_NINTH


def test_an_identity_change_writes_the_new_phone_s_key(
    instance: Instance, receive: Receiver
) -> None:
    session = recipes.known_customer.make(instance=instance)

    receive("system_user_changed_number")

    session.refresh_from_db()
    assert (session.customer_phone, session.customer_phone_key) == (
        "5511912340000",
        "5511912340000",
    )


def test_a_session_saved_with_a_phone_gets_its_key() -> None:
    session = baker.make(Session, customer_phone=WITHOUT_NINTH)

    session.customer_phone = "5521966554433"
    session.save(update_fields=["customer_phone"])

    session.refresh_from_db()
    assert session.customer_phone_key == "5521966554433"
    assert Session.objects.get(customer_phone_key="5521966554433") == session


@pytest.mark.parametrize("asked", [WITH_NINTH, WITHOUT_NINTH])
def test_the_customer_data_requests_find_both_forms(
    instance: Instance, receive: Receiver, asked: str
) -> None:
    receive(text_from(WITH_NINTH, wamid="wamid.WITH"))
    receive(text_from(WITHOUT_NINTH, wamid="wamid.WITHOUT", at=1))
    earlier = customer_session(instance, WITHOUT_NINTH, state=SessionState.CLOSED)

    found = customer_find(CustomerSelector(phone=asked))

    assert sorted(s.pk for s in found.sessions) == sorted(
        [earlier.pk, *Session.objects.exclude(pk=earlier.pk).values_list("pk", flat=True)]
    )
    assert len(found.sessions) == 2
    assert found.webhook_deliveries == 2


def test_an_erasure_asked_in_one_form_covers_the_other_and_clears_the_key(
    instance: Instance, receive: Receiver
) -> None:
    receive(text_from(WITHOUT_NINTH, wamid="wamid.WITHOUT"))
    receive(text_from(WITH_NINTH, wamid="wamid.WITH", at=1))

    report = customer_data_erase(
        CustomerSelector(phone=WITHOUT_NINTH), now=T + timedelta(hours=1), operator="dpo"
    )

    [session] = Session.objects.all()
    assert (session.customer_phone, session.customer_phone_key, session.anonymised_at) == (
        "",
        "",
        T + timedelta(hours=1),
    )
    assert report.webhook_deliveries == 2
    bodies = b"".join(bytes(d.raw_body) for d in WebhookDelivery.objects.all())
    assert (WITH_NINTH.encode() in bodies, WITHOUT_NINTH.encode() in bodies) == (False, False)


def test_a_reply_goes_to_the_wa_id_whatsapp_gave_last(
    instance: Instance,
    client: Client,
    openai_settings: FakeOpenAIServer,
    fake_graph: FakeGraphAPI,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    session = customer_session(instance, WITH_NINTH)
    openai_settings.queue_text('{"s":1}Olá, Maria! Qual análise você precisa?')

    with django_capture_on_commit_callbacks(execute=True):
        response = signed_post(client, text_from(WITHOUT_NINTH, wamid="wamid.OTHERFORM"))

    assert response.status_code == 200
    [send] = [s for s in fake_graph.sends if s.json.get("type") == "text"]
    assert (send.json["to"], send.json["text"]["body"]) == (
        WITHOUT_NINTH,
        "Olá, Maria! Qual análise você precisa?",
    )
    [reply] = session.messages.filter(direction=Direction.OUTBOUND)
    assert reply.wa_message_id == "wamid.FAKE0001"


@pytest.mark.django_db(transaction=True)
def test_the_migration_gives_the_existing_sessions_their_keys() -> None:
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    before = [("conversations", "0022_media_reading_reasons")]
    after = [("conversations", "0023_session_customer_phone_key")]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    old_apps = executor.loader.project_state(before).apps
    old_instance = old_apps.get_model("conversations", "Instance").objects.create(
        phone_number_id="100000000000009", name="Antiga"
    )
    old_session = old_apps.get_model("conversations", "Session")
    for phone in (WITHOUT_NINTH, "551133334444", ""):
        old_session.objects.create(instance=old_instance, customer_phone=phone)
    try:
        executor = MigrationExecutor(connection)
        executor.migrate(after)
        assert sorted(Session.objects.values_list("customer_phone", "customer_phone_key")) == [
            ("", ""),
            ("551133334444", "551133334444"),
            (WITHOUT_NINTH, WITH_NINTH),
        ]
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())


def test_an_idle_session_keeps_its_phone_and_the_new_one_takes_the_sender_s_form(
    instance: Instance, receive: Receiver
) -> None:
    idle_since = T - timedelta(days=2)
    idle = customer_session(
        instance, WITH_NINTH, last_message_at=idle_since, last_inbound_at=idle_since
    )

    receive(text_from(WITHOUT_NINTH, wamid="wamid.AFTERIDLE"))

    idle.refresh_from_db()
    assert (idle.state, idle.customer_phone) == (SessionState.CLOSED, WITH_NINTH)
    new = Session.objects.exclude(pk=idle.pk).get()
    assert (new.customer_phone, new.customer_phone_key, new.state) == (
        WITHOUT_NINTH,
        WITH_NINTH,
        SessionState.TRIAGE,
    )
