"""Labels on conversations: the model, ``POST …/conversations/session/<id>/labels/`` (who may,
the plain and the JSON answers, the events, bad input), the box on the page, and the label
filters of the conversation list and the queue."""

import json
from datetime import timedelta

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import User
from django.contrib.messages import get_messages
from django.core.exceptions import ValidationError
from django.db import IntegrityError, connection, transaction
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from pytest_django import DjangoAssertNumQueries

from conversations.event_codes import EventCode
from conversations.labels import event_text
from conversations.models import Direction, Message, Session
from support.models import Label, SessionLabel
from tests import baker_recipes as recipes
from tests.helpers.staff import PROMPT_EDITORS, SUPPORT, logged_in, staff_member

pytestmark = pytest.mark.django_db

JSON = {"Accept": "application/json"}


def labels_url(session: Session) -> str:
    return f"/admin/conversations/session/{session.pk}/labels/"


def page_url(session: Session) -> str:
    return f"/admin/conversations/session/{session.pk}/change/"


def messages_of(response: object) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]  # type: ignore[attr-defined]


@pytest.fixture
def ana() -> User:
    user = staff_member(SUPPORT)
    user.username = "ana"
    user.save()
    return user


@pytest.fixture
def conversation() -> Session:
    return recipes.session.make(customer_name="Maria Souza", state="HUMAN")


@pytest.fixture
def urgent() -> Label:
    return Label.objects.create(name="urgente", colour="red")


def events(session: Session) -> list[Message]:
    return list(Message.objects.filter(session=session, direction=Direction.SYSTEM).order_by("id"))


# --- The model -------------------------------------------------------------------------------


def test_a_label_name_is_unique_whatever_its_case(urgent: Label) -> None:
    with pytest.raises(ValidationError) as refused:
        Label(name="URGENTE", colour="blue").full_clean()
    assert refused.value.messages == ["Já existe uma etiqueta com este nome."]
    with pytest.raises(IntegrityError), transaction.atomic():
        Label.objects.create(name="Urgente")


@pytest.mark.parametrize("colour", ["magenta", "#ff0000", ""])
def test_a_colour_outside_the_palette_is_refused(colour: str) -> None:
    with pytest.raises(ValidationError) as refused:
        Label(name="novo", colour=colour).full_clean()
    assert "colour" in refused.value.message_dict


def test_a_label_name_has_its_spaces_collapsed() -> None:
    label = Label(name="  venda   perdida ", colour="grey")
    label.full_clean()
    assert label.name == "venda perdida"


def test_support_creates_a_label_but_only_a_superuser_deletes_one(
    ana: User, admin_client: Client, urgent: Label
) -> None:
    client = logged_in(ana)
    response = client.post("/admin/support/label/add/", {"name": "orçamento", "colour": "blue"})
    assert response.status_code == 302
    delete = f"/admin/support/label/{urgent.pk}/delete/"
    assert client.post(delete, {"post": "yes"}).status_code == 403
    assert admin_client.post(delete, {"post": "yes"}).status_code == 302
    assert list(Label.objects.values_list("name", flat=True)) == ["orçamento"]


def test_a_prompt_editor_has_no_labels_admin() -> None:
    assert logged_in(staff_member(PROMPT_EDITORS)).get("/admin/support/label/").status_code == 403


# --- POST …/labels/: who may -----------------------------------------------------------------


def test_anonymous_users_are_sent_to_login(
    client: Client, conversation: Session, urgent: Label
) -> None:
    response = client.post(labels_url(conversation), {"add": urgent.pk})
    assert response.status_code == 302
    assert response.headers["Location"].startswith("/admin/login/?next=")
    assert not SessionLabel.objects.exists()


@pytest.mark.parametrize("who", ["no permission", "prompt editor"])
def test_staff_who_do_not_attend_conversations_get_403(
    who: str, conversation: Session, urgent: Label
) -> None:
    user = staff_member(PROMPT_EDITORS) if who == "prompt editor" else staff_member()
    client = logged_in(user)
    assert client.post(labels_url(conversation), {"add": urgent.pk}).status_code == 403
    refused = client.post(labels_url(conversation), {"add": urgent.pk}, headers=JSON)
    assert refused.status_code == 403
    assert json.loads(refused.content) == {
        "error": "Você não tem permissão para atender conversas."
    }
    assert not SessionLabel.objects.exists()


def test_support_adds_a_label_with_a_plain_post(
    ana: User, conversation: Session, urgent: Label
) -> None:
    response = logged_in(ana).post(labels_url(conversation), {"add": urgent.pk})

    assert response.status_code == 303
    assert response.headers["Location"] == page_url(conversation) + "#session-labels"
    assert messages_of(response) == ["Etiqueta “urgente” adicionada."]
    [on] = SessionLabel.objects.all()
    assert (on.session, on.label, on.added_by) == (conversation, urgent, ana)
    [event] = events(conversation)
    assert (event.message_type, event.staff_user, event.json_part) == (
        EventCode.STAFF_LABEL_ADDED.value,
        ana,
        {"label_id": urgent.pk, "label": "urgente"},
    )
    assert event_text(event) == "Ana adicionou a etiqueta “urgente”."
    assert LogEntry.objects.get().change_message == "Etiqueta “urgente” adicionada."


def test_a_superuser_removes_a_label_and_the_event_says_who(
    admin_client: Client, admin_user: User, conversation: Session, urgent: Label
) -> None:
    SessionLabel.objects.create(session=conversation, label=urgent)

    response = admin_client.post(labels_url(conversation), {"remove": urgent.pk})

    assert response.status_code == 303
    assert messages_of(response) == ["Etiqueta “urgente” removida."]
    assert not SessionLabel.objects.exists()
    [event] = events(conversation)
    assert event.message_type == EventCode.STAFF_LABEL_REMOVED.value
    assert event_text(event) == "Admin removeu a etiqueta “urgente”."


def test_the_json_answer_lists_the_labels_after_the_change(
    ana: User, conversation: Session, urgent: Label
) -> None:
    budget = Label.objects.create(name="orçamento", colour="blue")
    SessionLabel.objects.create(session=conversation, label=budget)

    response = logged_in(ana).post(labels_url(conversation), {"add": urgent.pk}, headers=JSON)

    assert response.status_code == 200
    assert json.loads(response.content) == {
        "ok": True,
        "changed": True,
        "message": "Etiqueta “urgente” adicionada.",
        "labels": [
            {"id": budget.pk, "name": "orçamento", "colour": "blue"},
            {"id": urgent.pk, "name": "urgente", "colour": "red"},
        ],
    }


def test_the_event_stays_as_it_was_when_the_label_is_renamed(
    ana: User, conversation: Session, urgent: Label
) -> None:
    logged_in(ana).post(labels_url(conversation), {"add": urgent.pk})
    urgent.name = "prioridade"
    urgent.save()
    assert event_text(events(conversation)[0]) == "Ana adicionou a etiqueta “urgente”."


def test_a_closed_conversation_can_be_labelled(ana: User, urgent: Label) -> None:
    closed = recipes.session.make(state="CLOSED")
    assert logged_in(ana).post(labels_url(closed), {"add": urgent.pk}).status_code == 303
    assert SessionLabel.objects.filter(session=closed).exists()


def test_the_transcript_shows_the_event(ana: User, conversation: Session, urgent: Label) -> None:
    client = logged_in(ana)
    client.post(labels_url(conversation), {"add": urgent.pk})
    assert (
        "Ana adicionou a etiqueta “urgente”." in client.get(page_url(conversation)).content.decode()
    )


# --- POST …/labels/: what it refuses ---------------------------------------------------------


def test_a_label_already_there_changes_nothing(
    ana: User, conversation: Session, urgent: Label
) -> None:
    client = logged_in(ana)
    client.post(labels_url(conversation), {"add": urgent.pk})

    plain = client.post(labels_url(conversation), {"add": urgent.pk})
    answer = client.post(labels_url(conversation), {"add": urgent.pk}, headers=JSON)

    assert plain.status_code == 303
    # After the first post's message, never shown: its redirect was not followed.
    assert messages_of(plain)[-1] == "A conversa já tem a etiqueta “urgente”."
    assert json.loads(answer.content)["changed"] is False
    assert SessionLabel.objects.count() == 1
    assert len(events(conversation)) == 1


def test_removing_a_label_that_is_not_there_changes_nothing(
    ana: User, conversation: Session, urgent: Label
) -> None:
    response = logged_in(ana).post(labels_url(conversation), {"remove": urgent.pk}, headers=JSON)
    assert response.status_code == 200
    body = json.loads(response.content)
    assert (body["changed"], body["message"]) == (False, "A conversa não tem a etiqueta “urgente”.")
    assert events(conversation) == []


def test_an_unknown_label_is_a_400(ana: User, conversation: Session) -> None:
    client = logged_in(ana)

    answer = client.post(labels_url(conversation), {"add": "999999"}, headers=JSON)
    plain = client.post(labels_url(conversation), {"add": "999999"})

    sentence = "A etiqueta #999999 não existe; recarregue a página para ver as etiquetas atuais."
    assert (answer.status_code, json.loads(answer.content)) == (400, {"error": sentence})
    assert plain.status_code == 303
    assert messages_of(plain) == [sentence]
    assert events(conversation) == []


@pytest.mark.parametrize(
    ("data", "sentence"),
    [
        ({}, "Escolha uma etiqueta para adicionar ou para remover."),
        ({"add": "1", "remove": "1"}, "Escolha uma etiqueta para adicionar ou para remover."),
        ({"add": "urgente"}, "Escolha uma das etiquetas."),
        ({"add": "-1"}, "Escolha uma das etiquetas."),
        ({"remove": "0"}, "Escolha uma das etiquetas."),
        ({"add": "9" * 30}, "Escolha uma das etiquetas."),
    ],
)
def test_a_form_without_one_label_id_is_a_400(
    data: dict[str, str], sentence: str, ana: User, conversation: Session
) -> None:
    response = logged_in(ana).post(labels_url(conversation), data, headers=JSON)
    assert (response.status_code, json.loads(response.content)) == (400, {"error": sentence})


def test_an_unknown_conversation_is_a_404(ana: User, urgent: Label) -> None:
    url = "/admin/conversations/session/999999/labels/"
    response = logged_in(ana).post(url, {"add": urgent.pk}, headers=JSON)
    assert (response.status_code, json.loads(response.content)) == (
        404,
        {"error": "A conversa #999999 não existe."},
    )


def test_it_is_post_only_and_csrf_checked(ana: User, conversation: Session, urgent: Label) -> None:
    assert logged_in(ana).get(labels_url(conversation)).status_code == 405
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(ana)
    assert strict.post(labels_url(conversation), {"add": urgent.pk}).status_code == 403
    assert not SessionLabel.objects.exists()


# --- The box on the page ---------------------------------------------------------------------


def test_support_sees_the_labels_box(ana: User, conversation: Session, urgent: Label) -> None:
    budget = Label.objects.create(name="orçamento", colour="blue")
    SessionLabel.objects.create(session=conversation, label=urgent)

    page = logged_in(ana).get(page_url(conversation)).content.decode()

    assert 'id="session-labels"' in page
    assert (
        f'<li class="label-chip label-red" data-label-id="{urgent.pk}" data-label-name="urgente" '
        'data-label-colour="red">urgente<button' in page
    )
    assert f'name="remove" value="{urgent.pk}"' in page
    assert f'<option value="{budget.pk}" data-label-colour="blue">orçamento</option>' in page
    assert f'<option value="{urgent.pk}" data-label-colour="red">' not in page
    assert (
        f'<form id="session-labels-add" method="post" action="{labels_url(conversation)}"' in page
    )


def test_a_prompt_editor_sees_no_labels_box(conversation: Session, urgent: Label) -> None:
    page = logged_in(staff_member(PROMPT_EDITORS)).get(page_url(conversation)).content.decode()
    assert 'id="session-labels"' not in page
    assert "session-labels-add" not in page


# --- Filters ---------------------------------------------------------------------------------


def test_the_conversation_list_filters_by_label(ana: User, urgent: Label) -> None:
    labelled, other = recipes.session.make(_quantity=2)
    SessionLabel.objects.create(session=labelled, label=urgent)
    client = logged_in(ana)

    page = client.get(f"/admin/conversations/session/?label={urgent.pk}").content.decode()
    nonsense = client.get("/admin/conversations/session/?label=abc").content.decode()

    assert f"/admin/conversations/session/{labelled.pk}/change/" in page
    assert f"/admin/conversations/session/{other.pk}/change/" not in page
    assert "Por etiqueta" in page
    assert f"/admin/conversations/session/{labelled.pk}/change/" not in nonsense


def waiting(n: int) -> list[Session]:
    now = timezone.now()
    instance = recipes.instance.make()
    return [
        recipes.session.make(
            instance=instance,
            state="HUMAN",
            customer_name=f"Maria {i}",
            handed_off_at=now - timedelta(minutes=10 + i),
            last_inbound_at=now - timedelta(minutes=10 + i),
        )
        for i in range(n)
    ]


def test_the_queue_filters_by_label(ana: User, urgent: Label) -> None:
    labelled, other = waiting(2)
    SessionLabel.objects.create(session=labelled, label=urgent)
    client = logged_in(ana)

    page = client.get(f"/admin/conversations/session/queue/?label={urgent.pk}").content.decode()
    everyone = client.get("/admin/conversations/session/queue/").content.decode()

    assert f'data-session-id="{labelled.pk}"' in page
    assert f'data-session-id="{other.pk}"' not in page
    assert f'href="?label={urgent.pk}" class="label-chip label-red selected"' in page
    assert f'data-session-id="{other.pk}"' in everyone
    assert 'id="queue-label-filters"' in everyone


def test_the_queue_has_no_label_filter_without_labels(ana: User) -> None:
    waiting(1)
    page = logged_in(ana).get("/admin/conversations/session/queue/").content.decode()
    assert "queue-label-filters" not in page


@pytest.mark.parametrize("n_waiting", [1, 30])
def test_the_label_filtered_queue_costs_the_same_queries_for_1_and_30_rows(
    django_assert_num_queries: DjangoAssertNumQueries, n_waiting: int, ana: User, urgent: Label
) -> None:
    for session in waiting(n_waiting):
        SessionLabel.objects.create(session=session, label=urgent)
    client = logged_in(ana)
    url = f"/admin/conversations/session/queue/?label={urgent.pk}"
    client.get(url)

    # As the queue without a filter (tests/support/test_admin_queue.py): the label is one
    # EXISTS in the rows' query and in their COUNT.
    with django_assert_num_queries(8):
        response = client.get(url)

    assert response.content.decode().count('class="queue-row ') == n_waiting


def test_the_labels_box_costs_one_query_whatever_the_number_of_labels(
    ana: User, conversation: Session
) -> None:
    client = logged_in(ana)
    client.get(page_url(conversation))
    counts = []
    for n in (1, 20):
        for i in range(n - Label.objects.count()):
            label = Label.objects.create(name=f"etiqueta {n}-{i}")
            if i % 2:
                SessionLabel.objects.create(session=conversation, label=label)
        with CaptureQueriesContext(connection) as captured:
            assert client.get(page_url(conversation)).status_code == 200
        counts.append(len(captured.captured_queries))
        assert sum("support_label" in q["sql"] for q in captured.captured_queries) == 1
    assert counts[0] == counts[1]
