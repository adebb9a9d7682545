"""The sessions list: columns, filters, search, and a query count that does not grow with rows."""

import re
from datetime import timedelta
from typing import Any
from urllib.parse import urlencode

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone
from model_bakery import baker
from pytest_django import DjangoAssertNumQueries

from conversations.models import Direction, Instance, Message, Session
from knowledge_base.models import Segment
from support.admin.sessions import sessions_search

pytestmark = pytest.mark.django_db

LIST_URL = "/admin/conversations/session/"
ROW_RE = re.compile(r'<a href="/admin/conversations/session/(\d+)/change/')
# Login session and user; RuntimeConfig's "can add" (sidebar); the filters' instances, segments
# and labels; the page's count and its rows (instance joined); the header's waiting count.
LIST_QUERIES = 9


def listed_ids(client: Client, query: str = "") -> list[int]:
    response = client.get(LIST_URL + query)
    assert response.status_code == 200
    return [int(pk) for pk in ROW_RE.findall(response.content.decode())]


def make_sessions(n: int, **fields: Any) -> list[Session]:
    instance = fields.pop("instance", None) or baker.make(Instance)
    now = timezone.now()
    return [
        baker.make(
            Session,
            instance=instance,
            customer_phone=f"55119{i:08d}",
            last_message_at=now - timedelta(minutes=i),
            **fields,
        )
        for i in range(n)
    ]


def test_list_shows_newest_activity_first(admin_client: Client) -> None:
    newer, older = make_sessions(2)
    never = baker.make(Session, last_message_at=None, customer_phone="5511900000000")
    if connection.vendor == "postgresql":  # descending order puts NULLs first there
        expected = [never.pk, newer.pk, older.pk]
    else:
        expected = [newer.pk, older.pk, never.pk]
    assert listed_ids(admin_client) == expected


def test_list_columns_are_labelled_in_portuguese(admin_client: Client) -> None:
    make_sessions(1)
    page = admin_client.get(LIST_URL).content.decode()
    headers = re.findall(
        r'<th scope="col" class="[^"]*column-(\w+)[^"]*">.*?<a [^>]*>([^<]+)</a>', page, re.S
    )
    assert [label for _name, label in headers] == [
        "Cliente",
        "Instância",
        "Estado",
        "Segmento",
        "Serviço",
        "Última do cliente",
        "Motivo da transferência",
    ]


def test_customer_column_shows_name_and_phone(admin_client: Client) -> None:
    baker.make(Session, customer_name="Maria Souza", customer_phone="5511912345678")
    page = admin_client.get(LIST_URL).content.decode()
    assert "Maria Souza (+55 11 91234-5678)" in page


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("?state__exact=HUMAN", "human"),
        ("?handoff_reason__exact=llm_timeout", "timeout"),
        ("?segment=AMBIENTAL", "ambiental"),
    ],
)
def test_filters_keep_only_matching_sessions(
    admin_client: Client, query: str, expected: str
) -> None:
    baker.make(Segment, code="AMBIENTAL", label="Meio ambiente")
    sessions = {
        "human": baker.make(Session, state="HUMAN", handoff_reason="qualified_lead"),
        "timeout": baker.make(Session, state="TRIAGE", handoff_reason="llm_timeout"),
        "ambiental": baker.make(Session, state="QUALIFYING", segment="AMBIENTAL"),
    }
    assert listed_ids(admin_client, query) == [sessions[expected].pk]


def test_instance_filter(admin_client: Client) -> None:
    first, second = baker.make(Instance, _quantity=2)
    wanted = baker.make(Session, instance=second)
    baker.make(Session, instance=first)
    assert listed_ids(admin_client, f"?instance__id__exact={second.pk}") == [wanted.pk]


def test_date_filter_keeps_todays_activity(admin_client: Client) -> None:
    today = baker.make(Session, last_message_at=timezone.now())
    baker.make(Session, last_message_at=timezone.now() - timedelta(days=3))
    page = admin_client.get(LIST_URL).content.decode()
    link = re.search(r'href="(\?last_message_at__gte=[^"]+)"[^>]*>Hoje<', page)
    assert link is not None, "the date filter offers 'Hoje'"
    assert listed_ids(admin_client, link.group(1).replace("&amp;", "&")) == [today.pk]


def test_segment_filter_offers_catalog_segments(admin_client: Client) -> None:
    baker.make(Segment, code="HUMANO", label="Saúde humana")
    page = admin_client.get(LIST_URL).content.decode()
    assert "HUMANO — Saúde humana" in page


@pytest.mark.parametrize(
    ("term", "expected"),
    [
        ("maria", "maria"),
        ("(11) 91234-5678", "maria"),
        ("912345678", "maria"),
        ("123.456.789-09", "document"),
        ("12345678909", "document"),
        ("BR.abc123", "user_id"),
        ("poço artesiano", "message"),
        # SQLite folds the case of ASCII letters only; PostgreSQL folds all.
        ("ARTESIANO", "message"),
    ],
)
def test_search_by_name_phone_document_user_id_and_message_text(
    admin_client: Client, term: str, expected: str
) -> None:
    sessions = {
        "maria": baker.make(Session, customer_name="Maria Souza", customer_phone="5511912345678"),
        "document": baker.make(Session, customer_name="João", customer_document="12345678909"),
        "user_id": baker.make(Session, customer_name="Ana", customer_user_id="BR.abc123"),
        "message": baker.make(Session, customer_name="Pedro"),
    }
    baker.make(Message, session=sessions["message"], content="Tenho um poço artesiano no sítio")
    baker.make(Message, session=sessions["message"], content="O poço artesiano fica longe")
    assert listed_ids(admin_client, "?" + f"q={term}") == [sessions[expected].pk]


@pytest.mark.parametrize(
    ("stored", "term"),
    [
        pytest.param("5511987654321", "551187654321", id="stored with the ninth digit"),
        pytest.param("551187654321", "+55 11 98765-4321", id="searched with it"),
    ],
)
def test_search_finds_a_whole_mobile_number_in_its_other_form(
    admin_client: Client, stored: str, term: str
) -> None:
    wanted = baker.make(Session, customer_phone=stored)
    baker.make(Session, customer_phone="551133334444")
    assert listed_ids(admin_client, "?" + urlencode({"q": term})) == [wanted.pk]


def test_search_finding_many_messages_lists_the_session_once(admin_client: Client) -> None:
    session = baker.make(Session)
    baker.make(Message, session=session, content="laudo pronto", _quantity=5)
    assert listed_ids(admin_client, "?q=laudo") == [session.pk]


@pytest.mark.parametrize("term", ["ab", "  "])
def test_short_terms_do_not_search_message_text(term: str) -> None:
    session = baker.make(Session, customer_name="Pedro")
    baker.make(Message, session=session, content="ab")
    found = sessions_search(queryset=Session.objects.all(), term=term)
    assert list(found) == ([] if term.strip() else [session])


def test_search_without_match_lists_nothing(admin_client: Client) -> None:
    baker.make(Session, customer_name="Maria")
    assert listed_ids(admin_client, "?q=inexistente") == []


@pytest.mark.parametrize("term", ["²", "(²)"])
def test_a_superscript_digit_is_not_a_number_to_search_by(term: str) -> None:
    """isdigit() accepts "²" but no digit is left of it: it matched every phone."""
    baker.make(Session, customer_name="Maria", customer_phone="5511912345678")
    assert list(sessions_search(queryset=Session.objects.all(), term=term)) == []


@pytest.mark.parametrize("n_sessions", [10, 60])
@pytest.mark.parametrize(
    "query",
    ["", "?state__exact=HUMAN", "?q=orçamento", "?q=5511&state__exact=HUMAN&segment=AMBIENTAL"],
    ids=["list", "filtered", "search", "search+filters"],
)
def test_list_query_count_does_not_grow_with_sessions(
    admin_client: Client,
    django_assert_num_queries: DjangoAssertNumQueries,
    n_sessions: int,
    query: str,
) -> None:
    baker.make(Segment, code="AMBIENTAL")
    sessions = make_sessions(
        n_sessions, state="HUMAN", segment="AMBIENTAL", customer_name="Cliente"
    )
    Message.objects.bulk_create(
        Message(session=s, direction=Direction.INBOUND, content="Quero um orçamento")
        for s in sessions
    )
    admin_client.get(LIST_URL + query)  # warm the per-process caches (content types)
    with django_assert_num_queries(LIST_QUERIES):
        response = admin_client.get(LIST_URL + query)
    assert len(ROW_RE.findall(response.content.decode())) == min(n_sessions, 50)


def test_the_list_filters_the_simulated_conversations(admin_client: Client) -> None:
    real, simulated = make_sessions(2)
    Session.objects.filter(pk=simulated.pk).update(is_simulated=True)

    assert listed_ids(admin_client, "?is_simulated__exact=1") == [simulated.pk]
    assert listed_ids(admin_client, "?is_simulated__exact=0") == [real.pk]
    page = admin_client.get(LIST_URL).content.decode()
    assert "Por simulada" in page
