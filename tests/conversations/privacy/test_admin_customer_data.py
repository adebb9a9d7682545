"""The admin page of a customer's LGPD requests: who may open it, the customer found by phone or
user id (never shown by name), the download, and an erasure that needs a confirmation and is
recorded with the staff member."""

import json
import logging

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import User
from django.contrib.messages import get_messages
from django.test import Client

from conversations.models import Instance, Session
from tests import baker_recipes as recipes
from tests.helpers.staff import PROMPT_EDITORS, SUPPORT, logged_in, staff_member

pytestmark = pytest.mark.django_db

URL = "/admin/conversations/session/personal-data/"
PHONE = "5511987650123"
USER_ID = "BR.7777666655554444"
NAME = "Joana Erasmo"
ERASE = "conversations.erase_customer_data"


@pytest.fixture
def joana(instance: Instance) -> Session:
    session: Session = recipes.session.make(
        instance=instance, customer_phone=PHONE, customer_user_id=USER_ID, customer_name=NAME
    )
    return session


@pytest.fixture
def eraser() -> User:
    return staff_member(permissions=(ERASE, "conversations.view_session"))


def erased(session: Session) -> bool:
    session.refresh_from_db()
    return session.anonymised_at is not None


@pytest.mark.parametrize("groups", [(SUPPORT,), (PROMPT_EDITORS,), ()])
def test_staff_without_the_permission_get_403_and_nothing_is_erased(
    joana: Session, groups: tuple[str, ...]
) -> None:
    client = logged_in(staff_member(*groups))

    get = client.get(URL)
    post = client.post(URL, {"kind": "phone", "value": PHONE, "confirm": "on", "action": "erase"})

    assert (get.status_code, post.status_code, erased(joana)) == (403, 403, False)


def test_a_superuser_may_open_the_page() -> None:
    superuser = User.objects.create_superuser("root", "root@example.com", "x")

    assert logged_in(superuser).get(URL).status_code == 200


def test_finding_lists_the_conversations_by_id_and_not_by_name(
    joana: Session, eraser: User
) -> None:
    response = logged_in(eraser).post(URL, {"kind": "user_id", "value": USER_ID, "action": "find"})

    text = response.content.decode()
    assert response.status_code == 200
    assert "1 conversa · 0 corpo de webhook que menciona o cliente" in text
    assert f'/admin/conversations/session/{joana.pk}/change/">Conversa #{joana.pk}</a>' in text
    assert "Joana" not in text
    assert erased(joana) is False


@pytest.mark.parametrize(
    ("kind", "value", "message"),
    [
        ("phone", "", "Informe o telefone ou o ID de usuário do WhatsApp do cliente."),
        ("phone", "abc", "Use o telefone com o código do país, só os dígitos (de 8 a 20 dígitos)."),
        ("user_id", "  ", "Informe o telefone ou o ID de usuário do WhatsApp do cliente."),
    ],
)
def test_an_empty_or_malformed_value_is_refused_in_pt_br_and_nothing_is_erased(
    joana: Session, eraser: User, kind: str, value: str, message: str
) -> None:
    response = logged_in(eraser).post(
        URL, {"kind": kind, "value": value, "confirm": "on", "action": "erase"}
    )

    assert response.status_code == 200
    assert (
        f'<p class="errornote" id="customer-data-error">{message}</p>' in response.content.decode()
    )
    assert (erased(joana), LogEntry.objects.count()) == (False, 0)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            {"kind": "email", "value": PHONE, "action": "erase", "confirm": "on"},
            "Faça uma escolha válida.",
        ),
        ({"action": "erase", "confirm": "on"}, "Este campo é obrigatório."),
        ({"kind": "phone", "value": "1" * 201, "action": "erase"}, "no máximo 200 caracteres"),
    ],
)
def test_a_crafted_form_is_answered_with_the_fields_error(
    joana: Session, eraser: User, data: dict[str, str], message: str
) -> None:
    response = logged_in(eraser).post(URL, data)

    assert response.status_code == 200
    assert message in response.content.decode()
    assert (erased(joana), LogEntry.objects.count()) == (False, 0)


@pytest.mark.parametrize("session", ["abc", "9" * 30, "-1", ""])
def test_an_unknown_session_in_the_link_leaves_the_form_empty(eraser: User, session: str) -> None:
    response = logged_in(eraser).get(f"{URL}?session={session}")

    assert response.status_code == 200
    assert (
        '<input type="text" name="value" maxlength="200" id="id_value">'
        in response.content.decode()
    )


def test_erasing_without_the_confirmation_is_refused_and_nothing_is_erased(
    joana: Session, eraser: User
) -> None:
    response = logged_in(eraser).post(URL, {"kind": "phone", "value": PHONE, "action": "erase"})

    assert "Marque a confirmação para apagar." in response.content.decode()
    assert (erased(joana), LogEntry.objects.count()) == (False, 0)


def test_the_erasure_is_recorded_with_the_staff_member(joana: Session, eraser: User) -> None:
    client = logged_in(eraser)

    response = client.post(
        URL, {"kind": "phone", "value": "+55 11 98765-0123", "confirm": "on", "action": "erase"}
    )

    assert (response.status_code, response["Location"]) == (302, URL)
    assert erased(joana) is True
    [event] = joana.messages.filter(message_type="personal_data_erased")
    assert (event.direction, event.staff_user) == ("SYSTEM", eraser)
    [entry] = LogEntry.objects.all()
    assert (entry.user, entry.object_repr, entry.change_message) == (
        eraser,
        f"Conversa #{joana.pk}",
        "Apagou os dados pessoais do cliente.",
    )
    page = client.get(f"/admin/conversations/session/{joana.pk}/change/").content.decode()
    assert f"{eraser.username.capitalize()} apagou os dados pessoais do cliente.</li>" in page
    assert [(m.level_tag, str(m)) for m in get_messages(response.wsgi_request)] == [
        (
            "success",
            "Dados pessoais apagados: 1 conversa(s) anonimizada(s), o cliente removido de 0 "
            "corpo(s) de webhook.",
        )
    ]


def test_the_download_holds_the_export_and_is_recorded(
    joana: Session, eraser: User, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="conversations.privacy.retention"):
        response = logged_in(eraser).post(
            URL, {"kind": "phone", "value": PHONE, "action": "export"}
        )

    assert response.status_code == 200
    assert response["Content-Type"] == "application/json; charset=utf-8"
    assert response["Content-Disposition"].startswith('attachment; filename="dados-pessoais-')
    assert PHONE not in response["Content-Disposition"]
    export = json.loads(response.content)
    assert [(s["id"], s["customer_name"]) for s in export["sessions"]] == [(joana.pk, NAME)]
    [entry] = LogEntry.objects.all()
    assert (entry.user, entry.change_message) == (eraser, "Exportou os dados pessoais do cliente.")
    [logged] = [r for r in caplog.records if r.getMessage() == "customer_data_exported"]
    assert (vars(logged)["user_id"], vars(logged)["session_ids"]) == (eraser.pk, [joana.pk])
    assert erased(joana) is False


def test_the_session_page_links_to_the_page_by_session_id_and_it_fills_the_form_in(
    joana: Session, eraser: User
) -> None:
    client = logged_in(eraser)

    page = client.get(f"/admin/conversations/session/{joana.pk}/change/").content.decode()
    form = client.get(f"{URL}?session={joana.pk}").content.decode()

    assert f'<a href="{URL}?session={joana.pk}" id="customer-data-link">' in page
    assert f'value="{PHONE}"' in form
    assert 'value="phone" required id="id_kind_0" checked' in form


def test_the_session_list_links_to_the_page(eraser: User) -> None:
    page = logged_in(eraser).get("/admin/conversations/session/").content.decode()

    assert f'<a href="{URL}" id="customer-data-link">Dados pessoais de um cliente</a>' in page


def test_the_pages_of_staff_without_the_permission_have_no_link(
    joana: Session, support_client: Client
) -> None:
    page = support_client.get(f"/admin/conversations/session/{joana.pk}/change/").content.decode()
    listing = support_client.get("/admin/conversations/session/").content.decode()

    assert ("customer-data-link" in page, "customer-data-link" in listing) == (False, False)
