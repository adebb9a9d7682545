"""The conversation workspace over HTTP: the staff actions' JSON answers, the question before
replying to a colleague's conversation (409), "Tentar de novo" on a failed reply, who sees the
workspace, the technical details and the raw fields, and the queue's JSON answer; every new or
changed endpoint for anonymous, no permission, Support, prompt editor and superuser, masking
included."""

import html
import json
import re
from datetime import timedelta
from typing import Any
from uuid import UUID, uuid4

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.contrib.messages import get_messages
from django.test import Client
from django.utils import timezone
from model_bakery import baker
from pytest_django import DjangoCaptureOnCommitCallbacks

from agents.states import SessionState
from conversations.models import DeliveryStatus, Direction, Instance, Message, Session
from support.notes import session_note_add
from tests.fakes.graph_server import FakeGraphAPI

pytestmark = pytest.mark.django_db

PHONE_NUMBER_ID = "100000000000001"
CUSTOMER_PHONE = "5511987654321"
ASSIGNED_TO_BRUNO = "Está atribuída a Bruno Lima — responder mesmo assim?"
NO_PERMISSION = "Você não tem permissão para atender conversas."


def staff(group: str | None, username: str, *, first_name: str = "", last_name: str = "") -> User:
    user = baker.make(
        User, username=username, is_staff=True, first_name=first_name, last_name=last_name
    )
    if group:
        user.groups.add(Group.objects.get(name=group))
    return user


def client_of(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def ana() -> User:
    return staff("Support", "ana", first_name="Ana")


@pytest.fixture
def bruno() -> User:
    return staff("Support", "bruno", first_name="Bruno", last_name="Lima")


@pytest.fixture
def carla() -> User:
    return staff("Prompt editors", "carla")


@pytest.fixture
def nobody() -> User:
    """Staff with the view permission on conversations but not the one to attend them."""
    user = staff(None, "dora")
    user.user_permissions.add(
        Permission.objects.get(content_type__app_label="conversations", codename="view_session")
    )
    return user


@pytest.fixture
def root() -> User:
    return User.objects.create_superuser("root", password="x")


@pytest.fixture
def session(ana: User) -> Session:
    """Maria with the team, assigned to Ana, who wrote an hour ago (the window is open)."""
    now = timezone.now()
    return baker.make(
        Session,
        instance=baker.make(Instance, phone_number_id=PHONE_NUMBER_ID, name="Lab", access_token=""),
        customer_phone=CUSTOMER_PHONE,
        customer_name="Maria Silva",
        state=SessionState.HUMAN.value,
        handoff_reason="staff_takeover",
        handed_off_at=now - timedelta(minutes=30),
        assigned_to=ana,
        last_inbound_at=now - timedelta(hours=1),
    )


def url(session: Session, action: str) -> str:
    return f"/admin/conversations/session/{session.pk}/{action}/"


def page_url(session: Session) -> str:
    return f"/admin/conversations/session/{session.pk}/change/"


def post_json(client: Client, path: str, **data: Any) -> Any:
    return client.post(path, data, headers={"Accept": "application/json"})


def token() -> str:
    return str(uuid4())


def staff_messages(session: Session) -> list[tuple[str, str]]:
    return [
        (m.staff_user.username, m.content)  # type: ignore[union-attr]
        for m in Message.objects.filter(
            session=session, direction=Direction.OUTBOUND, staff_user__isnull=False
        ).order_by("id")
    ]


def text_of(page: str) -> str:
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", page)))


# --- The staff actions answer JSON when asked ------------------------------------------------


def test_a_reply_asked_as_json_is_answered_ok_with_the_next_token(
    session: Session, ana: User
) -> None:
    response = post_json(client_of(ana), url(session, "reply"), text="Olá!", form_token=token())

    assert response.status_code == 200
    answer = response.json()
    [reply] = Message.objects.filter(session=session, direction=Direction.OUTBOUND)
    assert answer == {
        "ok": True,
        "changed": True,
        "message": "Resposta simulada (sem token do WhatsApp): nada foi enviado ao cliente.",
        "message_id": reply.pk,
        "form_token": answer["form_token"],
    }
    assert UUID(answer["form_token"])
    assert list(get_messages(response.wsgi_request)) == []


def test_a_refused_action_asked_as_json_is_a_400_with_the_sentence(
    session: Session, ana: User
) -> None:
    response = post_json(client_of(ana), url(session, "reply"), text="  ", form_token=token())

    assert response.status_code == 400
    assert response.json() == {"error": "Escreva a resposta antes de enviar."}
    assert staff_messages(session) == []


def test_an_unknown_conversation_asked_as_json_is_a_404_with_the_sentence(ana: User) -> None:
    response = post_json(client_of(ana), "/admin/conversations/session/999999/close/")

    assert response.status_code == 404
    assert response.json() == {"error": "A conversa #999999 não existe."}


@pytest.mark.parametrize("who", ["nobody", "carla"])
def test_staff_who_may_not_attend_get_a_403_as_json(
    session: Session, who: str, request: pytest.FixtureRequest
) -> None:
    user = request.getfixturevalue(who)

    response = post_json(client_of(user), url(session, "reply"), text="Oi", form_token=token())

    assert response.status_code == 403
    assert response.json() == {"error": NO_PERMISSION}
    assert staff_messages(session) == []


def test_an_anonymous_json_post_goes_to_the_login_page(session: Session) -> None:
    response = post_json(Client(), url(session, "reply"), text="Oi", form_token=token())

    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/")


def test_a_superuser_gets_the_json_answer_too(session: Session, root: User) -> None:
    response = post_json(client_of(root), url(session, "close"))

    assert response.status_code == 200
    assert response.json()["message"] == "Conversa encerrada."
    session.refresh_from_db()
    assert session.state == "CLOSED"


def test_a_plain_form_post_is_a_303_back_to_the_page(session: Session, ana: User) -> None:
    response = client_of(ana).post(url(session, "close"))

    assert response.status_code == 303
    assert response["Location"] == page_url(session) + "#staff-actions"


# --- Replying to a colleague's conversation --------------------------------------------------


def test_a_reply_to_a_colleagues_conversation_asks_first_with_a_409(
    session: Session, bruno: User
) -> None:
    response = post_json(client_of(bruno), url(session, "reply"), text="Oi", form_token=token())

    # Assigned to Ana; Bruno writes.
    assert response.status_code == 409
    assert response.json() == {
        "error": "Está atribuída a Ana — responder mesmo assim?",
        "assigned_to_another": True,
    }
    assert staff_messages(session) == []


def test_the_question_names_the_assignee_by_full_name(
    session: Session, ana: User, bruno: User
) -> None:
    Session.objects.filter(pk=session.pk).update(assigned_to=bruno)

    response = post_json(client_of(ana), url(session, "reply"), text="Oi", form_token=token())

    assert (response.status_code, response.json()["error"]) == (409, ASSIGNED_TO_BRUNO)


def test_a_confirmed_reply_to_a_colleagues_conversation_is_sent(
    session: Session, bruno: User
) -> None:
    response = post_json(
        client_of(bruno),
        url(session, "reply"),
        text="Oi, Maria",
        form_token=token(),
        confirm_other_assignee="1",
    )

    assert response.status_code == 200
    assert staff_messages(session) == [("bruno", "Oi, Maria")]


@pytest.mark.parametrize("confirm", ["", "0", "true", "yes"])
def test_only_confirm_1_confirms(session: Session, bruno: User, confirm: str) -> None:
    response = post_json(
        client_of(bruno),
        url(session, "reply"),
        text="Oi",
        form_token=token(),
        confirm_other_assignee=confirm,
    )

    assert response.status_code == 409


def test_no_question_for_ones_own_or_an_unassigned_conversation(
    session: Session, ana: User
) -> None:
    client = client_of(ana)
    assert post_json(client, url(session, "reply"), text="1", form_token=token()).status_code == 200
    Session.objects.filter(pk=session.pk).update(assigned_to=None)
    assert post_json(client, url(session, "reply"), text="2", form_token=token()).status_code == 200
    assert staff_messages(session) == [("ana", "1"), ("ana", "2")]


def test_a_plain_form_reply_to_a_colleagues_conversation_is_refused_with_the_question(
    session: Session, bruno: User
) -> None:
    response = client_of(bruno).post(url(session, "reply"), {"text": "Oi", "form_token": token()})

    assert response.status_code == 303
    assert [(m.level_tag, str(m)) for m in get_messages(response.wsgi_request)] == [
        ("error", "Está atribuída a Ana — responder mesmo assim?")
    ]
    assert staff_messages(session) == []


# --- Tentar de novo --------------------------------------------------------------------------


def failed_reply(session: Session, user: User, **fields: Any) -> Message:
    values: dict[str, Any] = {
        "session": session,
        "direction": Direction.OUTBOUND,
        "content": "Olá, Maria! O orçamento sai hoje.",
        "staff_user": user,
        "wa_message_id": "wamid.FAILED1",
        "delivery_status": DeliveryStatus.FAILED,
        "delivery_error_code": 131026,
        "json_part": {"form_token": token()},
    }
    values.update(fields)
    return Message.objects.create(**values)


def test_retry_sends_the_failed_text_again_as_a_new_message(
    session: Session,
    ana: User,
    fake_graph: FakeGraphAPI,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    Instance.objects.filter(pk=session.instance_id).update(access_token="test-access-token")
    failed = failed_reply(session, ana)
    once = token()

    with django_capture_on_commit_callbacks(execute=True):
        response = post_json(
            client_of(ana), url(session, "retry"), message=str(failed.pk), form_token=once
        )

    assert response.status_code == 200
    assert response.json()["message"] == "Resposta enviada ao WhatsApp."
    again = Message.objects.get(pk=response.json()["message_id"])
    assert (again.content, again.staff_user, again.json_part) == (
        "Olá, Maria! O orçamento sai hoje.",
        ana,
        {"form_token": once, "retry_of": failed.pk},
    )
    [send] = fake_graph.sends
    assert send.json["text"] == {"body": "Olá, Maria! O orçamento sai hoje."}
    failed.refresh_from_db()
    assert failed.delivery_status == DeliveryStatus.FAILED  # the failed one stays as it was


def test_retry_is_once_per_failed_reply_and_a_repeat_changes_nothing(
    session: Session, ana: User
) -> None:
    failed = failed_reply(session, ana)
    client = client_of(ana)
    once = token()
    first = post_json(client, url(session, "retry"), message=str(failed.pk), form_token=once)

    repeat = post_json(client, url(session, "retry"), message=str(failed.pk), form_token=once)
    other = post_json(client, url(session, "retry"), message=str(failed.pk), form_token=token())

    assert first.status_code == 200
    assert (repeat.status_code, repeat.json()["changed"]) == (200, False)
    assert repeat.json()["message"] == "Esta resposta já foi enviada."
    assert other.status_code == 400
    assert other.json() == {"error": "Esta resposta já foi enviada de novo."}
    assert len(staff_messages(session)) == 2


def test_a_reply_that_stopped_with_an_error_may_be_retried(session: Session, ana: User) -> None:
    failed = failed_reply(session, ana, delivery_status=DeliveryStatus.PENDING, error="graph_400")

    response = post_json(
        client_of(ana), url(session, "retry"), message=str(failed.pk), form_token=token()
    )

    assert response.status_code == 200


@pytest.mark.parametrize(
    "fields",
    [
        {"delivery_status": DeliveryStatus.DELIVERED},  # it arrived
        {"staff_user": None},  # the bot's
        {"message_type": "template"},  # a template needs its parameters
        {"error": "superseded", "delivery_status": ""},  # a discarded draft
        {"direction": Direction.INBOUND},
    ],
)
def test_only_a_failed_team_text_reply_may_be_retried(
    session: Session, ana: User, fields: dict[str, Any]
) -> None:
    message = failed_reply(session, ana, **fields)

    response = post_json(
        client_of(ana), url(session, "retry"), message=str(message.pk), form_token=token()
    )

    assert response.status_code == 400
    assert response.json() == {
        "error": "Só uma resposta da equipe que falhou pode ser enviada de novo."
    }


@pytest.mark.parametrize("raw", ["", "abc", "-1", "1.5", "9" * 20])
def test_a_retry_without_a_message_id_is_a_400(session: Session, ana: User, raw: str) -> None:
    response = post_json(client_of(ana), url(session, "retry"), message=raw, form_token=token())

    assert response.status_code == 400
    assert response.json() == {
        "error": "Só uma resposta da equipe que falhou pode ser enviada de novo."
    }


def test_a_retry_of_another_conversations_message_is_refused(session: Session, ana: User) -> None:
    other = baker.make(Session, instance=session.instance, state="HUMAN")
    failed = failed_reply(other, ana)

    response = post_json(
        client_of(ana), url(session, "retry"), message=str(failed.pk), form_token=token()
    )

    assert response.status_code == 400
    assert Message.objects.filter(json_part__retry_of=failed.pk).count() == 0


def test_a_retry_of_a_colleagues_conversation_asks_first(session: Session, bruno: User) -> None:
    failed = failed_reply(session, bruno)

    response = post_json(
        client_of(bruno), url(session, "retry"), message=str(failed.pk), form_token=token()
    )

    assert (response.status_code, response.json()["error"]) == (
        409,
        "Está atribuída a Ana — responder mesmo assim?",
    )


def test_a_retry_outside_the_window_is_refused(session: Session, ana: User) -> None:
    Session.objects.filter(pk=session.pk).update(last_inbound_at=timezone.now() - timedelta(days=2))
    failed = failed_reply(session, ana)

    response = post_json(
        client_of(ana), url(session, "retry"), message=str(failed.pk), form_token=token()
    )

    assert response.status_code == 400
    assert response.json()["error"].startswith("A janela de 24 horas do WhatsApp está fechada")


@pytest.mark.parametrize("who", ["nobody", "carla"])
def test_a_retry_by_staff_who_may_not_attend_is_a_403(
    session: Session, ana: User, who: str, request: pytest.FixtureRequest
) -> None:
    failed = failed_reply(session, ana)
    client = client_of(request.getfixturevalue(who))

    plain = client.post(url(session, "retry"), {"message": failed.pk, "form_token": token()})
    as_json = post_json(client, url(session, "retry"), message=str(failed.pk), form_token=token())

    assert plain.status_code == 403
    assert (as_json.status_code, as_json.json()) == (403, {"error": NO_PERMISSION})
    assert len(staff_messages(session)) == 1


def test_an_anonymous_retry_goes_to_the_login_page(session: Session, ana: User) -> None:
    failed = failed_reply(session, ana)

    response = Client().post(url(session, "retry"), {"message": failed.pk, "form_token": token()})

    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/")


def test_a_superuser_may_retry(session: Session, ana: User, root: User) -> None:
    failed = failed_reply(session, ana)
    Session.objects.filter(pk=session.pk).update(assigned_to=root)

    response = post_json(
        client_of(root), url(session, "retry"), message=str(failed.pk), form_token=token()
    )

    assert response.status_code == 200


def test_the_page_offers_tentar_de_novo_on_a_failed_reply_until_it_was_sent_again(
    session: Session, ana: User
) -> None:
    failed = failed_reply(session, ana)
    client = client_of(ana)
    button = f'class="button retry-button" data-message-id="{failed.pk}">Tentar de novo</button>'

    assert button in client.get(page_url(session)).content.decode()
    post_json(client, url(session, "retry"), message=str(failed.pk), form_token=token())
    assert button not in client.get(page_url(session)).content.decode()


def test_the_live_answer_marks_a_failed_reply_as_retryable(session: Session, ana: User) -> None:
    failed = failed_reply(session, ana)

    answer = client_of(ana).get(url(session, "live") + "?after=0").json()

    [message] = answer["messages"]
    assert (message["id"], message["retryable"], message["delivery_failed"]) == (
        failed.pk,
        True,
        True,
    )
    assert answer["assigned_to_other"] is False


def test_the_live_answer_says_when_the_conversation_is_a_colleagues(
    session: Session, bruno: User
) -> None:
    answer = client_of(bruno).get(url(session, "live") + "?after=0").json()

    assert (answer["assigned_to"], answer["assigned_to_other"]) == ("Ana", True)


# --- Who sees what on the page ---------------------------------------------------------------


def bot_reply(session: Session) -> Message:
    return Message.objects.create(
        session=session,
        direction=Direction.OUTBOUND,
        agent="qualificacao",
        content="Quantas amostras?",
        code=1,
        delivery_status=DeliveryStatus.READ,
    )


def test_support_gets_the_workspace_with_the_technical_details_closed(
    session: Session, ana: User
) -> None:
    bot_reply(session)
    Message.objects.create(
        session=session,
        direction=Direction.SYSTEM,
        message_type="state_changed",
        code=2,
        json_part={"from": "TRIAGE", "to": "QUALIFYING"},
    )

    page = client_of(ana).get(page_url(session)).content.decode()

    assert '<div class="workspace" id="workspace">' in page
    assert '<details class="card ws-card technical-details" id="technical-details">' in page
    assert "Detalhes técnicos" in page
    assert '<span class="tech"> · código 1</span>' in page
    # The event's code too (hidden by the workspace's stylesheet until the details are open).
    assert 'Mudou para Qualificação<span class="tech"> (código 2)</span>.</li>' in page
    assert 'id="raw-fields"' not in page
    assert 'id="composer"' in page
    assert 'data-assigned-other="0"' in page
    customer = text_of(page[page.index('id="customer-card"') :])
    assert customer.startswith(
        'id="customer-card"> Cliente Nome Maria Silva Telefone +55 11 98765-4321 Instância Lab'
    )
    # The form the admin renders is not in the workspace's way: no raw field for Support.
    assert 'class="module aligned' not in page


def test_a_superuser_gets_the_technical_details_open_and_the_raw_fields(
    session: Session, root: User
) -> None:
    bot_reply(session)

    page = client_of(root).get(page_url(session)).content.decode()

    assert '<div class="workspace show-technical" id="workspace">' in page
    assert 'id="technical-details" open>' in page
    assert '<details class="raw-fields" id="raw-fields">' in page
    raw = page[page.index('id="raw-fields"') :]
    assert "Campos do registro (superusuários)" in raw
    assert 'class="module aligned' in raw


def test_a_prompt_editor_keeps_the_read_only_page_masked(session: Session, carla: User) -> None:
    bot_reply(session)

    page = client_of(carla).get(page_url(session)).content.decode()

    assert 'id="workspace"' not in page
    assert 'id="composer"' not in page
    assert 'id="transcript"' in page
    assert "código 1" in text_of(page)
    assert 'class="module aligned' in page
    assert "Maria Silva" not in page
    assert CUSTOMER_PHONE not in page


def test_a_colleagues_conversation_tells_the_composer_to_ask(session: Session, bruno: User) -> None:
    page = client_of(bruno).get(page_url(session)).content.decode()

    assert 'data-assigned-other="1"' in page
    assert 'data-confirm-other="Está atribuída a Ana — responder mesmo assim?"' in page


def test_close_and_give_back_carry_their_confirmation(session: Session, ana: User) -> None:
    page = client_of(ana).get(page_url(session)).content.decode()

    assert (
        'data-confirm="Encerrar a conversa com Maria Silva? A próxima mensagem do cliente abre '
        'uma conversa nova."'
    ) in page
    assert (
        'data-confirm="Devolver a conversa ao robô ({state})? O motivo e o resumo da '
        'transferência continuam no histórico."'
    ) in page
    assert '<dialog class="confirm-dialog" id="confirm-dialog"' in page


def test_a_given_back_conversation_keeps_its_handoff_in_the_history(
    session: Session, ana: User
) -> None:
    client = client_of(ana)
    Message.objects.create(
        session=session,
        direction=Direction.SYSTEM,
        message_type="handoff",
        action="model_requested",
        json_part={"reason": "model_requested", "detail": "", "motive": ""},
        created_at=timezone.now() - timedelta(minutes=30),
    )
    baker.make(
        "conversations.HandoffSummary",
        session=session,
        next_action="Enviar o orçamento da análise de potabilidade",
        summary_text="Cliente quer analisar a água do poço.",
    )
    client.post(url(session, "give-back"))

    history = text_of(client.get(page_url(session)).content.decode())
    history = history[history.index("Transferências desta conversa") :]

    assert "Transferido para atendimento humano:" in history
    assert "Enviar o orçamento da análise de potabilidade" in history
    assert "Cliente quer analisar a água do poço." in history


def test_the_assignees_list_offers_me_once(session: Session, ana: User, bruno: User) -> None:
    page = client_of(ana).get(page_url(session)).content.decode()

    options = re.findall(r'<option value="([^"]+)">([^<]+)</option>', page)
    assert ("me", "mim") in options
    assert (str(bruno.pk), "Bruno Lima") in options
    assert all(value != str(ana.pk) for value, _ in options)


# --- The queue's JSON answer -----------------------------------------------------------------


QUEUE = "/admin/conversations/session/queue/"


def queue_json(client: Client, **headers: str) -> Any:
    return client.get(QUEUE, headers={"Accept": "application/json", **headers})


def test_the_queue_answers_json_with_the_rows_and_an_etag(session: Session, ana: User) -> None:
    client = client_of(ana)

    response = queue_json(client)

    assert response.status_code == 200
    answer = json.loads(response.content)
    assert (answer["count"], answer["count_text"], answer["waiting_total"]) == (
        1,
        "1 cliente aguardando",
        1,
    )
    assert answer["waiting"] == [{"id": session.pk, "customer": "Maria Silva (+55 11 98765-4321)"}]
    assert f'data-session-id="{session.pk}"' in answer["rows_html"]
    assert answer["rows_html"].strip().startswith('<tbody id="queue-rows">')
    assert 'id="queue-pages"' in answer["pages_html"]
    assert response["Cache-Control"] == "private, no-cache, max-age=0, no-store, must-revalidate"

    again = queue_json(client, **{"If-None-Match": response["ETag"]})
    assert (again.status_code, again.content) == (304, b"")


def test_the_queue_json_lists_the_reader_s_unread_mentions_until_the_conversation_is_opened(
    session: Session, ana: User, bruno: User
) -> None:
    session_note_add(session_id=session.pk, user=bruno, text="@ana veja o CPF", now=timezone.now())
    client = client_of(ana)

    before = queue_json(client).json()["mentions"]
    client.get(f"/admin/conversations/session/{session.pk}/change/")
    after = queue_json(client).json()["mentions"]

    assert [(m["url"], m["text"]) for m in before] == [
        (
            f"/admin/conversations/session/{session.pk}/change/",
            f"bruno mencionou você numa nota da conversa #{session.pk}",
        )
    ]
    assert after == []
    assert queue_json(client_of(bruno)).json()["mentions"] == []


def test_the_queue_json_masks_the_customer_without_the_personal_data_permission(
    session: Session,
) -> None:
    reader = staff(None, "eva")
    for codename in ("view_session", "attend_session"):
        reader.user_permissions.add(
            Permission.objects.get(content_type__app_label="conversations", codename=codename)
        )

    answer = queue_json(client_of(reader)).json()

    assert answer["waiting"] == [{"id": session.pk, "customer": "M*** S*** (+*************)"}]
    assert "Maria Silva" not in answer["rows_html"]


@pytest.mark.parametrize("who", ["nobody", "carla"])
def test_the_queue_json_is_a_403_for_staff_who_may_not_attend(
    who: str, request: pytest.FixtureRequest
) -> None:
    response = queue_json(client_of(request.getfixturevalue(who)))

    assert response.status_code == 403


def test_the_queue_json_sends_anonymous_users_to_the_login_page() -> None:
    response = queue_json(Client())

    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/")


def test_a_superuser_gets_the_queue_json(session: Session, root: User) -> None:
    answer = queue_json(client_of(root)).json()

    assert [row["id"] for row in answer["waiting"]] == [session.pk]


def test_the_queue_page_offers_the_notification_opt_in(ana: User) -> None:
    page = client_of(ana).get(QUEUE).content.decode()

    assert "Avisar-me quando um cliente entrar na fila" in page
    assert 'data-title="Um cliente entrou na fila"' in page
    assert 'data-refresh-seconds="5" data-hidden-refresh-seconds="15"' in page


# Login session and user; the permissions (user's, groups'); the page's COUNT; the rows with
# the wait and the latest summary as annotations; the labels to filter by; the reader's unread
# mentions.
QUEUE_JSON_QUERIES = 8


@pytest.mark.parametrize("n_waiting", [1, 30])
def test_the_queue_json_costs_the_same_queries_whatever_the_number_of_rows(
    ana: User, n_waiting: int, django_assert_num_queries: Any
) -> None:
    instance = baker.make(Instance)
    for i in range(n_waiting):
        baker.make(
            Session,
            instance=instance,
            state="HUMAN",
            customer_name=f"Cliente {i}",
            handed_off_at=timezone.now() - timedelta(minutes=i),
        )
    client = client_of(ana)
    queue_json(client)  # warm the per-process caches (content types)

    with django_assert_num_queries(QUEUE_JSON_QUERIES):
        answer = queue_json(client).json()

    assert answer["count"] == n_waiting


def test_a_bot_option_naming_the_customer_is_masked_for_a_prompt_editor(
    session: Session, carla: User
) -> None:
    Message.objects.create(
        session=session,
        direction=Direction.OUTBOUND,
        message_type="interactive",
        content="Para quem é o orçamento?",
        interactive={
            "type": "button",
            "body": {"text": "Para quem é o orçamento?"},
            "action": {
                "buttons": [
                    {"type": "reply", "reply": {"id": "opt1", "title": "Maria Silva"}},
                    {"type": "reply", "reply": {"id": "opt2", "title": "Outra pessoa"}},
                ]
            },
        },
    )

    page = client_of(carla).get(page_url(session)).content.decode()

    assert '<li class="chip">Outra pessoa</li>' in page
    assert "Maria Silva" not in page
