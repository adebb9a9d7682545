"""The closed window's composer: the template picker on the conversation page (who gets it,
which WhatsApp message templates it offers, with what parameters), and that outside the window
nothing but an approved template can be sent, checked by the server."""

import html
import json
import re
from datetime import timedelta
from typing import Any
from uuid import uuid4

import pytest
from django.contrib.auth.models import Group, User
from django.contrib.messages import get_messages
from django.test import Client
from django.utils import timezone
from model_bakery import baker
from pytest_django import DjangoAssertNumQueries, DjangoCaptureOnCommitCallbacks

from agents.states import SessionState
from conversations.models import Direction, Instance, Message, MessageTemplate, Session
from support.admin.template_picker import template_picker_for
from tests.fakes.graph_server import FakeGraphAPI

pytestmark = pytest.mark.django_db

WABA = "102290129340398"
OTHER_WABA = "200000000000002"


def staff(group: str, username: str) -> User:
    user = baker.make(User, username=username, is_staff=True)
    user.groups.add(Group.objects.get(name=group))
    return user


def client_of(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def flash(response: Any) -> list[tuple[str, str]]:
    return [(m.level_tag, str(m)) for m in get_messages(response.wsgi_request)]


def text_of(page: str) -> str:
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", page)))


@pytest.fixture
def support() -> User:
    return staff("Support", "ana")


@pytest.fixture
def session(support: User) -> Session:
    """With the team (ana), the customer's last message 25 hours ago: the window is closed."""
    return baker.make(
        Session,
        instance=baker.make(
            Instance, phone_number_id="100000000000001", name="Lab", access_token="", waba_id=WABA
        ),
        customer_phone="5511987654321",
        customer_name="Maria Silva",
        state=SessionState.HUMAN.value,
        assigned_to=support,
        handed_off_at=timezone.now(),
        last_inbound_at=timezone.now() - timedelta(hours=25),
    )


def synced(name: str, body: str, *, waba_id: str = WABA, **fields: Any) -> MessageTemplate:
    count = len(re.findall(r"\{\{\d+\}\}", body))
    template: MessageTemplate = MessageTemplate.objects.create(
        waba_id=waba_id,
        name=name,
        body=body,
        category="UTILITY",
        components=[
            {"type": "HEADER", "format": "TEXT", "text": "Laboratório"},
            {
                "type": "BODY",
                "text": body,
                "example": {"body_text": [["Maria", "sangue"][:count]]},
            },
            {"type": "FOOTER", "text": "Responda para falar conosco"},
        ],
        parameter_count=count,
        parameters=[f"{{{{{n}}}}}" for n in range(1, count + 1)],
        meta_status="APPROVED",
        **fields,
    )
    return template


@pytest.fixture
def templates() -> list[MessageTemplate]:
    return [
        synced("resultado_pronto", "Olá, {{1}}! Seu exame de {{2}} está pronto."),
        synced("lembrete", "Temos novidades para você."),
        synced("de_outra_conta", "Oi, {{1}}", waba_id=OTHER_WABA),
        synced("desativado", "Oi, {{1}}", is_active=False),
        MessageTemplate.objects.create(
            name="retomar_contato", body="Olá, {{1}}!", parameters=["Nome"], parameter_count=1
        ),
    ]


def page_url(session: Session) -> str:
    return f"/admin/conversations/session/{session.pk}/change/"


# --- The picker ------------------------------------------------------------------------------


def test_a_closed_window_offers_the_numbers_templates_with_their_parameters(
    session: Session, support: User, templates: list[MessageTemplate]
) -> None:
    picker = template_picker_for(session=session, user=support, now=timezone.now())

    assert picker is not None
    assert picker.url == f"/admin/conversations/session/{session.pk}/send-template/"
    assert [
        (t.name, t.category, [(p.label, p.example) for p in t.parameters]) for t in picker.templates
    ] == [
        ("lembrete", "utilidade", []),
        ("resultado_pronto", "utilidade", [("{{1}}", "Maria"), ("{{2}}", "sangue")]),
        ("retomar_contato", "", [("Nome", "")]),
    ]
    first = templates[0]
    assert picker.data[str(first.pk)] == {
        "header": "Laboratório",
        "body": "Olá, {{1}}! Seu exame de {{2}} está pronto.",
        "footer": "Responda para falar conosco",
    }


def test_the_page_shows_the_picker_in_place_of_the_reply_box(
    session: Session, support: User, templates: list[MessageTemplate]
) -> None:
    page = client_of(support).get(page_url(session)).content.decode()

    assert 'id="template-picker"' in page
    # The composer's text is for an internal note only: its reply button cannot send.
    assert re.search(r'<button [^>]*id="action-reply"[^>]* disabled>', page)
    assert "Enviar modelo de mensagem do WhatsApp" in text_of(page)
    choice = page[page.index('id="template-picker-choice"') :]
    offered = re.findall(r'<option value="(\d+)">', choice[: choice.index("</select>")])
    by_name = {t.name: str(t.pk) for t in templates}
    assert offered == [by_name["lembrete"], by_name["resultado_pronto"], by_name["retomar_contato"]]
    assert 'placeholder="ex.: Maria"' in page
    found = re.search(
        r'<script id="template-picker-data" type="application/json">(.*?)</script>', page
    )
    assert found is not None
    assert sorted(json.loads(found.group(1))) == sorted(offered)


def test_no_template_yet_says_how_to_get_them(session: Session, support: User) -> None:
    page = client_of(support).get(page_url(session)).content.decode()

    assert (
        "Ainda não há modelo de mensagem do WhatsApp aprovado para este número. Um "
        "superusuário os sincroniza em Modelos de mensagem do WhatsApp, com o botão "
        "Sincronizar com o WhatsApp."
    ) in text_of(page)


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"last_inbound_at": timedelta(hours=23, minutes=59)}, "window open"),
        ({"state": SessionState.QUALIFYING.value}, "with the bot"),
        ({"state": SessionState.CLOSED.value}, "closed"),
    ],
    ids=["window open", "with the bot", "closed"],
)
def test_no_picker_where_it_has_no_place(
    session: Session, support: User, fields: dict[str, Any], reason: str
) -> None:
    # A time left relative to now, read when the test runs (not when it is collected).
    fields = {
        name: timezone.now() - value if isinstance(value, timedelta) else value
        for name, value in fields.items()
    }
    Session.objects.filter(pk=session.pk).update(**fields)
    session.refresh_from_db()

    assert template_picker_for(session=session, user=support, now=timezone.now()) is None


def test_a_customer_who_never_wrote_gets_the_picker(session: Session, support: User) -> None:
    Session.objects.filter(pk=session.pk).update(last_inbound_at=None)
    session.refresh_from_db()

    assert template_picker_for(session=session, user=support, now=timezone.now()) is not None


def test_a_prompt_editor_gets_no_picker(session: Session) -> None:
    editor = staff("Prompt editors", "carla")

    assert template_picker_for(session=session, user=editor, now=timezone.now()) is None
    assert 'id="template-picker"' not in client_of(editor).get(page_url(session)).content.decode()


def test_the_picker_costs_the_same_queries_for_any_number_of_templates(
    session: Session, support: User, django_assert_num_queries: DjangoAssertNumQueries
) -> None:
    synced("um", "Oi, {{1}}")
    session = Session.objects.select_related("instance").get(pk=session.pk)
    template_picker_for(session=session, user=support, now=timezone.now())  # permissions cached
    with django_assert_num_queries(1):
        template_picker_for(session=session, user=support, now=timezone.now())
    for n in range(5):
        synced(f"mais_{n}", "Oi, {{1}} e {{2}}")

    with django_assert_num_queries(1):
        picker = template_picker_for(session=session, user=support, now=timezone.now())

    assert picker is not None
    assert len(picker.templates) == 6


# --- Outside the window only a template ------------------------------------------------------


def test_a_reply_outside_the_window_is_refused_by_the_server(
    session: Session, support: User, templates: list[MessageTemplate]
) -> None:
    response = client_of(support).post(
        f"/admin/conversations/session/{session.pk}/reply/",
        {"text": "Oi, Maria?", "form_token": str(uuid4())},
    )

    assert flash(response) == [
        (
            "error",
            "A janela de 24 horas do WhatsApp está fechada: o cliente escreveu pela última vez "
            "há mais de 24 horas. Envie um modelo de mensagem do WhatsApp aprovado: lembrete, "
            "resultado_pronto, retomar_contato.",
        )
    ]
    assert not Message.objects.filter(session=session, direction=Direction.OUTBOUND).exists()


def test_a_template_of_another_account_is_refused(
    session: Session, support: User, templates: list[MessageTemplate], fake_graph: FakeGraphAPI
) -> None:
    other = next(t for t in templates if t.name == "de_outra_conta")

    response = client_of(support).post(
        f"/admin/conversations/session/{session.pk}/send-template/",
        {"template": other.pk, "parameter": ["Maria"], "form_token": str(uuid4())},
    )

    assert flash(response) == [("error", "Escolha um dos modelos de mensagem do WhatsApp ativos.")]
    assert fake_graph.requests == []


def test_a_synced_template_is_sent_with_its_parameters(
    session: Session,
    support: User,
    templates: list[MessageTemplate],
    fake_graph: FakeGraphAPI,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        response = client_of(support).post(
            f"/admin/conversations/session/{session.pk}/send-template/",
            {
                "template": templates[0].pk,
                "parameter": ["Maria", "sangue"],
                "form_token": str(uuid4()),
            },
        )

    assert flash(response) == [("success", "Modelo de mensagem enviado ao WhatsApp.")]
    [send] = fake_graph.sends
    assert send.json["template"] == {
        "name": "resultado_pronto",
        "language": {"code": "pt_BR"},
        "components": [
            {
                "type": "body",
                "parameters": [
                    {"type": "text", "text": "Maria"},
                    {"type": "text", "text": "sangue"},
                ],
            }
        ],
    }


def test_a_reply_outside_the_window_without_templates_says_none_is_available(
    session: Session, support: User
) -> None:
    synced("de_outra_conta", "Oi, {{1}}", waba_id=OTHER_WABA)

    response = client_of(support).post(
        f"/admin/conversations/session/{session.pk}/reply/",
        {"text": "Oi, Maria?", "form_token": str(uuid4())},
    )

    assert flash(response)[0][1].endswith(
        "Envie um modelo de mensagem do WhatsApp aprovado: nenhum disponível para este número "
        "ainda."
    )
    assert not Message.objects.filter(session=session, direction=Direction.OUTBOUND).exists()
