"""The satisfaction question after the attendance, end to end: staff close a conversation on the
admin page, the question goes to the fake Graph API as reply buttons or a list, the customer's tap
comes back through the signed webhook and is stored on the survey — no session opened, no turn,
nothing sent back. The 24-hour window and the 7 days to answer at their boundaries; simulated
conversations, a second close and the lead option."""

import copy
import html
import re
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.contrib.messages import get_messages
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from pytest_django import DjangoCaptureOnCommitCallbacks, Settings

from agents.states import SessionState
from conversations.models import (
    DeliveryStatus,
    Direction,
    Message,
    SatisfactionSurvey,
    Session,
)
from conversations.satisfaction import ANSWER_DAYS
from prompts_admin.models import RuntimeConfig
from support.staff_actions import session_close
from tests import baker_recipes as recipes
from tests.baker_recipes import CUSTOMER_PHONE, CUSTOMER_USER_ID, PHONE_NUMBER_ID
from tests.fakes.graph_server import FakeGraphAPI
from tests.helpers.meta_payloads import encode, load_fixture, signed_post
from tests.helpers.staff import SUPPORT, logged_in, staff_member
from whatsapp import CUSTOMER_SERVICE_WINDOW

pytestmark = pytest.mark.django_db

BUTTONS = {
    "type": "button",
    "body": {"text": "Como você avalia o atendimento?"},
    "action": {
        "buttons": [
            {"type": "reply", "reply": {"id": "csat:5", "title": "Ótimo"}},
            {"type": "reply", "reply": {"id": "csat:3", "title": "Regular"}},
            {"type": "reply", "reply": {"id": "csat:1", "title": "Ruim"}},
        ]
    },
}
LIST = {
    "type": "list",
    "body": {"text": "De 1 a 5, como foi o nosso atendimento?"},
    "action": {
        "button": "Avaliar",
        "sections": [
            {
                "rows": [
                    {"id": "csat:5", "title": "5 - Excelente"},
                    {"id": "csat:4", "title": "4 - Bom"},
                    {"id": "csat:3", "title": "3 - Regular"},
                    {"id": "csat:2", "title": "2 - Ruim"},
                    {"id": "csat:1", "title": "1 - Péssimo"},
                ]
            }
        ],
    },
}


def survey_on(**fields: Any) -> RuntimeConfig:
    config = RuntimeConfig.load()
    config.satisfaction_after_close = True
    for name, value in fields.items():
        setattr(config, name, value)
    config.save()
    return config


@pytest.fixture
def ana() -> User:
    return staff_member(SUPPORT)


@pytest.fixture
def session(ana: User) -> Session:
    """Maria, with the team since a complaint, who wrote an hour ago (the window is open)."""
    now = timezone.now()
    return recipes.known_customer.make(
        instance=recipes.instance.make(),
        state=SessionState.HUMAN.value,
        handoff_reason="model_requested",
        handoff_detail="reclamacao",
        handed_off_at=now - timedelta(hours=1),
        assigned_to=ana,
        last_inbound_at=now - timedelta(hours=1),
        last_message_at=now - timedelta(hours=1),
    )


def close(client: Client, session: Session) -> Any:
    return client.post(f"/admin/conversations/session/{session.pk}/close/")


def flash(response: Any) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


def tap(reply_id: str, title: str, *, at: datetime, wamid: str = "wamid.CSAT01") -> bytes:
    """The customer's tap on a button of the question, as Meta delivers it."""
    document = copy.deepcopy(load_fixture("interactive_button_reply"))
    [message] = document["entry"][0]["changes"][0]["value"]["messages"]
    message["id"] = wamid
    message["timestamp"] = str(int(at.timestamp()))
    message["interactive"]["button_reply"] = {"id": reply_id, "title": title}
    message["context"]["id"] = "wamid.FAKE0001"
    return encode(document)


def answer(
    body: bytes, capture: DjangoCaptureOnCommitCallbacks, *, execute: bool = True
) -> tuple[int, list[Any]]:
    """Post the tap to the real webhook; its status and the work it left for after the commit
    (run unless `execute` is False: a turn would call the model)."""
    with capture(execute=execute) as callbacks:
        response = signed_post(Client(), body)
    return response.status_code, list(callbacks)


# --- Asked when staff close --------------------------------------------------------------------


def test_closing_sends_the_question_as_three_reply_buttons(
    session: Session,
    ana: User,
    fake_graph: FakeGraphAPI,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    survey_on()

    with django_capture_on_commit_callbacks(execute=True):
        response = close(logged_in(ana), session)

    assert flash(response) == [
        "Conversa encerrada. A pergunta de satisfação foi enviada ao cliente."
    ]
    question = Message.objects.get(session=session, direction=Direction.OUTBOUND)
    [send] = fake_graph.sends
    assert send.json == {
        "messaging_product": "whatsapp",
        "recipient_type": "individual",
        "to": CUSTOMER_PHONE,
        "type": "interactive",
        "interactive": BUTTONS,
        "biz_opaque_callback_data": f"message:{question.pk}",
    }
    assert (
        question.message_type,
        question.content,
        question.action,
        question.interactive,
        question.delivery_status,
        question.wa_message_id,
    ) == (
        "interactive",
        "Como você avalia o atendimento?",
        "satisfaction_survey",
        BUTTONS,
        DeliveryStatus.SENT,
        "wamid.FAKE0001",
    )
    survey = SatisfactionSurvey.objects.get()
    session.refresh_from_db()
    assert (
        survey.session,
        survey.trigger,
        survey.style,
        survey.not_sent,
        survey.question,
        survey.closed_by,
        survey.handoff_reason,
        survey.asked_at,
        survey.score,
        survey.answered_at,
    ) == (
        session,
        "staff_close",
        "buttons",
        "",
        question,
        ana,
        "model_requested",
        session.closed_at,
        None,
        None,
    )
    assert session.state == "CLOSED"


def test_the_list_style_sends_five_rows_with_the_configured_text(
    session: Session,
    ana: User,
    fake_graph: FakeGraphAPI,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    survey_on(
        satisfaction_style="list",
        satisfaction_question="De 1 a 5, como foi o nosso atendimento?",
    )

    with django_capture_on_commit_callbacks(execute=True):
        close(logged_in(ana), session)

    [send] = fake_graph.sends
    assert (send.json["type"], send.json["interactive"]) == ("interactive", LIST)
    assert SatisfactionSurvey.objects.get().style == "list"


def test_with_the_survey_off_closing_sends_nothing_and_records_no_survey(
    session: Session,
    ana: User,
    fake_graph: FakeGraphAPI,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    RuntimeConfig.load()  # the defaults: off

    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        response = close(logged_in(ana), session)

    assert flash(response) == ["Conversa encerrada."]
    assert (callbacks, fake_graph.sends, SatisfactionSurvey.objects.count()) == ([], [], 0)
    assert not Message.objects.filter(direction=Direction.OUTBOUND).exists()


def test_without_a_whatsapp_token_the_close_says_the_question_was_simulated(
    session: Session,
    ana: User,
    settings: Settings,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    """The `make run` default: neither the instance's token nor WHATSAPP_ACCESS_TOKEN."""
    settings.WHATSAPP_ACCESS_TOKEN = ""
    survey_on()

    with django_capture_on_commit_callbacks(execute=True):
        response = close(logged_in(ana), session)

    assert flash(response) == [
        "Conversa encerrada. A pergunta de satisfação foi simulada (sem token do WhatsApp): "
        "nada foi enviado ao cliente."
    ]
    question = Message.objects.get(action="satisfaction_survey")
    assert str(question.wa_message_id).startswith("sim.")


# --- The 24-hour window --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("since_inbound", "asked"),
    [
        (CUSTOMER_SERVICE_WINDOW - timedelta(microseconds=1), True),
        (CUSTOMER_SERVICE_WINDOW, False),
        (CUSTOMER_SERVICE_WINDOW + timedelta(microseconds=1), False),
    ],
    ids=["1 µs before the window closes", "as it closes", "1 µs after"],
)
def test_the_question_is_sent_only_inside_the_window(
    session: Session,
    ana: User,
    since_inbound: timedelta,
    asked: bool,
    settings: Settings,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    settings.WHATSAPP_ACCESS_TOKEN = "test-access-token"
    survey_on()
    assert session.last_inbound_at is not None
    now = session.last_inbound_at + since_inbound
    sent: list[int] = []

    with django_capture_on_commit_callbacks(execute=True):
        outcome = session_close(session_id=session.pk, user=ana, now=now, send=sent.append)

    survey = SatisfactionSurvey.objects.get()
    questions = list(
        Message.objects.filter(direction=Direction.OUTBOUND).values_list("pk", flat=True)
    )
    if asked:
        assert outcome.message == (
            "Conversa encerrada. A pergunta de satisfação foi enviada ao cliente."
        )
        assert (survey.not_sent, survey.asked_at, survey.question_id) == ("", now, questions[0])
        assert sent == questions
    else:
        assert outcome.message == (
            "Conversa encerrada. A pergunta de satisfação não foi enviada: a janela de 24 horas "
            "do WhatsApp está fechada."
        )
        assert (survey.not_sent, survey.get_not_sent_display()) == (
            "window_closed",
            "não enviada: janela fechada",
        )
        assert (survey.asked_at, survey.question, survey.created_at) == (None, None, now)
        assert (sent, questions) == ([], [])


def test_a_customer_who_never_wrote_is_not_asked(
    ana: User, django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks
) -> None:
    survey_on()
    session = recipes.known_customer.make(instance=recipes.instance.make(), last_inbound_at=None)
    sent: list[int] = []

    with django_capture_on_commit_callbacks(execute=True):
        session_close(session_id=session.pk, user=ana, now=timezone.now(), send=sent.append)

    assert SatisfactionSurvey.objects.get().not_sent == "window_closed"
    assert sent == []


# --- Never twice, never simulated ---------------------------------------------------------------


def test_a_simulated_conversation_is_never_asked(
    ana: User,
    fake_graph: FakeGraphAPI,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    survey_on()
    session = recipes.known_customer.make(
        instance=recipes.instance.make(),
        is_simulated=True,
        state="HUMAN",
        last_inbound_at=timezone.now(),
    )

    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        response = close(logged_in(ana), session)

    assert flash(response) == ["Conversa encerrada."]
    assert (callbacks, fake_graph.sends, SatisfactionSurvey.objects.count()) == ([], [], 0)
    assert Session.objects.get(pk=session.pk).state == "CLOSED"


def test_a_conversation_is_asked_once(
    session: Session, ana: User, django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks
) -> None:
    """Closed, reopened by hand and closed again (or a lead's survey before the close)."""
    survey_on()
    sent: list[int] = []
    with django_capture_on_commit_callbacks(execute=True):
        session_close(session_id=session.pk, user=ana, now=timezone.now(), send=sent.append)
    Session.objects.filter(pk=session.pk).update(state="HUMAN")

    with django_capture_on_commit_callbacks(execute=True):
        second = session_close(
            session_id=session.pk, user=ana, now=timezone.now(), send=sent.append
        )

    assert second.message == "Conversa encerrada."
    assert len(sent) == 1
    assert SatisfactionSurvey.objects.count() == 1
    assert Message.objects.filter(action="satisfaction_survey").count() == 1


# --- The answer through the webhook --------------------------------------------------------------


@pytest.fixture
def asked(
    session: Session,
    ana: User,
    fake_graph: FakeGraphAPI,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> SatisfactionSurvey:
    """The question sent on closing Maria's conversation, an hour ago (a tap's WhatsApp time is
    in whole seconds and never in the future)."""
    survey_on()
    with django_capture_on_commit_callbacks(execute=True):
        close(logged_in(ana), session)
    an_hour_ago = timezone.now().replace(microsecond=0) - timedelta(hours=1)
    SatisfactionSurvey.objects.update(asked_at=an_hour_ago)
    return SatisfactionSurvey.objects.get()


def test_a_tap_is_stored_on_the_survey_with_no_session_no_turn_and_no_reply(
    asked: SatisfactionSurvey,
    session: Session,
    fake_graph: FakeGraphAPI,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    assert asked.asked_at is not None
    tapped_at = asked.asked_at + timedelta(minutes=3)
    before = Session.objects.values_list("pk", "state", "last_inbound_at", "last_message_at")
    rows_before = list(before)

    status, callbacks = answer(
        tap("csat:5", "Ótimo", at=tapped_at), django_capture_on_commit_callbacks
    )

    assert status == 200
    asked.refresh_from_db()
    assert (asked.score, asked.answered_at) == (5, tapped_at)
    # No session opened or moved, nothing enqueued (no turn, no send), nothing sent back.
    assert list(before) == rows_before
    assert callbacks == []
    assert len(fake_graph.sends) == 1  # the question
    tap_row = Message.objects.get(session=session, direction=Direction.INBOUND)
    assert (
        tap_row.message_type,
        tap_row.content,
        tap_row.interactive,
        tap_row.wa_message_id,
        tap_row.processed_at is not None,
        tap_row.reply_to_wamid,
    ) == (
        "interactive",
        "Ótimo",
        {"type": "button_reply", "id": "csat:5", "title": "Ótimo"},
        "wamid.CSAT01",
        True,
        "wamid.FAKE0001",  # the question
    )
    assert not Message.objects.filter(action="unsupported_media").exists()


def test_the_same_tap_delivered_twice_is_stored_once(
    asked: SatisfactionSurvey,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    assert asked.asked_at is not None
    body = tap("csat:3", "Regular", at=asked.asked_at + timedelta(minutes=1))
    answer(body, django_capture_on_commit_callbacks)

    status, callbacks = answer(body, django_capture_on_commit_callbacks)

    assert (status, callbacks) == (200, [])
    assert Message.objects.filter(direction=Direction.INBOUND).count() == 1
    assert SatisfactionSurvey.objects.get().score == 3


def test_a_second_tap_replaces_the_first(
    asked: SatisfactionSurvey,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    assert asked.asked_at is not None
    first = asked.asked_at + timedelta(minutes=1)
    answer(tap("csat:1", "Ruim", at=first), django_capture_on_commit_callbacks)

    answer(
        tap("csat:5", "Ótimo", at=first + timedelta(seconds=20), wamid="wamid.CSAT02"),
        django_capture_on_commit_callbacks,
    )

    asked.refresh_from_db()
    assert (asked.score, asked.answered_at) == (5, first + timedelta(seconds=20))
    assert Message.objects.filter(direction=Direction.INBOUND).count() == 2


@pytest.mark.parametrize(
    ("after", "counted"),
    [
        (timedelta(days=ANSWER_DAYS) - timedelta(seconds=1), True),
        (timedelta(days=ANSWER_DAYS), True),
        (timedelta(days=ANSWER_DAYS) + timedelta(seconds=1), False),
    ],
    ids=["1 s before 7 days", "7 days", "1 s after 7 days"],
)
def test_a_tap_after_seven_days_is_kept_but_not_counted(
    asked: SatisfactionSurvey,
    session: Session,
    after: timedelta,
    counted: bool,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    # WhatsApp's timestamps are whole seconds, and never in the future.
    tapped_at = timezone.now().replace(microsecond=0) - timedelta(minutes=1)
    SatisfactionSurvey.objects.filter(pk=asked.pk).update(asked_at=tapped_at - after)

    status, callbacks = answer(
        tap("csat:4", "4 - Bom", at=tapped_at), django_capture_on_commit_callbacks
    )

    asked.refresh_from_db()
    expected = (4, tapped_at) if counted else (None, None)
    assert (asked.score, asked.answered_at) == expected
    # Either way the tap is kept in the closed conversation, and nothing else happens.
    assert (status, callbacks, Session.objects.count()) == (200, [], 1)
    assert Message.objects.filter(session=session, wa_message_id="wamid.CSAT01").count() == 1


def test_a_csat_reply_from_a_customer_never_asked_is_an_ordinary_reply(
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    recipes.instance.make()

    status, callbacks = answer(
        tap("csat:5", "Ótimo", at=timezone.now()), django_capture_on_commit_callbacks, execute=False
    )

    session = Session.objects.get()
    assert (status, session.state, session.customer_phone) == (200, "TRIAGE", CUSTOMER_PHONE)
    [message] = session.messages.all()
    assert (message.content, message.processed_at) == ("Ótimo", None)
    assert len(callbacks) == 1  # the turn
    assert SatisfactionSurvey.objects.count() == 0


def test_a_simulated_survey_is_never_found_by_a_real_tap(
    ana: User,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    """A simulated conversation is never asked; even a row left by hand is not answered."""
    instance = recipes.instance.make()
    simulated = recipes.session.make(
        instance=instance,
        customer_phone=CUSTOMER_PHONE,
        customer_user_id=CUSTOMER_USER_ID,
        is_simulated=True,
        state="CLOSED",
    )
    SatisfactionSurvey.objects.create(
        session=simulated, trigger="staff_close", style="buttons", asked_at=timezone.now()
    )

    answer(tap("csat:5", "Ótimo", at=timezone.now()), django_capture_on_commit_callbacks)

    assert SatisfactionSurvey.objects.get().score is None
    assert Session.objects.filter(is_simulated=False).count() == 1


def test_a_plain_button_reply_of_an_asked_customer_still_opens_a_session(
    asked: SatisfactionSurvey,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    """Only a ``csat:`` id is a survey answer; another reply is a new conversation."""
    status, callbacks = answer(
        tap("sim", "Sim, confirmo", at=timezone.now()),
        django_capture_on_commit_callbacks,
        execute=False,
    )

    assert status == 200
    newer = Session.objects.exclude(pk=asked.session_id).get()
    assert (newer.state, newer.messages.get().content) == ("TRIAGE", "Sim, confirmo")
    assert SatisfactionSurvey.objects.get().score is None
    assert len(callbacks) == 1


def test_the_number_of_the_tap_must_be_ours(
    asked: SatisfactionSurvey,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    document = load_fixture("interactive_button_reply")
    value = document["entry"][0]["changes"][0]["value"]
    value["metadata"]["phone_number_id"] = "100000000000999"
    value["messages"][0]["interactive"]["button_reply"] = {"id": "csat:5", "title": "Ótimo"}

    status, callbacks = answer(encode(document), django_capture_on_commit_callbacks)

    assert (status, callbacks) == (200, [])
    assert SatisfactionSurvey.objects.get().score is None
    assert PHONE_NUMBER_ID != "100000000000999"


def test_the_closed_conversation_shows_the_question_and_the_tap(
    asked: SatisfactionSurvey,
    session: Session,
    ana: User,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    assert asked.asked_at is not None
    answer(
        tap("csat:3", "Regular", at=asked.asked_at + timedelta(minutes=1)),
        django_capture_on_commit_callbacks,
    )

    page = logged_in(ana).get(f"/admin/conversations/session/{session.pk}/change/")

    text = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page.content.decode())).split())
    moment = r"\d\d/\d\d/\d{4} \d\d:\d\d"
    assert re.search(
        rf"Como você avalia o atendimento\? Ótimo Regular Ruim {moment} · interactive · "
        rf"pergunta de satisfação · enviada \d\d:\d\d Maria Silva Em resposta a: Como você "
        rf"avalia o atendimento\? botão Regular {moment} · interactive Cliente",
        text,
    ), text


def test_a_tap_costs_three_statements_beside_the_deliverys_own(
    asked: SatisfactionSurvey,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    """The survey's lookup, the tap's INSERT and the score's UPDATE; every other message pays
    nothing for the survey (its reply id is checked in Python)."""
    assert asked.asked_at is not None
    body = tap("csat:5", "Ótimo", at=asked.asked_at + timedelta(minutes=1))

    with CaptureQueriesContext(connection) as queries:
        answer(body, django_capture_on_commit_callbacks)

    survey_sql = [
        q["sql"].split()[0] for q in queries.captured_queries if "satisfactionsurvey" in q["sql"]
    ]
    assert survey_sql == ["SELECT", "UPDATE"]
    inserts = [q["sql"] for q in queries.captured_queries if q["sql"].startswith("INSERT")]
    assert [sql.split()[2] for sql in inserts] == [
        "conversations_message",
        "conversations_webhookdelivery",
    ]


def test_a_tap_after_the_customer_started_a_new_conversation_still_answers_the_survey(
    asked: SatisfactionSurvey,
    session: Session,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    """The customer wrote again (a new conversation with the bot), then tapped the old question:
    the tap is the survey's, and the new conversation neither gets it nor runs a turn."""
    newer = recipes.known_customer.make(
        instance=session.instance, state="TRIAGE", last_inbound_at=timezone.now()
    )
    assert asked.asked_at is not None

    status, callbacks = answer(
        tap("csat:1", "Ruim", at=asked.asked_at + timedelta(minutes=30)),
        django_capture_on_commit_callbacks,
    )

    asked.refresh_from_db()
    assert (status, callbacks, asked.score) == (200, [], 1)
    assert newer.messages.count() == 0
    assert session.messages.filter(direction=Direction.INBOUND).get().content == "Ruim"
