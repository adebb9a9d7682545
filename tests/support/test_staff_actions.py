"""The staff actions on the conversation page over HTTP: who may, what each does, what each refuses,
and that a repeated submit changes nothing."""

import html
import logging
import re
from datetime import timedelta
from typing import Any
from uuid import uuid4

import pytest
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.auth.models import Group, User
from django.contrib.messages import get_messages
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from model_bakery import baker
from pytest_django import DjangoCaptureOnCommitCallbacks, Settings

from agents.states import SessionState
from conversations.event_codes import EventCode
from conversations.models import (
    DeliveryStatus,
    Direction,
    HandoffSummary,
    Instance,
    Message,
    MessageTemplate,
    Session,
)
from support.staff_actions import MAX_REPLY_CHARS
from tests.fakes.graph_server import FakeGraphAPI
from tests.helpers.conversation_rows import inbound
from tests.helpers.meta_payloads import signed_post

pytestmark = pytest.mark.django_db

PHONE_NUMBER_ID = "100000000000001"
CUSTOMER_PHONE = "5511987654321"
ACTIONS = (
    "take-over",
    "assign",
    "reply",
    "send-file",
    "send-template",
    "give-back",
    "close",
    "regenerate-summary",
    "prompts-update",
    "retry",
)


# --- Fixtures --------------------------------------------------------------------------------


def staff(group: str, username: str) -> User:
    user = baker.make(User, username=username, is_staff=True)
    user.groups.add(Group.objects.get(name=group))
    return user


def staff_admin() -> User:
    return User.objects.create_superuser("root", password="x")


def client_of(user: User, *, csrf: bool = False) -> Client:
    client = Client(enforce_csrf_checks=csrf)
    client.force_login(user)
    return client


@pytest.fixture
def support() -> User:
    return staff("Support", "ana")


@pytest.fixture
def colleague() -> User:
    return staff("Support", "bruno")


@pytest.fixture
def editor() -> User:
    return staff("Prompt editors", "carla")


@pytest.fixture
def session() -> Session:
    """A customer talking to the bot, who wrote an hour ago (the window is open)."""
    return baker.make(
        Session,
        instance=baker.make(Instance, phone_number_id=PHONE_NUMBER_ID, name="Lab", access_token=""),
        customer_phone=CUSTOMER_PHONE,
        customer_name="Maria Silva",
        state=SessionState.QUALIFYING.value,
        last_inbound_at=timezone.now() - timedelta(hours=1),
    )


def with_team(session: Session, user: User, **fields: Any) -> Session:
    """The session as a take-over by `user` leaves it."""
    values = {
        "state": SessionState.HUMAN.value,
        "handoff_reason": "staff_takeover",
        "state_before_handoff": SessionState.QUALIFYING.value,
        "handed_off_at": timezone.now(),
        "assigned_to": user,
        **fields,
    }
    Session.objects.filter(pk=session.pk).update(**values)
    session.refresh_from_db()
    return session


@pytest.fixture
def template() -> MessageTemplate:
    return MessageTemplate.objects.create(
        name="retomar_contato",
        language="pt_BR",
        body="Olá, {{1}}! Podemos continuar seu orçamento de {{2}}?",
        parameters=["Nome", "Serviço"],
    )


def url(session: Session, action: str) -> str:
    return f"/admin/conversations/session/{session.pk}/{action}/"


def page_url(session: Session) -> str:
    return f"/admin/conversations/session/{session.pk}/change/"


def flash(response: Any) -> list[tuple[str, str]]:
    """The messages waiting for the next page (a repeated POST's come after the first's)."""
    return [(m.level_tag, str(m)) for m in get_messages(response.wsgi_request)]


def text_of(page: str) -> str:
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", page)))


def events(session: Session) -> list[tuple[str, str, str | None]]:
    return [
        (m.message_type, m.action, m.staff_user.username if m.staff_user else None)
        for m in Message.objects.filter(session=session, direction=Direction.SYSTEM).order_by("id")
    ]


def log_entries(session: Session) -> list[tuple[str, int, str]]:
    return [
        (e.user.username, e.action_flag, e.change_message)
        for e in LogEntry.objects.filter(object_id=str(session.pk)).order_by("id")
    ]


def post(client: Client, session: Session, action: str, **data: Any) -> Any:
    return client.post(url(session, action), data)


def token() -> str:
    return str(uuid4())


def nothing_written(session: Session, *, state: str) -> None:
    session.refresh_from_db()
    assert session.state == state
    assert Message.objects.filter(session=session, staff_user__isnull=False).count() == 0
    assert LogEntry.objects.count() == 0


# --- Who may ---------------------------------------------------------------------------------


@pytest.mark.parametrize("action", ACTIONS)
def test_a_get_is_refused_with_405_and_does_nothing(
    action: str, session: Session, support: User
) -> None:
    response = client_of(support).get(url(session, action))

    assert response.status_code == 405
    nothing_written(session, state="QUALIFYING")


@pytest.mark.parametrize("action", ACTIONS)
def test_a_post_without_the_csrf_token_is_refused_with_403(
    action: str, session: Session, support: User
) -> None:
    response = client_of(support, csrf=True).post(url(session, action), {"text": "Oi"})

    assert response.status_code == 403
    nothing_written(session, state="QUALIFYING")


@pytest.mark.parametrize("action", ACTIONS)
def test_a_prompt_editor_is_refused_with_403_and_nothing_is_done(
    action: str, session: Session, editor: User, template: MessageTemplate
) -> None:
    data = {
        "text": "Oi",
        "user": "me",
        "state": "TRIAGE",
        "template": template.pk,
        "parameter": ["Maria", "água"],
        "form_token": token(),
    }
    response = client_of(editor).post(url(session, action), data)

    assert response.status_code == 403
    nothing_written(session, state="QUALIFYING")


def test_an_anonymous_post_goes_to_the_login_page(session: Session) -> None:
    response = Client().post(url(session, "take-over"))

    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/")
    nothing_written(session, state="QUALIFYING")


def test_an_unknown_session_is_404(support: User) -> None:
    response = client_of(support).post("/admin/conversations/session/999999/take-over/")

    assert response.status_code == 404


def test_a_superuser_may_act(session: Session, admin_user: User) -> None:
    response = post(client_of(admin_user), session, "take-over")

    assert response.status_code == 303
    session.refresh_from_db()
    assert (session.state, session.assigned_to) == ("HUMAN", admin_user)


# --- Take over -------------------------------------------------------------------------------


def test_take_over_hands_the_session_to_the_user_and_records_it(
    session: Session, support: User
) -> None:
    pending = inbound(session, "Quero falar com alguém")

    response = post(client_of(support), session, "take-over")

    assert response.status_code == 303
    assert response["Location"] == page_url(session) + "#staff-actions"
    assert flash(response) == [("success", "Você assumiu a conversa.")]
    session.refresh_from_db()
    assert (
        session.state,
        session.handoff_reason,
        session.state_before_handoff,
        session.assigned_to,
    ) == ("HUMAN", "staff_takeover", "QUALIFYING", support)
    assert events(session) == [("handoff", "staff_takeover", "ana")]
    assert log_entries(session) == [("ana", CHANGE, "Assumiu a conversa.")]
    pending.refresh_from_db()
    assert pending.processed_at is not None
    # No fixed text to the customer, no summary: staff are reading the conversation.
    assert Message.objects.filter(session=session, direction=Direction.OUTBOUND).count() == 0


def test_take_over_twice_changes_nothing_the_second_time(session: Session, support: User) -> None:
    client = client_of(support)
    post(client, session, "take-over")

    second = post(client, session, "take-over")

    assert second.status_code == 303
    assert flash(second)[-1:] == [("info", "Você já está atendendo esta conversa.")]
    assert events(session) == [("handoff", "staff_takeover", "ana")]
    assert len(log_entries(session)) == 1


@pytest.mark.parametrize(
    ("state", "label"), [("HUMAN", "Com humano"), ("CLOSED", "Encerrada")], ids=["human", "closed"]
)
def test_take_over_is_refused_when_the_bot_does_not_hold_the_session(
    session: Session, support: User, colleague: User, state: str, label: str
) -> None:
    Session.objects.filter(pk=session.pk).update(state=state, assigned_to=colleague)

    response = post(client_of(support), session, "take-over")

    assert flash(response) == [
        ("error", f"Só uma conversa com o robô pode ser assumida; esta está no estado {label}.")
    ]
    session.refresh_from_db()
    assert (session.state, session.assigned_to) == (state, colleague)
    assert events(session) == []
    assert log_entries(session) == []


# --- Assign ----------------------------------------------------------------------------------


def test_assign_to_a_colleague(session: Session, support: User, colleague: User) -> None:
    with_team(session, support)

    response = post(client_of(support), session, "assign", user=colleague.pk)

    assert flash(response) == [("success", "Atribuiu a conversa a bruno.")]
    session.refresh_from_db()
    assert session.assigned_to == colleague
    event = Message.objects.get(session=session, message_type=EventCode.STAFF_ASSIGNED)
    assert (event.direction, event.staff_user, event.json_part) == (
        Direction.SYSTEM,
        support,
        {"assignee_id": colleague.pk, "assignee": "bruno"},
    )
    assert log_entries(session) == [("ana", CHANGE, "Atribuiu a conversa a bruno.")]


def test_assign_to_me(session: Session, support: User, colleague: User) -> None:
    with_team(session, colleague)

    post(client_of(support), session, "assign", user="me")

    session.refresh_from_db()
    assert session.assigned_to == support


def test_assign_twice_changes_nothing_the_second_time(
    session: Session, support: User, colleague: User
) -> None:
    with_team(session, support)
    client = client_of(support)
    post(client, session, "assign", user=colleague.pk)

    second = post(client, session, "assign", user=colleague.pk)

    assert flash(second)[-1:] == [("info", "A conversa já está atribuída a bruno.")]
    assert (
        Message.objects.filter(session=session, message_type=EventCode.STAFF_ASSIGNED).count() == 1
    )
    assert len(log_entries(session)) == 1


@pytest.mark.parametrize(
    "who",
    ["prompt editor", "inactive", "not staff", "unknown", "text", "", "superscript", "too large"],
)
def test_assign_to_someone_who_may_not_attend_is_refused(
    session: Session, support: User, editor: User, who: str
) -> None:
    with_team(session, support)
    inactive = staff("Support", "inativo")
    User.objects.filter(pk=inactive.pk).update(is_active=False)
    outsider = baker.make(User, username="fora", is_staff=False)
    outsider.groups.add(Group.objects.get(name="Support"))
    value = {
        "prompt editor": editor.pk,
        "inactive": inactive.pk,
        "not staff": outsider.pk,
        "unknown": 999999,
        "text": "alguém",
        "": "",
        # isdigit() accepts it, int() refuses it.
        "superscript": "²",
        "too large": "9" * 30,
    }[who]

    response = post(client_of(support), session, "assign", user=value)

    assert flash(response) == [("error", "Escolha uma pessoa da equipe que atende conversas.")]
    session.refresh_from_db()
    assert session.assigned_to == support
    assert events(session) == []


def test_a_closed_session_is_not_assigned(session: Session, support: User, colleague: User) -> None:
    Session.objects.filter(pk=session.pk).update(state="CLOSED")

    response = post(client_of(support), session, "assign", user=colleague.pk)

    assert flash(response) == [("error", "Esta conversa está encerrada.")]
    session.refresh_from_db()
    assert session.assigned_to is None


# --- Reply -----------------------------------------------------------------------------------


def test_reply_is_sent_through_the_graph_api_and_shown_with_its_author(
    session: Session,
    support: User,
    fake_graph: FakeGraphAPI,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    with_team(session, support)
    client = client_of(support)

    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        response = post(
            client, session, "reply", text="  Olá, Maria! Sou a Ana.  ", form_token=token()
        )

    assert flash(response) == [("success", "Resposta enviada ao WhatsApp.")]
    assert len(callbacks) == 1
    reply = Message.objects.get(session=session, direction=Direction.OUTBOUND)
    assert (reply.content, reply.staff_user, reply.message_type, reply.turn_id) == (
        "Olá, Maria! Sou a Ana.",
        support,
        "text",
        None,
    )
    assert (reply.delivery_status, reply.wa_message_id) == (DeliveryStatus.SENT, "wamid.FAKE0001")
    [send] = fake_graph.sends
    assert send.json["to"] == CUSTOMER_PHONE
    assert send.json["text"] == {"body": "Olá, Maria! Sou a Ana."}
    session.refresh_from_db()
    assert session.last_staff_reply_at == reply.created_at
    assert log_entries(session) == [("ana", CHANGE, "Respondeu ao cliente.")]
    page = text_of(client.get(page_url(session)).content.decode())
    assert "Equipe · ana Olá, Maria! Sou a Ana." in page
    assert "enviada" in page


def test_without_a_whatsapp_token_the_reply_says_simulated_wherever_it_is_shown(
    session: Session,
    support: User,
    settings: Settings,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The `make run` default: neither the instance's token nor WHATSAPP_ACCESS_TOKEN."""
    settings.WHATSAPP_ACCESS_TOKEN = ""
    with_team(session, support)
    client = client_of(support)

    with (
        caplog.at_level(logging.INFO),
        django_capture_on_commit_callbacks(execute=True),
    ):
        response = post(client, session, "reply", text="Olá, Maria!", form_token=token())

    assert flash(response) == [
        ("success", "Resposta simulada (sem token do WhatsApp): nada foi enviado ao cliente.")
    ]
    page = client.get(page_url(session)).content.decode()
    assert "Equipe · ana Olá, Maria!" in text_of(page)
    assert re.findall(r'<span class="delivery">([^<]*?) \d\d:\d\d</span>', page) == [
        "simulada (sem token do WhatsApp)"
    ]
    log = text_of(client_of(staff_admin()).get("/admin/conversations/message/").content.decode())
    assert "simulada (sem token do WhatsApp)" in log
    records = {r.getMessage(): r for r in caplog.records}
    assert records["staff_reply"].dry_run == "no_access_token"  # type: ignore[attr-defined]
    assert records["whatsapp_send_simulated"].reason == "no_access_token"  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("simulated_session", "wamid", "shown"),
    [
        (False, "sim.8f0c", "simulada (sem token do WhatsApp)"),
        (True, "sim.8f0c", "simulada (conversa do simulador)"),
        (False, "wamid.HBgM", "enviada"),
    ],
)
def test_a_message_s_delivery_reads_as_simulated_only_when_the_dry_run_stored_it(
    session: Session, support: User, simulated_session: bool, wamid: str, shown: str
) -> None:
    Session.objects.filter(pk=session.pk).update(is_simulated=simulated_session)
    baker.make(
        Message,
        session=session,
        direction=Direction.OUTBOUND,
        content="Olá!",
        wa_message_id=wamid,
        delivery_status=DeliveryStatus.SENT,
        delivery_status_at=timezone.now(),
    )

    page = client_of(support).get(page_url(session)).content.decode()

    assert re.findall(r'<span class="delivery">([^<]*?) \d\d:\d\d</span>', page) == [shown]


def test_without_a_whatsapp_token_a_template_says_simulated(
    session: Session,
    support: User,
    template: MessageTemplate,
    settings: Settings,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    settings.WHATSAPP_ACCESS_TOKEN = ""
    with_team(session, support)

    with django_capture_on_commit_callbacks(execute=True):
        response = post(
            client_of(support),
            session,
            "send-template",
            template=template.pk,
            parameter=["Maria", "água"],
            form_token=token(),
        )

    assert flash(response) == [
        (
            "success",
            "Modelo de mensagem simulado (sem token do WhatsApp): nada foi enviado ao cliente.",
        )
    ]


def test_the_same_reply_form_posted_twice_sends_once(
    session: Session,
    support: User,
    fake_graph: FakeGraphAPI,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    with_team(session, support)
    client = client_of(support)
    form = {"text": "Um momento, por favor.", "form_token": token()}

    with django_capture_on_commit_callbacks(execute=True):
        post(client, session, "reply", **form)
        second = post(client, session, "reply", **form)

    assert flash(second)[-1:] == [("info", "Esta resposta já foi enviada.")]
    assert Message.objects.filter(session=session, direction=Direction.OUTBOUND).count() == 1
    assert len(fake_graph.sends) == 1
    assert len(log_entries(session)) == 1


def test_reply_outside_the_24_hour_window_is_refused_offering_the_templates(
    session: Session, support: User, template: MessageTemplate
) -> None:
    MessageTemplate.objects.create(name="inativo", parameters=[], is_active=False)
    MessageTemplate.objects.create(name="boas_vindas", parameters=[])
    with_team(session, support, last_inbound_at=timezone.now() - timedelta(hours=24, seconds=1))

    response = post(client_of(support), session, "reply", text="Oi?", form_token=token())

    assert flash(response) == [
        (
            "error",
            "A janela de 24 horas do WhatsApp está fechada: o cliente escreveu pela última vez "
            "há mais de 24 horas. Envie um modelo de mensagem do WhatsApp aprovado: boas_vindas, "
            "retomar_contato.",
        )
    ]
    assert Message.objects.filter(session=session, direction=Direction.OUTBOUND).count() == 0
    session.refresh_from_db()
    assert session.last_staff_reply_at is None


def test_reply_to_a_customer_who_never_wrote_is_refused(session: Session, support: User) -> None:
    with_team(session, support, last_inbound_at=None)

    response = post(client_of(support), session, "reply", text="Oi?", form_token=token())

    assert flash(response)[0][0] == "error"
    assert Message.objects.filter(session=session, direction=Direction.OUTBOUND).count() == 0


def test_reply_while_the_bot_holds_the_session_is_refused(session: Session, support: User) -> None:
    response = post(client_of(support), session, "reply", text="Oi", form_token=token())

    assert flash(response) == [
        ("error", "Assuma a conversa primeiro: ela não está com a equipe agora.")
    ]
    nothing_written(session, state="QUALIFYING")


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("", "Escreva a resposta antes de enviar."),
        ("   \n ", "Escreva a resposta antes de enviar."),
        (
            "x" * (MAX_REPLY_CHARS + 1),
            "A resposta tem 4097 caracteres; o WhatsApp aceita no máximo 4096.",
        ),
    ],
    ids=["empty", "blank", "too long"],
)
def test_an_empty_or_too_long_reply_is_refused(
    session: Session, support: User, text: str, error: str
) -> None:
    with_team(session, support)

    response = post(client_of(support), session, "reply", text=text, form_token=token())

    assert flash(response) == [("error", error)]
    assert Message.objects.filter(session=session, direction=Direction.OUTBOUND).count() == 0


def test_a_reply_of_exactly_the_limit_is_accepted(
    session: Session,
    support: User,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    with_team(session, support)

    with django_capture_on_commit_callbacks(execute=False):
        post(client_of(support), session, "reply", text="x" * MAX_REPLY_CHARS, form_token=token())

    assert len(Message.objects.get(session=session, direction=Direction.OUTBOUND).content) == 4096


@pytest.mark.parametrize("text", ["\x00", "Olá\x00, Maria"])
def test_a_reply_with_a_nul_is_refused_with_a_message(
    session: Session, support: User, text: str
) -> None:
    with_team(session, support)

    response = post(client_of(support), session, "reply", text=text, form_token=token())

    assert response.status_code == 303
    assert flash(response) == [
        ("error", "O texto tem um caractere inválido (NUL). Apague-o e envie de novo.")
    ]
    assert Message.objects.filter(session=session, direction=Direction.OUTBOUND).count() == 0
    assert LogEntry.objects.count() == 0


@pytest.mark.parametrize("form_token", ["", "not-a-uuid"])
def test_a_reply_without_the_form_token_is_refused(
    session: Session, support: User, form_token: str
) -> None:
    with_team(session, support)

    response = post(client_of(support), session, "reply", text="Oi", form_token=form_token)

    assert flash(response) == [
        ("error", "Este formulário expirou. Recarregue a página e tente de novo.")
    ]
    assert Message.objects.filter(session=session, direction=Direction.OUTBOUND).count() == 0


# --- Send a template -------------------------------------------------------------------------


def test_a_template_is_sent_outside_the_window_with_its_parameters(
    session: Session,
    support: User,
    template: MessageTemplate,
    fake_graph: FakeGraphAPI,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    with_team(session, support, last_inbound_at=timezone.now() - timedelta(days=3))

    with django_capture_on_commit_callbacks(execute=True):
        response = post(
            client_of(support),
            session,
            "send-template",
            template=template.pk,
            parameter=["Maria", "análise de água"],
            form_token=token(),
        )

    assert flash(response) == [("success", "Modelo de mensagem enviado ao WhatsApp.")]
    sent = Message.objects.get(session=session, direction=Direction.OUTBOUND)
    assert (sent.message_type, sent.content, sent.staff_user, sent.delivery_status) == (
        "template",
        "Olá, Maria! Podemos continuar seu orçamento de análise de água?",
        support,
        DeliveryStatus.SENT,
    )
    [send] = fake_graph.sends
    assert send.json["type"] == "template"
    assert send.json["template"] == {
        "name": "retomar_contato",
        "language": {"code": "pt_BR"},
        "components": [
            {
                "type": "body",
                "parameters": [
                    {"type": "text", "text": "Maria"},
                    {"type": "text", "text": "análise de água"},
                ],
            }
        ],
    }
    session.refresh_from_db()
    assert session.last_staff_reply_at == sent.created_at
    assert log_entries(session) == [
        ("ana", CHANGE, "Enviou o modelo de mensagem do WhatsApp retomar_contato.")
    ]


def test_the_same_template_form_posted_twice_sends_once(
    session: Session,
    support: User,
    template: MessageTemplate,
    fake_graph: FakeGraphAPI,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    with_team(session, support)
    client = client_of(support)
    form = {"template": template.pk, "parameter": ["Maria", "água"], "form_token": token()}

    with django_capture_on_commit_callbacks(execute=True):
        post(client, session, "send-template", **form)
        second = post(client, session, "send-template", **form)

    assert flash(second)[-1:] == [("info", "Este modelo de mensagem já foi enviado.")]
    assert len(fake_graph.sends) == 1


@pytest.mark.parametrize(
    ("parameters", "error"),
    [
        (["Maria"], "Preencha todos os parâmetros do modelo de mensagem: Nome, Serviço."),
        (["Maria", " "], "Preencha todos os parâmetros do modelo de mensagem: Nome, Serviço."),
        (
            ["Maria", "água", "extra"],
            "Preencha todos os parâmetros do modelo de mensagem: Nome, Serviço.",
        ),
        (
            ["Maria", "água\npotável"],
            "O parâmetro Serviço deve ter uma só linha de no máximo 1024 caracteres.",
        ),
        (
            ["M" * 1025, "água"],
            "O parâmetro Nome deve ter uma só linha de no máximo 1024 caracteres.",
        ),
    ],
    ids=["missing", "blank", "extra", "line break", "too long"],
)
def test_a_template_with_wrong_parameters_is_refused(
    session: Session, support: User, template: MessageTemplate, parameters: list[str], error: str
) -> None:
    with_team(session, support)

    response = post(
        client_of(support),
        session,
        "send-template",
        template=template.pk,
        parameter=parameters,
        form_token=token(),
    )

    assert flash(response) == [("error", error)]
    assert Message.objects.filter(session=session, direction=Direction.OUTBOUND).count() == 0


def test_a_template_parameter_with_a_nul_is_refused_with_a_message(
    session: Session, support: User, template: MessageTemplate
) -> None:
    with_team(session, support)

    response = post(
        client_of(support),
        session,
        "send-template",
        template=template.pk,
        parameter=["Maria\x00", "água"],
        form_token=token(),
    )

    assert flash(response) == [
        ("error", "O texto tem um caractere inválido (NUL). Apague-o e envie de novo.")
    ]
    assert Message.objects.filter(session=session, direction=Direction.OUTBOUND).count() == 0


@pytest.mark.parametrize("which", ["inactive", "unknown", "text", "superscript", "too large"])
def test_an_inactive_or_unknown_template_is_refused(
    session: Session, support: User, template: MessageTemplate, which: str
) -> None:
    with_team(session, support)
    MessageTemplate.objects.filter(pk=template.pk).update(is_active=False)
    value = {
        "inactive": template.pk,
        "unknown": 999999,
        "text": "x",
        "superscript": "²",
        "too large": "9" * 30,
    }[which]

    response = post(
        client_of(support),
        session,
        "send-template",
        template=value,
        parameter=["Maria", "água"],
        form_token=token(),
    )

    assert flash(response) == [("error", "Escolha um dos modelos de mensagem do WhatsApp ativos.")]
    assert Message.objects.filter(session=session, direction=Direction.OUTBOUND).count() == 0


def test_a_template_while_the_bot_holds_the_session_is_refused(
    session: Session, support: User, template: MessageTemplate
) -> None:
    response = post(
        client_of(support),
        session,
        "send-template",
        template=template.pk,
        parameter=["Maria", "água"],
        form_token=token(),
    )

    assert flash(response) == [
        ("error", "Assuma a conversa primeiro: ela não está com a equipe agora.")
    ]
    nothing_written(session, state="QUALIFYING")


# --- Give back -------------------------------------------------------------------------------


def test_give_back_returns_to_the_state_before_the_handoff_by_default(
    session: Session, support: User
) -> None:
    with_team(session, support, handoff_detail="cliente pediu")

    response = post(client_of(support), session, "give-back")

    assert flash(response) == [("success", "Devolveu a conversa ao robô (Qualificação).")]
    session.refresh_from_db()
    assert (
        session.state,
        session.assigned_to,
        session.state_before_handoff,
        session.handoff_reason,
        session.handoff_detail,
        session.handed_off_at,
    ) == ("QUALIFYING", None, "", "", "", None)
    event = Message.objects.get(session=session, message_type=EventCode.STAFF_GIVEN_BACK)
    assert (event.direction, event.staff_user, event.json_part) == (
        Direction.SYSTEM,
        support,
        {"state": "QUALIFYING"},
    )
    assert log_entries(session) == [("ana", CHANGE, "Devolveu a conversa ao robô (Qualificação).")]


def test_give_back_at_a_chosen_state(session: Session, support: User) -> None:
    with_team(session, support)

    post(client_of(support), session, "give-back", state="TRIAGE")

    session.refresh_from_db()
    assert session.state == "TRIAGE"


def test_give_back_without_a_state_before_goes_to_triage(session: Session, support: User) -> None:
    with_team(session, support, state_before_handoff="")

    post(client_of(support), session, "give-back")

    session.refresh_from_db()
    assert session.state == "TRIAGE"


@pytest.mark.parametrize("state", ["HUMAN", "CLOSED", "nonsense"])
def test_give_back_to_a_state_that_is_not_the_bots_is_refused(
    session: Session, support: User, state: str
) -> None:
    with_team(session, support)

    response = post(client_of(support), session, "give-back", state=state)

    assert flash(response) == [("error", "Escolha um dos estados do robô.")]
    session.refresh_from_db()
    assert (session.state, session.assigned_to) == ("HUMAN", support)
    assert events(session) == []


def test_give_back_twice_changes_nothing_the_second_time(session: Session, support: User) -> None:
    with_team(session, support)
    client = client_of(support)
    post(client, session, "give-back")

    second = post(client, session, "give-back", state="TRIAGE")

    assert flash(second)[-1:] == [("error", "Esta conversa não está com a equipe agora.")]
    session.refresh_from_db()
    assert session.state == "QUALIFYING"
    assert (
        Message.objects.filter(session=session, message_type=EventCode.STAFF_GIVEN_BACK).count()
        == 1
    )


# --- Close -----------------------------------------------------------------------------------


def test_close_and_the_next_customer_message_opens_a_new_session(
    session: Session, support: User
) -> None:
    with_team(session, support)
    pending = inbound(session, "obrigada")

    response = post(client_of(support), session, "close")

    assert flash(response) == [("success", "Conversa encerrada.")]
    session.refresh_from_db()
    assert session.state == "CLOSED"
    assert session.closed_at is not None
    pending.refresh_from_db()
    assert pending.processed_at is not None
    assert events(session) == [(EventCode.STAFF_CLOSED.value, "", "ana")]
    assert Message.objects.get(message_type=EventCode.STAFF_CLOSED).json_part == {
        "from_state": "HUMAN"
    }
    assert log_entries(session) == [("ana", CHANGE, "Encerrou a conversa.")]

    from tests.helpers.meta_payloads import fixture_bytes

    assert signed_post(Client(), fixture_bytes("text")).status_code == 200

    newer = Session.objects.exclude(pk=session.pk).get()
    assert (newer.customer_phone, newer.state) == (CUSTOMER_PHONE, "TRIAGE")
    assert list(newer.messages.values_list("content", flat=True)) == [
        "Olá, gostaria de um orçamento de análise de água."
    ]
    assert Message.objects.filter(session=session).count() == 2


def test_close_twice_changes_nothing_the_second_time(session: Session, support: User) -> None:
    client = client_of(support)
    post(client, session, "close")
    closed_at = Session.objects.get(pk=session.pk).closed_at

    second = post(client, session, "close")

    assert flash(second)[-1:] == [("info", "Esta conversa já está encerrada.")]
    assert Session.objects.get(pk=session.pk).closed_at == closed_at
    assert Message.objects.filter(session=session, message_type=EventCode.STAFF_CLOSED).count() == 1


# --- Regenerate the summary ------------------------------------------------------------------


def test_regenerate_summary_enqueues_the_summary_task_after_commit(
    session: Session,
    support: User,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    with_team(session, support)
    form_token = token()

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = post(client_of(support), session, "regenerate-summary", form_token=form_token)

    assert flash(response) == [("success", "Novo resumo pedido; recarregue a página em instantes.")]
    assert [c.__qualname__ for c in callbacks] == [f"_summary_later({session.pk})"]
    event = Message.objects.get(session=session, message_type=EventCode.STAFF_SUMMARY_REQUESTED)
    assert (event.staff_user, event.json_part) == (support, {"form_token": form_token})


def test_regenerate_summary_posted_twice_enqueues_once(
    session: Session,
    support: User,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    with_team(session, support)
    client = client_of(support)
    form_token = token()

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        post(client, session, "regenerate-summary", form_token=form_token)
        second = post(client, session, "regenerate-summary", form_token=form_token)

    assert flash(second)[-1:] == [("info", "Um novo resumo já foi pedido.")]
    assert len(callbacks) == 1


def test_ten_clicks_on_new_summary_make_one_request_while_it_is_in_flight(
    session: Session,
    support: User,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    with_team(session, support)
    client = client_of(support)

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        responses = [
            post(client, session, "regenerate-summary", form_token=token()) for _ in "x" * 10
        ]

    assert len(callbacks) == 1
    assert flash(responses[-1])[-1:] == [
        ("info", "Um resumo já está sendo gerado; recarregue a página em instantes.")
    ]
    assert (
        Message.objects.filter(session=session, message_type=EventCode.STAFF_SUMMARY_REQUESTED)
    ).count() == 1
    assert len(log_entries(session)) == 1


def test_a_new_summary_may_be_requested_once_the_last_one_is_written(
    session: Session,
    support: User,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    with_team(session, support)
    client = client_of(support)

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        post(client, session, "regenerate-summary", form_token=token())
        baker.make(HandoffSummary, session=session, created_at=timezone.now())
        second = post(client, session, "regenerate-summary", form_token=token())

    assert flash(second)[-1:] == [
        ("success", "Novo resumo pedido; recarregue a página em instantes.")
    ]
    assert len(callbacks) == 2


@pytest.mark.parametrize(("age", "requested_again"), [(149, False), (150, True), (151, True)])
def test_a_request_whose_summary_never_came_expires_at_the_task_time_limit(
    session: Session,
    support: User,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
    age: int,
    requested_again: bool,
) -> None:
    """CELERY_TASK_TIME_LIMIT is 150 s: a request older than that lost its task."""
    with_team(session, support)
    client = client_of(support)
    with django_capture_on_commit_callbacks(execute=False):
        post(client, session, "regenerate-summary", form_token=token())
    Message.objects.filter(message_type=EventCode.STAFF_SUMMARY_REQUESTED).update(
        created_at=timezone.now() - timedelta(seconds=age)
    )

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        post(client, session, "regenerate-summary", form_token=token())

    assert len(callbacks) == (1 if requested_again else 0)


def test_each_form_has_its_own_token_kind(
    session: Session,
    support: User,
    template: MessageTemplate,
    fake_graph: FakeGraphAPI,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    """The page renders one token for its forms: a reply sent with it blocks neither the
    template nor the summary posted with it."""
    with_team(session, support)
    client = client_of(support)
    form_token = token()

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        reply = post(client, session, "reply", text="Oi, Maria", form_token=form_token)
        sent = post(
            client,
            session,
            "send-template",
            template=template.pk,
            parameter=["Maria", "água"],
            form_token=form_token,
        )
        summary = post(client, session, "regenerate-summary", form_token=form_token)

    assert [flash(r)[-1] for r in (reply, sent, summary)] == [
        ("success", "Resposta enviada ao WhatsApp."),
        ("success", "Modelo de mensagem enviado ao WhatsApp."),
        ("success", "Novo resumo pedido; recarregue a página em instantes."),
    ]
    assert len(callbacks) == 3


def test_regenerate_summary_of_a_bot_conversation_is_refused(
    session: Session,
    support: User,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = post(client_of(support), session, "regenerate-summary", form_token=token())

    assert flash(response) == [
        ("error", "Assuma a conversa primeiro: ela não está com a equipe agora.")
    ]
    assert callbacks == []
    nothing_written(session, state="QUALIFYING")


# --- The page --------------------------------------------------------------------------------

BUTTON_RE = re.compile(r'id="(action-[a-z-]+?)(?:-\d+)?"')


def buttons(page: str) -> list[str]:
    return BUTTON_RE.findall(page)


def test_support_sees_take_over_on_a_bot_conversation(session: Session, support: User) -> None:
    page = client_of(support).get(page_url(session)).content.decode()

    assert buttons(page) == [
        "action-take-over",
        "action-prompts-update",
        "action-close",
        "action-assign",
    ]
    assert 'id="reply-form"' not in page


def test_the_action_forms_are_not_nested_in_the_admins_form(
    session: Session, support: User
) -> None:
    # A browser drops a <form> nested in another: its button would submit the admin's form.
    page = client_of(support).get(page_url(session)).content.decode()

    before = page[: page.index('<form method="post" action="' + url(session, "take-over"))]
    assert before.count("<form") == before.count("</form>")
    assert 'form="staff-take-over"' in page


def test_support_sees_the_reply_box_and_templates_with_the_team(
    session: Session, support: User, template: MessageTemplate
) -> None:
    with_team(session, support)

    page = client_of(support).get(page_url(session)).content.decode()

    assert buttons(page) == [
        "action-give-back",
        "action-regenerate-summary",
        "action-prompts-update",
        "action-close",
        "action-reply",
        "action-send-template",
        "action-assign",
    ]
    assert session.last_inbound_at is not None
    closes = timezone.localtime(session.last_inbound_at + timedelta(hours=24))
    same_day = closes.date() == timezone.localtime().date()
    when = closes.strftime("%H:%M" if same_day else "%d/%m/%Y %H:%M")
    assert f"janela aberta até {when}" in text_of(page)
    assert "Atribuída a ana" in text_of(page)
    assert 'name="form_token"' in page


def test_the_template_picker_replaces_the_reply_box_when_the_window_is_closed(
    session: Session, support: User
) -> None:
    with_team(session, support, last_inbound_at=timezone.now() - timedelta(days=2))

    page = client_of(support).get(page_url(session)).content.decode()

    assert "janela fechada: use um modelo de mensagem do WhatsApp" in text_of(page)
    assert 'id="template-picker"' in page
    # The composer stays for internal notes; its reply button cannot send.
    assert re.search(r'<button [^>]*id="action-reply"[^>]* disabled>', page)


def test_a_closed_conversation_has_no_action_buttons(session: Session, support: User) -> None:
    Session.objects.filter(pk=session.pk).update(state="CLOSED")

    page = client_of(support).get(page_url(session)).content.decode()

    assert buttons(page) == []
    assert 'id="staff-actions"' in page


def test_a_prompt_editor_sees_no_staff_actions(session: Session, editor: User) -> None:
    with_team(session, baker.make(User, username="x", is_staff=True))

    page = client_of(editor).get(page_url(session)).content.decode()

    assert buttons(page) == []
    assert 'id="staff-actions"' not in page


def test_staff_events_read_in_portuguese_in_the_transcript(
    session: Session, support: User, colleague: User
) -> None:
    with_team(session, support)
    client = client_of(support)
    post(client, session, "assign", user=colleague.pk)
    post(client, session, "give-back")

    page = text_of(client.get(page_url(session)).content.decode())

    assert "Ana atribuiu a conversa a bruno." in page
    assert "Ana devolveu a conversa ao robô (Qualificação)." in page


# --- The template admin ----------------------------------------------------------------------


def test_support_reads_templates_but_may_not_add_or_change_them(
    support: User, template: MessageTemplate
) -> None:
    client = client_of(support)
    change = f"/admin/conversations/messagetemplate/{template.pk}/change/"

    assert client.get("/admin/conversations/messagetemplate/").status_code == 200
    assert client.get("/admin/conversations/messagetemplate/add/").status_code == 403
    assert client.post(change, {"name": "outro", "language": "pt_BR"}).status_code == 403
    template.refresh_from_db()
    assert template.name == "retomar_contato"


def test_a_prompt_editor_cannot_read_templates(editor: User) -> None:
    assert client_of(editor).get("/admin/conversations/messagetemplate/").status_code == 403


def test_a_superuser_adds_a_template_with_one_label_per_parameter(admin_user: User) -> None:
    response = client_of(admin_user).post(
        "/admin/conversations/messagetemplate/add/",
        {
            "name": "confirmar_coleta",
            "language": "pt_BR",
            "body": "Olá, {{1}}! A coleta é em {{2}}.",
            "parameters": '["Nome", "Data"]',
            "is_active": "on",
        },
    )

    assert response.status_code == 302
    added = MessageTemplate.objects.get(name="confirmar_coleta")
    assert added.parameters == ["Nome", "Data"]


def test_a_template_whose_labels_do_not_match_its_body_is_refused(admin_user: User) -> None:
    response = client_of(admin_user).post(
        "/admin/conversations/messagetemplate/add/",
        {
            "name": "confirmar_coleta",
            "language": "pt_BR",
            "body": "Olá, {{1}}! A coleta é em {{2}}.",
            "parameters": '["Nome"]',
        },
    )

    assert response.status_code == 200
    assert "O texto tem 2 parâmetros; informe um rótulo para cada um." in text_of(
        response.content.decode()
    )
    assert MessageTemplate.objects.count() == 0


def test_the_panel_costs_the_same_queries_whatever_the_templates_and_colleagues(
    session: Session, support: User
) -> None:
    with_team(session, support)
    client = client_of(support)

    def page_queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert client.get(page_url(session)).status_code == 200
        return len(captured)

    client.get(page_url(session))  # warm the per-process caches (content types)
    few = page_queries()
    for n in range(5):
        MessageTemplate.objects.create(name=f"modelo_{n}", body="Olá, {{1}}!", parameters=["Nome"])
        staff("Support", f"colega{n}")

    assert page_queries() == few
