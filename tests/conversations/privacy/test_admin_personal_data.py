"""Personal data in the admin (LGPD): prompt editors read every conversation page masked,
Support and superusers read it as stored; the masked search cannot find a person; the masking
costs no query per row."""

import html
import json
import re
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.db.models import Model
from django.http import HttpResponse
from django.http.response import HttpResponseBase
from django.test import Client
from django.utils import timezone
from model_bakery import baker
from pytest_django import DjangoAssertNumQueries

from agents.phones import format_phone
from conversations.models import (
    DeliveryStatus,
    DeliveryStatusEvent,
    Direction,
    HandoffSummary,
    Instance,
    Lead,
    LLMCall,
    Message,
    Session,
    WebhookDelivery,
)
from conversations.privacy.personal_data import MaskedCopyError, masked_session
from tests import baker_recipes as recipes
from tests.helpers.staff import logged_in, staff_member

pytestmark = pytest.mark.django_db

NAME = "Maria Souza"
PHONE = "5511912345678"
USER_ID = "BR.1A2B3C4D5E"
CPF = "52998224725"
EMAIL = "maria.souza@example.com"
# Written as customers and the model write them; none may reach a prompt editor's page.
RAW_VALUES = ["Maria", "Souza", PHONE, "91234-5678", "529.982.247-25", CPF, EMAIL, USER_ID]

INBOUND_TEXT = f"Oi, sou a {NAME}, CPF 529.982.247-25, e-mail {EMAIL}. Quero um orçamento."
INBOUND_MASKED = "Oi, sou a M*** S***, CPF ***.***.***-**, e-mail ***@***. Quero um orçamento."
OUTBOUND_TEXT = "Obrigada, Maria! Seu telefone é (11) 91234-5678?"
OUTBOUND_MASKED = "Obrigada, M***! Seu telefone é (**) *****-****?"
MODEL_ANSWER = json.dumps({"s": 4, "cadastro": {"nome": NAME, "documento": CPF}}) + OUTBOUND_TEXT


def page_text(response: HttpResponseBase) -> str:
    assert response.status_code == 200, response.status_code
    assert isinstance(response, HttpResponse)
    return html.unescape(response.content.decode())


@pytest.fixture
def conversation() -> dict[str, Any]:
    """One handed-off conversation whose every log row carries the customer's personal data."""
    now = timezone.now()
    instance = recipes.instance.make(name="Lab Vale", display_phone="+55 19 3200-0000")
    session = baker.make(
        Session,
        instance=instance,
        customer_name=NAME,
        customer_phone=PHONE,
        customer_user_id=USER_ID,
        customer_document=CPF,
        state="HUMAN",
        handoff_reason="qualified_lead",
        registration_data={
            "nome": NAME,
            "email": EMAIL,
            "documento": CPF,
            "telefone": f"+{PHONE}",
            "cidade": "Campinas",
        },
        technical_data={"tipo_amostra": "água de poço"},
        last_message_at=now,
        last_inbound_at=now - timedelta(minutes=3),
    )
    inbound = baker.make(
        Message,
        session=session,
        direction=Direction.INBOUND,
        content=INBOUND_TEXT,
        created_at=now - timedelta(minutes=3),
    )
    outbound = baker.make(
        Message,
        session=session,
        direction=Direction.OUTBOUND,
        agent="coleta",
        content=OUTBOUND_TEXT,
        raw_response=MODEL_ANSWER,
        json_part={"s": 4, "cadastro": {"nome": NAME, "documento": CPF}},
        code=4,
        delivery_status=DeliveryStatus.FAILED,
        delivery_error_code=131026,
        delivery_error_title=f"Recipient {PHONE} is not a WhatsApp user",
        wa_message_id="wamid.OUT1",
        created_at=now - timedelta(minutes=2),
    )
    call = baker.make(
        LLMCall,
        session=session,
        message=outbound,
        agent="coleta",
        purpose="agent",
        model="gpt-4o-mini",
        outcome="ok",
        context_snapshot={
            "session_id": session.pk,
            "customer_name": NAME,
            "customer_phone": PHONE,
            "instance": {"name": "Lab Vale", "health_sensitive": False},
            "registration_data": {"nome": NAME, "email": EMAIL, "documento": CPF},
        },
        raw_response=MODEL_ANSWER,
    )
    summary = baker.make(
        HandoffSummary,
        session=session,
        closing_reason=f"Cliente {NAME} confirmou o pedido",
        key_points=["Maria quer análise de água", "CPF 529.982.247-25"],
        collected_data={"nome": NAME, "email": EMAIL, "tipo_amostra": "água de poço"},
        next_action="Ligar para (11) 91234-5678",
        summary_text=f"{NAME} ({EMAIL}) pediu orçamento.",
        raw_json=json.dumps({"nome": NAME, "telefone": PHONE}),
    )
    lead = baker.make(
        Lead,
        session=session,
        data={
            "nome_cliente": NAME,
            "telefone": PHONE,
            "cadastro": {"nome": NAME, "email": EMAIL, "documento": CPF, "telefone": f"+{PHONE}"},
        },
    )
    event = baker.make(
        DeliveryStatusEvent,
        wa_message_id="wamid.OUT1",
        status="failed",
        message=outbound,
        error_code=131026,
        error_title="Message undeliverable",
        error_details="Recipient +55 11 91234-5678 is not a WhatsApp user",
    )
    body = {
        "object": "whatsapp_business_account",
        "entry": [
            {
                "changes": [
                    {
                        "field": "messages",
                        "value": {
                            "metadata": {
                                "display_phone_number": "551932000000",
                                "phone_number_id": "100000000000001",
                            },
                            "contacts": [
                                {"profile": {"name": NAME}, "wa_id": PHONE, "user_id": USER_ID}
                            ],
                            "messages": [
                                {
                                    "from": PHONE,
                                    "id": "wamid.IN1",
                                    "type": "text",
                                    "text": {"body": f"meu cpf {CPF}"},
                                }
                            ],
                        },
                    }
                ]
            }
        ],
    }
    delivery = baker.make(
        WebhookDelivery, raw_body=json.dumps(body).encode(), headers={"content-length": "512"}
    )
    return {
        "session": session,
        "inbound": inbound,
        "outbound": outbound,
        "call": call,
        "summary": summary,
        "lead": lead,
        "event": event,
        "delivery": delivery,
    }


def change(obj: Model) -> str:
    return f"/admin/conversations/{obj._meta.model_name}/{obj.pk}/change/"


# page -> (url, exact masked strings a prompt editor sees there)
MASKED_PAGES: dict[str, Callable[[dict[str, Any]], tuple[str, list[str]]]] = {
    "session list": lambda c: (
        "/admin/conversations/session/",
        ["M*** S*** (+*************)"],
    ),
    "session search by text": lambda c: (
        "/admin/conversations/session/?q=orçamento",
        ["M*** S*** (+*************)"],
    ),
    "session page": lambda c: (
        change(c["session"]),
        [
            f"Conversa #{c['session'].pk}",  # title and breadcrumbs: by id, no name
            '<div class="who">M*** S***</div>',
            f'<div class="text">{INBOUND_MASKED}</div>',
            f'<div class="text">{OUTBOUND_MASKED}</div>',
            "erro 131026: o WhatsApp não conseguiu entregar: o número pode não ter WhatsApp, ou"
            " ter uma versão antiga",
            '<tr data-key="nome"><th scope="row">Nome</th><td>M*** S***</td></tr>',
            '<tr data-key="email"><th scope="row">E-mail</th><td>***@***</td></tr>',
            '<tr data-key="telefone"><th scope="row">Telefone alternativo</th>'
            "<td>+*************</td></tr>",
            "<dd>Cliente M*** S*** confirmou o pedido</dd>",
            "<li>M*** quer análise de água</li>",
            "<li>CPF ***.***.***-**</li>",
            "<dd>Ligar para (**) *****-****</dd>",
            "<dd>M*** S*** (***@***) pediu orçamento.</dd>",
            '<div class="readonly">*************</div>',  # customer phone
            # The document keeps a CPF's punctuation, masked.
            '<div class="readonly">***.***.***-**</div>',
        ],
    ),
    "session history": lambda c: (
        f"/admin/conversations/session/{c['session'].pk}/history/",
        [f"Conversa #{c['session'].pk}"],
    ),
    "message list": lambda c: (
        f"/admin/conversations/message/?session__id__exact={c['session'].pk}",
        [INBOUND_MASKED, OUTBOUND_MASKED],
    ),
    "inbound message page": lambda c: (
        change(c["inbound"]),
        [INBOUND_MASKED, f"Conversa #{c['session'].pk}"],
    ),
    "outbound message page": lambda c: (
        change(c["outbound"]),
        [
            OUTBOUND_MASKED,
            # JSON columns: one key at a time (PostgreSQL's jsonb orders keys its own way).
            '"nome": "M*** S***"',
            '"documento": "***********"',
            "Recipient ************* is not a WhatsApp user",
        ],
    ),
    "model call list": lambda c: ("/admin/conversations/llmcall/", ["gpt-4o-mini"]),
    "model call page": lambda c: (
        change(c["call"]),
        [
            '"customer_name": "M*** S***"',
            '"customer_phone": "*************"',
            '"email": "***@***"',
            '"documento": "***********"',
            # The raw answer is text: masked as written.
            '{"s": 4, "cadastro": {"nome": "M*** S***", "documento": "***********"}}'
            + OUTBOUND_MASKED,
        ],
    ),
    "summary list": lambda c: (
        "/admin/conversations/handoffsummary/",
        ["Cliente M*** S*** confirmou o pedido"],
    ),
    "summary page": lambda c: (
        change(c["summary"]),
        [
            "Cliente M*** S*** confirmou o pedido",
            '["M*** quer análise de água", "CPF ***.***.***-**"]',
            '"nome": "M*** S***"',
            '"email": "***@***"',
            '"tipo_amostra": "água de poço"',
            "Ligar para (**) *****-****",
            '{"nome": "M*** S***", "telefone": "*************"}',  # raw JSON: text
        ],
    ),
    "lead list": lambda c: (
        "/admin/conversations/lead/",
        [f'/admin/conversations/lead/{c["lead"].pk}/change/">M*** S***</a></th>'],
    ),
    "lead page": lambda c: (
        change(c["lead"]),
        [
            '<th scope="row">Nome</th><td>M*** S***</td>',
            '<th scope="row">E-mail</th><td>***@***</td>',
            '<th scope="row">Documento (CPF/CNPJ)</th><td>***********</td>',
            '<th scope="row">Telefone alternativo</th><td>+*************</td>',
            f'<a href="/admin/conversations/session/{c["session"].pk}/change/">',
        ],
    ),
    "status event list": lambda c: ("/admin/conversations/deliverystatusevent/", ["wamid.OUT1"]),
    "status event page": lambda c: (
        change(c["event"]),
        ["Recipient +** ** *****-**** is not a WhatsApp user"],
    ),
    "prompt preview": lambda c: (
        f"/admin/prompts_admin/promptoverride/preview/coleta/?session={c['session'].pk}",
        [
            f"#{c['session'].pk} M*** S*** — Com humano",  # the session select
            "- Telefone do WhatsApp: +*************.",
            "- nome: M*** S***",
            "- email: ***@***",
            INBOUND_MASKED,  # the history (the failed reply is not part of it)
        ],
    ),
}
SUPPORT_PAGES = [page for page in MASKED_PAGES if page != "prompt preview"]
# page -> a stored value staff allowed to read personal data see there as stored (the lists of
# model calls, leads and status events show no personal data at all).
RAW_ON_PAGE = {
    "session list": f"{NAME} (+55 11 91234-5678)",
    "session search by text": f"{NAME} (+55 11 91234-5678)",
    "session page": f'<div class="text">{INBOUND_TEXT}</div>',
    "session history": None,  # named by id: no personal data to show
    "message list": f"Oi, sou a {NAME}, CPF 529.982.247-25, e-mail {EMAIL}",
    "inbound message page": INBOUND_TEXT,
    "outbound message page": OUTBOUND_TEXT,
    "model call list": None,
    "model call page": f'"customer_phone": "{PHONE}"',
    "summary list": f"Cliente {NAME} confirmou o pedido",
    "summary page": "Ligar para (11) 91234-5678",
    "lead list": f">{NAME}</a></th>",
    "lead page": f'<th scope="row">E-mail</th><td>{EMAIL}</td>',
    "status event list": None,
    "status event page": "Recipient +55 11 91234-5678 is not a WhatsApp user",
    "prompt preview": "- Telefone do WhatsApp: +55 11 91234-5678.",
}


@pytest.mark.parametrize("page", list(MASKED_PAGES))
def test_a_prompt_editor_reads_every_conversation_page_masked(
    prompt_editor_client: Client, conversation: dict[str, Any], page: str
) -> None:
    url, masked = MASKED_PAGES[page](conversation)
    response = prompt_editor_client.get(url)

    text = page_text(response)
    assert [raw for raw in RAW_VALUES if raw.encode() in response.content or raw in text] == []
    assert [m for m in masked if m not in text] == []


@pytest.mark.parametrize("page", SUPPORT_PAGES)
def test_support_reads_every_conversation_page_as_stored(
    support_client: Client, conversation: dict[str, Any], page: str
) -> None:
    url, _masked = MASKED_PAGES[page](conversation)
    text = page_text(support_client.get(url))
    assert "M*** S***" not in text
    assert "***@***" not in text
    raw = RAW_ON_PAGE[page]
    assert raw is None or raw in text


@pytest.mark.parametrize("page", list(MASKED_PAGES))
def test_a_superuser_reads_every_conversation_page_as_stored(
    admin_client: Client, conversation: dict[str, Any], page: str
) -> None:
    url, _masked = MASKED_PAGES[page](conversation)
    text = page_text(admin_client.get(url))
    assert "M*** S***" not in text
    assert "***@***" not in text
    raw = RAW_ON_PAGE[page]
    assert raw is None or raw in text


def test_support_sees_the_raw_values_on_the_session_page(
    support_client: Client, conversation: dict[str, Any]
) -> None:
    text = page_text(support_client.get(change(conversation["session"])))
    assert f'<div class="text">{INBOUND_TEXT}</div>' in text
    assert f'<div class="text">{OUTBOUND_TEXT}</div>' in text
    assert f"<td>{EMAIL}</td>" in text
    # The workspace's customer card (Support reads no raw field).
    assert f'<dd id="customer-phone">{format_phone(PHONE)}</dd>' in text


def test_a_superuser_sees_the_raw_values_in_the_model_call_and_the_preview(
    admin_client: Client, conversation: dict[str, Any]
) -> None:
    call = page_text(admin_client.get(change(conversation["call"])))
    assert f'"customer_name": "{NAME}", "customer_phone": "{PHONE}"' in call
    url = (
        f"/admin/prompts_admin/promptoverride/preview/coleta/?session={conversation['session'].pk}"
    )
    preview = page_text(admin_client.get(url))
    assert "- Telefone do WhatsApp: +55 11 91234-5678." in preview
    assert INBOUND_TEXT in preview


def test_the_webhook_body_is_masked_for_staff_allowed_to_read_it_without_personal_data(
    conversation: dict[str, Any],
) -> None:
    client = logged_in(staff_member(permissions=("conversations.view_webhookdelivery",)))
    response = client.get(change(conversation["delivery"]))

    text = page_text(response)
    assert [raw for raw in RAW_VALUES if raw.encode() in response.content or raw in text] == []
    assert '"name": "M*** S***"' in text
    assert '"wa_id": "*************"' in text
    assert '"user_id": "***"' in text
    assert '"body": "meu cpf ***********"' in text
    # The company's own number and id are not personal data: they stay readable.
    assert '"display_phone_number": "551932000000"' in text
    assert '"phone_number_id": "100000000000001"' in text


def test_support_reads_the_webhook_body_as_received(
    support_client: Client, conversation: dict[str, Any]
) -> None:
    text = page_text(support_client.get(change(conversation["delivery"])))
    assert f'"wa_id": "{PHONE}"' in text
    assert f'"name": "{NAME}"' in text


# --- Search -----------------------------------------------------------------------------------

ROW_RE = re.compile(r'<a href="/admin/conversations/session/(\d+)/change/')


def listed(client: Client, term: str) -> tuple[list[int], str]:
    response = client.get("/admin/conversations/session/", {"q": term})
    text = page_text(response)
    return [int(pk) for pk in ROW_RE.findall(text)], text


REFUSED = "A busca por telefone, documento, e-mail ou números longos"


@pytest.mark.parametrize(
    "term",
    [PHONE, "91234-5678", "(11) 91234-5678", "5678", CPF, "529.982.247-25", EMAIL, "@example"],
)
def test_a_prompt_editor_cannot_find_a_person_by_phone_document_or_e_mail(
    prompt_editor_client: Client, conversation: dict[str, Any], term: str
) -> None:
    ids, text = listed(prompt_editor_client, term)
    assert ids == []
    assert REFUSED in text


def test_a_prompt_editors_name_search_reads_only_the_conversations_text(
    prompt_editor_client: Client, support_client: Client, conversation: dict[str, Any]
) -> None:
    # Named Maria in the session, but nobody wrote "Maria" in this conversation.
    silent = baker.make(Session, customer_name="Maria Oliveira", customer_phone="5511900000001")

    assert listed(prompt_editor_client, "Oliveira")[0] == []
    assert listed(prompt_editor_client, "Maria")[0] == [conversation["session"].pk]
    assert listed(support_client, "Oliveira")[0] == [silent.pk]


@pytest.mark.parametrize("term", [PHONE, "91234-5678", CPF, "Souza"])
def test_support_finds_a_person_by_phone_document_or_name(
    support_client: Client, conversation: dict[str, Any], term: str
) -> None:
    ids, text = listed(support_client, term)
    assert ids == [conversation["session"].pk]
    assert REFUSED not in text


def test_a_prompt_editor_cannot_sort_by_customer_name_even_from_the_url(
    prompt_editor_client: Client, support_client: Client
) -> None:
    abel = baker.make(Session, customer_name="Abel")
    zuleica = baker.make(Session, customer_name="Zuleica")
    sortable = re.compile(r'<th scope="col" class="sortable[^"]*column-customer')

    assert (
        sortable.search(page_text(support_client.get("/admin/conversations/session/"))) is not None
    )
    assert (
        sortable.search(page_text(prompt_editor_client.get("/admin/conversations/session/")))
        is None
    )
    assert listed_with(support_client, "o=0")[0] == [abel.pk, zuleica.pk]  # by name
    assert listed_with(support_client, "o=-0")[0] == [zuleica.pk, abel.pk]
    # The editor's first column has no ordering: `o` leaves the tie-breaker only (newest first).
    assert listed_with(prompt_editor_client, "o=0")[0] == [zuleica.pk, abel.pk]
    assert listed_with(prompt_editor_client, "o=-0")[0] == [zuleica.pk, abel.pk]


# --- Query counts -----------------------------------------------------------------------------

# Login session and user; the user's own and group permissions, loaded once per request by the
# view-permission check (the masking reads them from that cache); the filters' instances,
# segments and labels; the page's count and its rows. A refused search runs neither of the last
# two.
# (The superuser's pages skip the permissions but ask RuntimeConfig's "can add".)
EDITOR_LIST_QUERIES = {"": 9, "?q=orçamento": 9, "?q=5511": 7}
# Login session and user; the session; the permissions; messages, internal notes, LLM costs
# grouped by turn, the summaries, the handoff events and the service's schema.
EDITOR_TRANSCRIPT_QUERIES = 11


@pytest.mark.parametrize("n_sessions", [10, 60])
@pytest.mark.parametrize("query", ["", "?q=orçamento", "?q=5511"], ids=["list", "text", "phone"])
def test_a_masked_list_costs_no_query_per_row(
    prompt_editor_client: Client,
    django_assert_num_queries: DjangoAssertNumQueries,
    n_sessions: int,
    query: str,
) -> None:
    instance = baker.make(Instance)
    sessions = [
        baker.make(
            Session,
            instance=instance,
            customer_name=f"Cliente {i}",
            customer_phone=f"55119{i:08d}",
            registration_data={"nome": f"Cliente {i}", "email": f"c{i}@example.com"},
            last_message_at=timezone.now() - timedelta(minutes=i),
        )
        for i in range(n_sessions)
    ]
    Message.objects.bulk_create(
        Message(session=s, direction=Direction.INBOUND, content="Quero um orçamento")
        for s in sessions
    )
    prompt_editor_client.get("/admin/conversations/session/" + query)  # warm the content-type cache
    with django_assert_num_queries(EDITOR_LIST_QUERIES[query]):
        response = prompt_editor_client.get("/admin/conversations/session/" + query)
    rows = len(ROW_RE.findall(response.content.decode()))
    assert rows == (0 if "5511" in query else min(n_sessions, 50))


@pytest.mark.parametrize("n_messages", [30, 300])
def test_a_masked_transcript_costs_no_query_per_message(
    prompt_editor_client: Client, django_assert_num_queries: DjangoAssertNumQueries, n_messages: int
) -> None:
    session = baker.make(
        Session, customer_name=NAME, customer_phone=PHONE, service="AGUA_POTABILIDADE"
    )
    start = timezone.now() - timedelta(hours=3)
    Message.objects.bulk_create(
        Message(
            session=session,
            direction=Direction.INBOUND if i % 2 == 0 else Direction.OUTBOUND,
            content=f"mensagem {i} da Maria, tel (11) 91234-5678",
            turn_id=uuid.uuid4(),
            created_at=start + timedelta(seconds=i),
        )
        for i in range(n_messages)
    )
    baker.make(HandoffSummary, session=session, summary_text=f"{NAME} pediu orçamento")
    url = change(session)
    prompt_editor_client.get(url)
    with django_assert_num_queries(EDITOR_TRANSCRIPT_QUERIES):
        response = prompt_editor_client.get(url)
    page = response.content.decode()
    assert page.count("da M***, tel (**) *****-****") == n_messages
    assert "Maria" not in page


def test_a_masked_display_copy_cannot_be_saved_and_leaves_the_row_alone(
    conversation: dict[str, Any],
) -> None:
    session = conversation["session"]
    copy = masked_session(session)

    with pytest.raises(MaskedCopyError):
        copy.save()

    assert (copy.customer_name, session.customer_name) == ("M*** S***", NAME)
    session.refresh_from_db()
    assert session.customer_name == NAME


# --- Filters in the URL -----------------------------------------------------------------------

# Django's admin accepts a lookup on any local column in the query string, list filter or not:
# without a guard, `?customer_phone=...` would tell a prompt editor whether a person talked to us.
URL_LOOKUPS = [
    ("/admin/conversations/session/", f"customer_phone={PHONE}"),
    ("/admin/conversations/session/", "customer_name__icontains=souza"),
    ("/admin/conversations/session/", f"customer_document__startswith={CPF[:6]}"),
    ("/admin/conversations/session/", f"registration_data__email={EMAIL}"),
    ("/admin/conversations/message/", "content__icontains=91234-5678"),
    ("/admin/conversations/llmcall/", f"context_snapshot__customer_phone={PHONE}"),
    ("/admin/conversations/llmcall/", "raw_response__icontains=souza"),
    ("/admin/conversations/handoffsummary/", "summary_text__icontains=souza"),
    ("/admin/conversations/lead/", f"data__email={EMAIL}"),
    ("/admin/conversations/deliverystatusevent/", "error_details__icontains=91234"),
]


@pytest.mark.parametrize(("url", "lookup"), URL_LOOKUPS)
def test_a_prompt_editor_cannot_filter_by_a_column_outside_the_list_filters(
    prompt_editor_client: Client, conversation: dict[str, Any], url: str, lookup: str
) -> None:
    response = prompt_editor_client.get(f"{url}?{lookup}")
    assert response.status_code == 400
    assert b"Souza" not in response.content


@pytest.mark.parametrize(("url", "lookup"), URL_LOOKUPS)
def test_support_may_filter_by_any_column(
    support_client: Client, conversation: dict[str, Any], url: str, lookup: str
) -> None:
    response = support_client.get(f"{url}?{lookup}")
    assert response.status_code == 200


@pytest.mark.parametrize(
    "query",
    [
        "state__exact=HUMAN",
        "handoff_reason__exact=qualified_lead",
        "instance__id__exact=1",
        "last_message_at__isnull=False",
    ],
)
def test_a_prompt_editor_keeps_the_list_filters(
    prompt_editor_client: Client, conversation: dict[str, Any], query: str
) -> None:
    query = query.replace("=1", f"={conversation['session'].instance_id}")
    ids, _text = listed_with(prompt_editor_client, query)
    assert ids == [conversation["session"].pk]


def test_a_prompt_editor_opens_the_message_log_of_a_conversation(
    prompt_editor_client: Client, conversation: dict[str, Any]
) -> None:
    session = conversation["session"]
    response = prompt_editor_client.get(
        f"/admin/conversations/message/?session__id__exact={session.pk}"
    )
    assert response.status_code == 200
    assert INBOUND_MASKED in page_text(response)


def listed_with(client: Client, query: str) -> tuple[list[int], str]:
    text = page_text(client.get(f"/admin/conversations/session/?{query}"))
    return [int(pk) for pk in ROW_RE.findall(text)], text
