"""Database constraints and field validations of the conversation store."""

from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from model_bakery import baker

from conversations.models import MAX_BRAND_CONTEXT_CHARS, Instance, Message, Session

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("field", ["customer_phone", "customer_user_id"])
def test_one_open_session_per_customer_and_instance(field: str) -> None:
    customer: dict[str, Any] = {field: "5511912345678"}
    instance = baker.make(Instance)
    baker.make(Session, instance=instance, state="TRIAGE", **customer)
    with pytest.raises(IntegrityError), transaction.atomic():
        baker.make(Session, instance=instance, state="HUMAN", **customer)
    assert Session.objects.count() == 1


@pytest.mark.parametrize("field", ["customer_phone", "customer_user_id"])
def test_closed_sessions_do_not_block_a_new_one(field: str) -> None:
    customer: dict[str, Any] = {field: "5511912345678"}
    instance = baker.make(Instance)
    baker.make(Session, instance=instance, state="CLOSED", **customer)
    baker.make(Session, instance=instance, state="CLOSED", **customer)
    baker.make(Session, instance=instance, state="TRIAGE", **customer)
    assert Session.objects.filter(**{field: "5511912345678"}).count() == 3


def test_the_same_customer_may_be_open_on_two_instances() -> None:
    first, second = baker.make(Instance, _quantity=2)
    baker.make(Session, instance=first, customer_phone="5511912345678")
    baker.make(Session, instance=second, customer_phone="5511912345678")
    assert Session.objects.count() == 2


def test_sessions_without_phone_or_user_id_do_not_collide() -> None:
    instance = baker.make(Instance)
    baker.make(Session, instance=instance, customer_phone="", customer_user_id="", _quantity=2)
    assert Session.objects.count() == 2


def test_whatsapp_message_id_is_unique_when_present() -> None:
    baker.make(Message, wa_message_id="wamid.1")
    baker.make(Message, wa_message_id=None, _quantity=2)
    with pytest.raises(IntegrityError), transaction.atomic():
        baker.make(Message, wa_message_id="wamid.1")
    assert Message.objects.count() == 3


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        (
            {"phone_number_id": "+55 19 3200-0000"},
            "phone_number_id",
            "Use apenas os dígitos do phone_number_id mostrado pela Meta.",
        ),
        (
            {"brand_context": "x" * (MAX_BRAND_CONTEXT_CHARS + 1)},
            "brand_context",
            "Certifique-se de que o valor tenha no máximo 2000 caracteres (ele possui 2001).",
        ),
    ],
)
def test_instance_validation_messages(fields: dict[str, Any], field: str, message: str) -> None:
    instance = baker.prepare(Instance, **({"phone_number_id": "100000000000001"} | fields))
    with pytest.raises(ValidationError) as excinfo:
        instance.full_clean()
    assert excinfo.value.message_dict == {field: [message]}


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        (
            {"customer_phone": "+5511912345678"},
            "customer_phone",
            "Use o número E.164 só com dígitos (8 a 15 dígitos, sem +).",
        ),
        (
            {"customer_document": "123456789012"},
            "customer_document",
            "Use os 11 dígitos de um CPF ou os 14 dígitos de um CNPJ.",
        ),
    ],
)
def test_session_validation_messages(fields: dict[str, Any], field: str, message: str) -> None:
    session = baker.prepare(Session, instance=baker.make(Instance), **fields)
    with pytest.raises(ValidationError) as excinfo:
        session.full_clean(exclude=["lease_token"])
    assert excinfo.value.message_dict == {field: [message]}


@pytest.mark.parametrize(
    "fields",
    [
        {"customer_phone": "5511912345678", "customer_document": "12345678909"},
        {"customer_phone": "", "customer_document": "11222333000181"},
    ],
)
def test_valid_session_identity_passes(fields: dict[str, Any]) -> None:
    session = baker.prepare(Session, instance=baker.make(Instance), **fields)
    session.full_clean(exclude=["lease_token"])
    assert session.customer_document == fields["customer_document"]
