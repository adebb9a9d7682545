"""The conversation page's live endpoint (`support.admin.live`, `support.live`): who may read it,
what it answers (masked as the page), its ETag, bad input, the viewers' heartbeat and a query
count that does not grow with the conversation."""

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.http import HttpResponse
from django.http.response import HttpResponseBase
from django.test import Client
from pytest_django import DjangoAssertNumQueries

from conversations.models import DeliveryStatus, Direction, Message, Session, SessionViewer
from support.live import (
    HEARTBEAT_WRITE_SECONDS,
    MAX_LIVE_MESSAGES,
    presence_text,
    session_viewers_touch,
)
from tests import baker_recipes as recipes
from tests.helpers.staff import PROMPT_EDITORS, SUPPORT, logged_in, staff_member

pytestmark = pytest.mark.django_db

AT = datetime(2026, 11, 20, 13, 0, tzinfo=UTC)  # 10:00 in São Paulo


def live_url(session_id: int, after: str = "0") -> str:
    return f"/admin/conversations/session/{session_id}/live/?after={after}"


def body(response: HttpResponseBase) -> Any:
    assert response["Content-Type"] == "application/json"
    assert isinstance(response, HttpResponse)
    return json.loads(response.content)


def conversation() -> tuple[Session, Message, Message]:
    """Maria's conversation with Bruno: her question (with her CPF), Bruno's answer, read."""
    bruno = recipes.staff_user.make(username="bruno", first_name="Bruno", last_name="Lima")
    session = recipes.session.make(
        customer_name="Maria Souza",
        customer_phone="5511912345678",
        state="HUMAN",
        assigned_to=bruno,
        last_inbound_at=AT,
    )
    question = Message.objects.create(
        session=session,
        direction=Direction.INBOUND,
        content="Sou a Maria Souza, CPF 529.982.247-25",
        created_at=AT,
    )
    answer = Message.objects.create(
        session=session,
        direction=Direction.OUTBOUND,
        content="Olá, *Maria*! Já vejo o orçamento.",
        staff_user=bruno,
        wa_message_id="wamid.OUT1",
        delivery_status=DeliveryStatus.READ,
        delivery_status_at=AT + timedelta(seconds=5),
        created_at=AT + timedelta(seconds=1),
    )
    return session, question, answer


# --- Who may read it --------------------------------------------------------------------------


def test_anonymous_is_sent_to_the_login() -> None:
    session, _question, _answer = conversation()

    response = Client().get(live_url(session.pk))

    assert response.status_code == 302
    assert response["Location"] == (
        f"/admin/login/?next=/admin/conversations/session/{session.pk}/live/%3Fafter%3D0"
    )


@pytest.mark.parametrize(
    "permissions",
    [(), ("conversations.view_personal_data",), ("conversations.view_message",)],
)
def test_staff_who_may_not_read_conversations_get_403(permissions: tuple[str, ...]) -> None:
    session, _question, _answer = conversation()
    client = logged_in(staff_member(permissions=permissions))

    response = client.get(live_url(session.pk))

    assert response.status_code == 403
    assert SessionViewer.objects.count() == 0


def test_support_reads_the_messages_after_the_one_shown() -> None:
    session, question, answer = conversation()
    ana = staff_member(SUPPORT)

    response = logged_in(ana).get(live_url(session.pk, after=str(question.pk)))

    assert response.status_code == 200
    assert body(response) == {
        "messages": [
            {
                "id": answer.pk,
                "direction": "OUTBOUND",
                "side": "staff",
                "kind": "text",
                "text": "Olá, *Maria*! Já vejo o orçamento.",
                "html": "Olá, <strong>Maria</strong>! Já vejo o orçamento.",
                "author": "Equipe · Bruno Lima",
                "meta": "20/11/2026 10:00",
                "delivery": "lida 10:00",
                "delivery_failed": False,
                "superseded": False,
                "created_at": "2026-11-20T13:00:01+00:00",
                "technical": "",
                "retryable": False,
                "media_html": "",
                "quote": "",
                "reaction": "",
                "options": [],
                "reply_kind": "",
                "save_case_url": "",
            }
        ],
        "more": False,
        "statuses": [],
        "state": "HUMAN",
        "state_label": "Com humano",
        "assigned_to": "Bruno Lima",
        "assigned_to_other": True,
        "status_text": "Com humano · atribuída a Bruno Lima",
        "window": {"is_open": False, "closes_at": "2026-11-21T10:00:00-03:00"},
        "viewers": [],
        "presence": "",
        # No `after_note` asked: no note is read (tests/support/test_notes.py).
        "notes": [],
        "notes_more": False,
        # No `media` asked: no media block is read again.
        "media": [],
    }


def test_a_prompt_editor_reads_the_same_answer_masked() -> None:
    session, _question, _answer = conversation()
    editor = staff_member(PROMPT_EDITORS)

    response = logged_in(editor).get(live_url(session.pk))

    assert response.status_code == 200
    messages = body(response)["messages"]
    assert [(m["author"], m["text"]) for m in messages] == [
        ("M*** S***", "Sou a M*** S***, CPF ***.***.***-**"),
        ("Equipe · Bruno Lima", "Olá, *M****! Já vejo o orçamento."),
    ]
    assert "Maria" not in response.content.decode()
    assert "529" not in response.content.decode()


def test_a_bot_bubble_links_to_save_it_as_a_test_case_for_an_editor_only() -> None:
    session, question, answer = conversation()
    bot = Message.objects.create(
        session=session,
        direction=Direction.OUTBOUND,
        content="Posso ajudar com mais alguma coisa?",
        turn_id="6f1c1a52-8f0e-4a8e-9d1e-0c5b9c1f2a10",
        created_at=AT + timedelta(seconds=2),
    )
    untracked = Message.objects.create(  # a bot text with no turn: no call to save
        session=session,
        direction=Direction.OUTBOUND,
        content="Mensagem antiga",
        created_at=AT + timedelta(seconds=3),
    )

    def links(user: User) -> list[tuple[int, str]]:
        data = body(logged_in(user).get(live_url(session.pk)))
        return [(m["id"], m["save_case_url"]) for m in data["messages"]]

    assert links(staff_member(PROMPT_EDITORS)) == [
        (question.pk, ""),
        (answer.pk, ""),
        (bot.pk, f"/admin/governance/prompttestcase/from-message/{bot.pk}/"),
        (untracked.pk, ""),
    ]
    assert [url for _id, url in links(staff_member(SUPPORT))] == ["", "", "", ""]


def test_a_superuser_reads_it_unmasked() -> None:
    session, question, answer = conversation()
    root = User.objects.create_superuser("root", "root@example.com", "x")

    data = body(logged_in(root).get(live_url(session.pk)))

    assert [(m["id"], m["author"], m["text"]) for m in data["messages"]] == [
        (question.pk, "Maria Souza", "Sou a Maria Souza, CPF 529.982.247-25"),
        (answer.pk, "Equipe · Bruno Lima", "Olá, *Maria*! Já vejo o orçamento."),
    ]


def test_the_delivery_of_the_bubbles_shown_is_in_the_answer() -> None:
    session, _question, answer = conversation()
    answer.delivery_status = DeliveryStatus.FAILED
    answer.delivery_error_code = 131047
    answer.delivery_error_title = "Re-engagement message"
    answer.save()

    data = body(logged_in(staff_member(SUPPORT)).get(live_url(session.pk, after=str(answer.pk))))

    assert data["messages"] == []
    assert data["statuses"] == [
        {
            "id": answer.pk,
            "delivery": "falhou 10:00 · erro 131047: mais de 24 horas desde a última mensagem do cliente: só"
            " um modelo de mensagem do WhatsApp pode ser enviado",
            "delivery_failed": True,
            "reaction": "",
        }
    ]


# --- Bad input --------------------------------------------------------------------------------


@pytest.mark.parametrize("after", ["abc", "-1", "", "1.5", "٣", "99999999999999999999"])
def test_an_after_that_is_not_a_message_id_is_a_400(after: str) -> None:
    session, _question, _answer = conversation()

    response = logged_in(staff_member(SUPPORT)).get(live_url(session.pk, after=after))

    assert response.status_code == 400
    assert body(response) == {
        "error": "after: o id da última mensagem mostrada, um número inteiro (0 para nenhuma)."
    }


def test_an_unknown_conversation_is_a_404() -> None:
    response = logged_in(staff_member(SUPPORT)).get(live_url(987654))

    assert response.status_code == 404
    assert body(response) == {"error": "A conversa #987654 não existe."}


def test_a_post_is_refused() -> None:
    session, _question, _answer = conversation()

    response = logged_in(staff_member(SUPPORT)).post(live_url(session.pk))

    assert response.status_code == 405


# --- ETag and paging --------------------------------------------------------------------------


def test_nothing_changed_is_a_304_and_a_new_message_a_new_answer() -> None:
    session, _question, answer = conversation()
    client = logged_in(staff_member(SUPPORT))
    url = live_url(session.pk, after=str(answer.pk))
    first = client.get(url)

    unchanged = client.get(url, headers={"If-None-Match": first["ETag"]})
    Message.objects.create(session=session, direction=Direction.INBOUND, content="Obrigada!")
    changed = client.get(url, headers={"If-None-Match": first["ETag"]})

    assert (unchanged.status_code, unchanged.content) == (304, b"")
    assert unchanged["ETag"] == first["ETag"]
    assert changed.status_code == 200
    assert changed["ETag"] != first["ETag"]
    assert [m["text"] for m in body(changed)["messages"]] == ["Obrigada!"]
    assert "no-cache" in changed["Cache-Control"]


def test_a_long_gap_is_answered_in_pages() -> None:
    session = recipes.session.make()
    Message.objects.bulk_create(
        Message(session=session, direction=Direction.INBOUND, content=f"m{i}")
        for i in range(MAX_LIVE_MESSAGES + 3)
    )
    client = logged_in(staff_member(SUPPORT))

    first = body(client.get(live_url(session.pk)))
    rest = body(client.get(live_url(session.pk, after=str(first["messages"][-1]["id"]))))

    assert (len(first["messages"]), first["more"]) == (MAX_LIVE_MESSAGES, True)
    assert first["messages"][0]["text"] == "m0"
    assert ([m["text"] for m in rest["messages"]], rest["more"]) == (
        ["m100", "m101", "m102"],
        False,
    )


# --- Who else is here -------------------------------------------------------------------------


def test_colleagues_polling_the_page_are_named() -> None:
    session, _question, _answer = conversation()
    ana = staff_member(SUPPORT)
    ana.first_name = "Ana"
    ana.save()
    carla = staff_member(SUPPORT)
    carla.first_name, carla.last_name = "Carla", "Dias"
    carla.save()
    bruno = User.objects.get(username="bruno")
    bruno.user_permissions.add(*ana.groups.get().permissions.all())

    logged_in(bruno).get(live_url(session.pk))
    logged_in(carla).get(live_url(session.pk))
    data = body(logged_in(ana).get(live_url(session.pk)))
    seen_by_bruno = body(logged_in(bruno).get(live_url(session.pk)))

    assert (data["viewers"], data["presence"]) == (
        ["Bruno Lima", "Carla Dias"],
        "Bruno Lima e Carla Dias também estão nesta conversa",
    )
    assert seen_by_bruno["presence"] == "Carla Dias e Ana também estão nesta conversa"
    assert SessionViewer.objects.filter(session=session).count() == 3


@pytest.mark.parametrize(
    ("names", "text"),
    [
        ([], ""),
        (["Ana"], "Ana também está nesta conversa"),
        (["Ana", "Bruno"], "Ana e Bruno também estão nesta conversa"),
        (["Ana", "Bruno", "Carla"], "Ana, Bruno e Carla também estão nesta conversa"),
    ],
)
def test_the_presence_line(names: list[str], text: str) -> None:
    assert presence_text(names) == text


def test_a_viewer_who_stopped_polling_is_gone_after_30_seconds() -> None:
    session = recipes.session.make()
    ana, bruno = recipes.staff_user.make(_quantity=2)

    session_viewers_touch(session_id=session.pk, user=bruno, now=AT)

    assert [v.user for v in session_viewers_touch(session_id=session.pk, user=ana, now=AT)] == [
        bruno
    ]
    later = AT + timedelta(seconds=30)
    assert [v.user for v in session_viewers_touch(session_id=session.pk, user=ana, now=later)] == [
        bruno
    ]
    gone = AT + timedelta(seconds=31)
    assert session_viewers_touch(session_id=session.pk, user=ana, now=gone) == []


def test_the_heartbeat_row_moves_at_most_every_10_seconds(
    django_assert_num_queries: DjangoAssertNumQueries,
) -> None:
    session = recipes.session.make()
    ana = recipes.staff_user.make()

    with django_assert_num_queries(2):  # the viewers, the upsert
        session_viewers_touch(session_id=session.pk, user=ana, now=AT)
    soon = AT + timedelta(seconds=HEARTBEAT_WRITE_SECONDS - 1)
    with django_assert_num_queries(1):  # the viewers only
        session_viewers_touch(session_id=session.pk, user=ana, now=soon)
    later = AT + timedelta(seconds=HEARTBEAT_WRITE_SECONDS)
    with django_assert_num_queries(2):
        session_viewers_touch(session_id=session.pk, user=ana, now=later)

    assert list(SessionViewer.objects.values_list("user_id", "seen_at")) == [(ana.pk, later)]


# --- Queries ----------------------------------------------------------------------------------


@pytest.mark.parametrize("messages", [3, 60])
@pytest.mark.parametrize(
    ("group", "queries"),
    # Login session and user; the user's own and group permissions (then cached); the
    # session with its instance and assignee; the new messages with their staff authors and
    # media (joined, tests/support/test_live_media.py); the latest outbound messages' delivery;
    # the viewers; the heartbeat upsert (first poll).
    [(SUPPORT, 9), (PROMPT_EDITORS, 9), ("superuser", 7)],
)
def test_the_query_count_does_not_grow_with_the_conversation(
    messages: int,
    group: str,
    queries: int,
    django_assert_num_queries: DjangoAssertNumQueries,
) -> None:
    session = recipes.session.make(customer_name="Maria Souza")
    staff = recipes.staff_user.make()
    Message.objects.bulk_create(
        Message(
            session=session,
            direction=Direction.OUTBOUND if i % 2 else Direction.INBOUND,
            content=f"m{i}",
            staff_user=staff if i % 4 == 1 else None,
        )
        for i in range(messages)
    )
    half = session.messages.order_by("pk")[messages // 2].pk
    if group == "superuser":
        user = User.objects.create_superuser("root", "root@example.com", "x")
    else:
        user = staff_member(group)
    client = logged_in(user)

    with django_assert_num_queries(queries):
        response = client.get(live_url(session.pk, after=str(half)))
    with django_assert_num_queries(queries - 1):  # the heartbeat is fresh: no write
        client.get(live_url(session.pk, after=str(half)))

    assert len(body(response)["messages"]) == messages - messages // 2 - 1
