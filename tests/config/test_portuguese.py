"""What staff read is pt-BR, whichever library wrote it: Django's months, django-axes' models,
the admin's bulk delete, the rows' names in titles and recent actions, and costs in reais'
notation (decimal comma)."""

from datetime import datetime
from decimal import Decimal

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import translation
from django.utils.formats import date_format

from conversations.labels import usd_text
from conversations.models import HandoffSummary, Instance, LLMCall, Message, WebhookDelivery
from staff_auth.names import staff_name

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def portuguese() -> None:
    translation.activate("pt-br")


def test_one_date_format_and_months_lowercase_as_pt_br_writes_them() -> None:
    moment = datetime(2026, 12, 1, 14, 32, 5)

    assert date_format(moment, "DATE_FORMAT") == "01/12/2026"
    assert date_format(moment, "SHORT_DATE_FORMAT") == "01/12/2026"
    assert date_format(moment, "DATETIME_FORMAT") == "01/12/2026 14:32"
    assert date_format(moment, "SHORT_DATETIME_FORMAT") == "01/12/2026 14:32"
    assert date_format(moment, "TIME_FORMAT") == "14:32"
    assert date_format(datetime(2026, 3, 11), "MONTH_DAY_FORMAT") == "11 de março"
    assert date_format(moment, "F") == "dezembro"


def test_the_admin_index_names_the_sign_in_records_in_portuguese(admin_client: Client) -> None:
    page = admin_client.get("/admin/").content.decode()

    assert "Tentativas de acesso" in page
    assert "Registros de acesso" in page
    assert "Access attempts" not in page


def test_the_bulk_delete_agrees_with_any_model_name(admin_client: Client) -> None:
    Instance.objects.create(phone_number_id="100000000000001", name="Laboratório Demo")

    page = admin_client.get("/admin/conversations/instance/").content.decode()

    assert "Remover os itens selecionados (instâncias)" in page
    assert "instâncias selecionados" not in page


def test_rows_are_named_in_portuguese_without_their_text() -> None:
    assert str(WebhookDelivery(pk=18, outcome="processed")) == "Entrega #18 (processada)"
    assert str(Message(pk=7, direction="INBOUND", content="meu CPF")) == "Mensagem #7 (recebida)"
    assert str(LLMCall(pk=3, purpose="summary")) == "Chamada ao modelo #3 (resumo operacional)"
    assert str(HandoffSummary(session_id=12)) == "Resumo da conversa #12"


@pytest.mark.parametrize(
    ("value", "places", "text"),
    [
        (Decimal("0.000153"), 6, "US$ 0,000153"),
        (Decimal("0.0000006"), 6, "US$ 0,000001"),  # rounded, not cut
        (Decimal("0.0000004"), 6, "US$ 0,000000"),
        (0.0002, 4, "US$ 0,0002"),
        (Decimal("1234.5"), 2, "US$ 1234,50"),
    ],
)
def test_a_cost_is_written_with_a_decimal_comma(
    value: Decimal | float, places: int, text: str
) -> None:
    assert usd_text(value, places) == text


@pytest.mark.parametrize(
    ("first", "last", "shown"),
    [
        ("Camila", "Demo", "Camila Demo"),
        ("Camila", "", "Camila"),
        ("", "", "camila.demo"),
        (" ", " ", "camila.demo"),
    ],
)
def test_a_colleague_is_named_by_their_full_name_else_their_username(
    first: str, last: str, shown: str
) -> None:
    user = User(username="camila.demo", first_name=first, last_name=last)

    assert staff_name(user) == shown
