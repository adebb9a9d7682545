"""The session page: the conversation rendered as a chat, with costs, window, summary and data."""

import html
import re
import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import dateformat, timezone
from model_bakery import baker
from pytest_django import DjangoAssertNumQueries

from conversations.models import (
    DeliveryStatus,
    Direction,
    HandoffSummary,
    LLMCall,
    Message,
    Session,
)
from knowledge_base.models import Segment, Service
from support.admin.transcript import session_transcript
from tests import baker_recipes as recipes

pytestmark = pytest.mark.django_db

# Login session and user; the session; RuntimeConfig's "can add" for the sidebar; the reader's
# note mentions marked seen; messages (with their media, joined: a media message adds no query,
# tests/support/test_transcript_media.py), internal notes, LLM costs grouped by turn, the summaries,
# the handoff events and the service's schema; the staff actions' list of colleagues to assign
# to; the labels box; the header's waiting count.
TRANSCRIPT_QUERIES = 14
BUBBLE_RE = re.compile(r'<li class="([^"]+)" data-message-id="(\d+)"')


def change_url(session: Session) -> str:
    return f"/admin/conversations/session/{session.pk}/change/"


def bubbles(page: str) -> list[tuple[str, int]]:
    return [(css, int(pk)) for css, pk in BUBBLE_RE.findall(page)]


def text_of(page: str) -> str:
    """The page's visible text with whitespace collapsed, for phrase assertions."""
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", page)))


@pytest.fixture
def conversation(admin_user: User) -> dict[str, Any]:
    """A session with two turns, a superseded draft, a system event, a failure and a staff reply."""
    now = timezone.now()
    session = baker.make(
        Session,
        instance=recipes.instance.make(name="Vale"),
        customer_phone="5511912345678",
        customer_name="Maria Souza",
        state="HUMAN",
        service="AGUA_POTABILIDADE",
        technical_data={"tipo_amostra": "água de poço", "quantidade_amostras": 3},
        technical_extras={"cor": "turva"},
        registration_data={"nome": "Maria Souza", "email": "maria@example.com"},
        registration_extras={},
    )
    turn1, turn2 = uuid.uuid4(), uuid.uuid4()

    def msg(minutes_ago: float, **fields: Any) -> Message:
        message: Message = baker.make(
            Message, session=session, created_at=now - timedelta(minutes=minutes_ago), **fields
        )
        return message

    messages = {
        "hello": msg(
            130, direction=Direction.INBOUND, content="Olá, preciso analisar água", turn_id=turn1
        ),
        "routed": msg(
            129.5,
            direction=Direction.SYSTEM,
            message_type="agent_routed",
            content="triagem → qualificacao",
            turn_id=turn1,
        ),
        "draft": msg(
            129,
            direction=Direction.OUTBOUND,
            agent="qualificacao",
            content="Claro! De onde é a água?",
            error="superseded",
            turn_id=turn1,
        ),
        "answer": msg(
            128,
            direction=Direction.OUTBOUND,
            agent="qualificacao",
            content="Qual é o tipo de amostra?",
            code=1,
            action="respond",
            delivery_status=DeliveryStatus.READ,
            turn_id=turn1,
        ),
        "sample": msg(
            # The customer's last message: the 24-hour window closes 22 h from now.
            120 - 0.5,
            direction=Direction.INBOUND,
            content="Água de poço, 3 amostras",
            turn_id=turn2,
        ),
        "failed": msg(
            119,
            direction=Direction.OUTBOUND,
            agent="qualificacao",
            content="Anotado!",
            delivery_status=DeliveryStatus.FAILED,
            delivery_error_code=131047,
            delivery_error_title="Re-engagement message",
            turn_id=turn2,
        ),
        "staff": msg(
            60,
            direction=Direction.OUTBOUND,
            content="Oi Maria, aqui é da equipe.",
            staff_user=admin_user,
            delivery_status=DeliveryStatus.DELIVERED,
        ),
    }
    for turn, tokens_in, tokens_out, latency in [
        (turn1, 1000, 100, 800),
        (turn1, 1200, 150, 900),
        (turn2, 1500, 80, 700),
        (None, 900, 300, 1500),  # the summary call: no turn
    ]:
        baker.make(
            LLMCall,
            session=session,
            turn_id=turn,
            tokens_input=tokens_in,
            tokens_output=tokens_out,
            latency_ms=latency,
        )
    baker.make(
        HandoffSummary,
        session=session,
        closing_reason="Resumo antigo",
        created_at=now - timedelta(minutes=90),
    )
    baker.make(
        HandoffSummary,
        session=session,
        closing_reason="Cliente pediu orçamento",
        identified_service="AGUA_POTABILIDADE",
        segment="AMBIENTAL",
        key_points=["Água de poço", "3 amostras"],
        collected_data={"cidade": "Campinas"},
        next_action="Enviar orçamento por e-mail",
        summary_text="Cliente quer analisar água de poço.",
        model="gpt-4o-mini",
        created_at=now - timedelta(minutes=50),
    )
    segment = baker.make(Segment, code="AMBIENTAL")
    baker.make(
        Service,
        code="AGUA_POTABILIDADE",
        segment=segment,
        parameter_schema=[
            {"name": "tipo_amostra", "label": "Tipo de amostra", "type": "text", "required": True},
            {
                "name": "quantidade_amostras",
                "label": "Quantidade de amostras",
                "type": "integer",
                "required": True,
            },
        ],
    )
    return {"session": session, "messages": messages}


def test_bubbles_follow_the_conversation_order_with_each_side(
    admin_client: Client, conversation: dict[str, Any]
) -> None:
    m = conversation["messages"]
    page = admin_client.get(change_url(conversation["session"])).content.decode()
    assert bubbles(page) == [
        ("bubble customer", m["hello"].pk),
        ("event", m["routed"].pk),
        ("bubble bot superseded", m["draft"].pk),
        ("bubble bot", m["answer"].pk),
        ("bubble customer", m["sample"].pk),
        ("bubble bot", m["failed"].pk),
        ("bubble staff", m["staff"].pk),
    ]


def test_superseded_draft_is_marked_as_not_sent(
    admin_client: Client, conversation: dict[str, Any]
) -> None:
    page = admin_client.get(change_url(conversation["session"])).content.decode()
    draft = page[page.index('class="bubble bot superseded"') :]
    draft = draft[: draft.index("</li>")]
    assert "Rascunho descartado (superseded), não enviado" in draft
    assert "Claro! De onde é a água?" in draft


def test_system_event_is_a_small_centred_line(
    admin_client: Client, conversation: dict[str, Any]
) -> None:
    page = admin_client.get(change_url(conversation["session"])).content.decode()
    routed = conversation["messages"]["routed"]
    when = dateformat.format(timezone.localtime(routed.created_at), "d/m/Y H:i")
    # A row written before events carried their parameters: its stored text, as it is.
    assert f'data-message-id="{routed.pk}">{when}: triagem → qualificacao</li>' in page
    assert "agent_routed" not in page


def test_bubbles_name_who_wrote(admin_client: Client, conversation: dict[str, Any]) -> None:
    page = text_of(admin_client.get(change_url(conversation["session"])).content.decode())
    assert "Maria Souza Olá, preciso analisar água" in page
    assert "Bot · qualificação Qual é o tipo de amostra?" in page
    assert f"Equipe · {conversation['messages']['staff'].staff_user.username}" in page


def test_outbound_bubbles_show_delivery_status_and_error(
    admin_client: Client, conversation: dict[str, Any]
) -> None:
    page = text_of(admin_client.get(change_url(conversation["session"])).content.decode())
    assert "código 1 · lida" in page
    assert (
        "falhou · erro 131047: mais de 24 horas desde a última mensagem do cliente: só um modelo"
        " de mensagem do WhatsApp pode ser enviado"
    ) in page
    assert "entregue" in page


def test_each_turn_shows_its_model_cost_after_its_last_message(
    admin_client: Client, conversation: dict[str, Any]
) -> None:
    page = admin_client.get(change_url(conversation["session"])).content.decode()
    text = text_of(page)
    assert "turno: 2 chamadas ao modelo · 2.200 tokens de entrada, 250 de saída · 1.700 ms" in text
    assert "turno: 1 chamada ao modelo · 1.500 tokens de entrada, 80 de saída · 700 ms" in text
    # Turn 1 ends with the delivered answer, not with the superseded draft.
    after_answer = page[page.index(f'data-message-id="{conversation["messages"]["answer"].pk}"') :]
    assert after_answer.index('class="turn-cost"') < after_answer.index('class="bubble customer"')


def test_session_totals_include_calls_outside_turns(
    admin_client: Client, conversation: dict[str, Any]
) -> None:
    text = text_of(admin_client.get(change_url(conversation["session"])).content.decode())
    assert "Uso do modelo nesta conversa 4 chamadas" in text
    assert "5.230 tokens (4.600 de entrada, 630 de saída) · 3.900 ms" in text


def test_window_closes_24_hours_after_the_last_inbound_message(
    admin_client: Client, conversation: dict[str, Any]
) -> None:
    text = text_of(admin_client.get(change_url(conversation["session"])).content.decode())
    assert "Janela de 24 horas do WhatsApp aberta, faltam 22 h 00 min" in text


def test_window_is_closed_a_day_after_the_customer_wrote(admin_client: Client) -> None:
    session = baker.make(Session, customer_phone="5511900000001")
    baker.make(
        Message,
        session=session,
        direction=Direction.INBOUND,
        content="oi",
        created_at=timezone.now() - timedelta(hours=25),
    )
    text = text_of(admin_client.get(change_url(session)).content.decode())
    assert "Janela de 24 horas do WhatsApp fechada fechou em" in text
    assert "só é possível enviar modelos de mensagem do WhatsApp" in text


def test_latest_summary_is_a_card_beside_the_transcript(
    admin_client: Client, conversation: dict[str, Any]
) -> None:
    page = admin_client.get(change_url(conversation["session"])).content.decode()
    start = page.index('id="handoff-summary"')
    card = page[start : page.index("</section>", start)]
    text = text_of(card)
    assert "Motivo do encerramento Cliente pediu orçamento" in text
    assert "Serviço identificado AGUA_POTABILIDADE" in text
    assert "Pontos-chave Água de poço 3 amostras" in text
    # Labelled like the data panels (the registration's labels, the service schema's).
    assert "Dados coletados Cidade Campinas" in text
    assert "Próxima ação Enviar orçamento por e-mail" in text
    assert "Resumo antigo" not in page


def test_collected_data_are_tables_labelled_by_the_service_schema(
    admin_client: Client, conversation: dict[str, Any]
) -> None:
    page = admin_client.get(change_url(conversation["session"])).content.decode()
    data = text_of(page[page.index('session-data"') :])
    assert "Dados técnicos Tipo de amostra água de poço Quantidade de amostras 3" in data
    assert "Dados técnicos extras cor turva" in data
    assert "Dados cadastrais Nome Maria Souza E-mail maria@example.com" in data
    assert "Dados cadastrais extras" not in data


def test_a_session_without_messages_says_so(admin_client: Client) -> None:
    session = baker.make(Session, customer_phone="5511900000002")
    text = text_of(admin_client.get(change_url(session)).content.decode())
    assert "Nenhuma mensagem ainda." in text
    assert "o cliente ainda não escreveu" in text
    assert 'id="handoff-summary"' not in text


def test_transcript_shows_only_the_newest_messages_of_a_very_long_session(
    admin_client: Client,
) -> None:
    session = baker.make(Session, customer_phone="5511900000003")
    start = timezone.now() - timedelta(days=1)
    Message.objects.bulk_create(
        Message(
            session=session,
            direction=Direction.INBOUND,
            content=f"m{i}",
            created_at=start + timedelta(seconds=i),
        )
        for i in range(502)
    )
    page = admin_client.get(change_url(session)).content.decode()
    ids = [pk for _css, pk in bubbles(page)]
    newest = list(
        Message.objects.filter(session=session)
        .order_by("-created_at")
        .values_list("pk", flat=True)[:500]
    )
    assert ids == newest[::-1]
    assert 'id="transcript-omitted"' in page


@pytest.mark.parametrize(
    ("count", "shown", "omitted"),
    [(499, 499, False), (500, 500, False), (501, 500, True)],
    ids=["499 messages", "exactly 500", "501 messages"],
)
def test_the_transcript_shows_at_most_the_newest_500_messages(
    count: int, shown: int, omitted: bool
) -> None:
    session = baker.make(Session, customer_phone="5511900000004")
    start = timezone.now() - timedelta(days=1)
    Message.objects.bulk_create(
        Message(
            session=session,
            direction=Direction.INBOUND,
            content=f"m{i}",
            created_at=start + timedelta(seconds=i),
        )
        for i in range(count)
    )

    transcript = session_transcript(session=session, now=timezone.now())

    assert (len(transcript.entries), transcript.omitted) == (shown, omitted)
    assert transcript.entries[-1].message.content == f"m{count - 1}"


@pytest.mark.parametrize("n_messages", [30, 300])
def test_transcript_query_count_does_not_grow_with_messages(
    admin_client: Client, django_assert_num_queries: DjangoAssertNumQueries, n_messages: int
) -> None:
    session = baker.make(Session, customer_phone="5511900000004", service="AGUA_POTABILIDADE")
    start = timezone.now() - timedelta(hours=3)
    turns = [uuid.uuid4() for _ in range(n_messages // 2)]
    Message.objects.bulk_create(
        Message(
            session=session,
            direction=Direction.INBOUND if i % 2 == 0 else Direction.OUTBOUND,
            content=f"mensagem {i}",
            turn_id=turns[i // 2],
            staff_user=None,
            created_at=start + timedelta(seconds=i),
        )
        for i in range(n_messages)
    )
    LLMCall.objects.bulk_create(
        LLMCall(session=session, turn_id=turn, agent="triagem", purpose="agent", model="m")
        for turn in turns
    )
    baker.make(HandoffSummary, session=session)
    admin_client.get(change_url(session))  # warm the per-process caches (content types)
    with django_assert_num_queries(TRANSCRIPT_QUERIES):
        response = admin_client.get(change_url(session))
    assert len(bubbles(response.content.decode())) == n_messages


def test_a_bot_message_s_buttons_are_chips_under_its_text_and_a_tap_is_the_customer_s_text(
    admin_client: Client, django_assert_num_queries: DjangoAssertNumQueries
) -> None:
    session = baker.make(Session, customer_phone="5511900000005", service="AGUA_POTABILIDADE")
    buttons = {
        "type": "button",
        "body": {"text": "Está tudo certo?"},
        "action": {
            "buttons": [
                {"type": "reply", "reply": {"id": "confirmar", "title": "Confirmar"}},
                {"type": "reply", "reply": {"id": "corrigir", "title": "Corrigir"}},
            ]
        },
    }
    start = timezone.now() - timedelta(minutes=5)
    asked = baker.make(
        Message,
        session=session,
        direction=Direction.OUTBOUND,
        message_type="interactive",
        content="Está tudo certo?",
        interactive=buttons,
        created_at=start,
    )
    tapped = baker.make(
        Message,
        session=session,
        direction=Direction.INBOUND,
        message_type="interactive",
        content="Confirmar",
        interactive={"type": "button_reply", "id": "confirmar", "title": "Confirmar"},
        created_at=start + timedelta(minutes=1),
    )
    admin_client.get(change_url(session))  # warm the per-process caches (content types)

    with django_assert_num_queries(TRANSCRIPT_QUERIES):
        page = admin_client.get(change_url(session)).content.decode()

    assert '<div class="text">Está tudo certo?</div>' in page
    assert (
        '<ul class="options"><li class="chip">Confirmar</li><li class="chip">Corrigir</li></ul>'
    ) in page
    assert '<div class="text">Confirmar</div>' in page
    assert bubbles(page) == [("bubble bot", asked.pk), ("bubble customer", tapped.pk)]
