"""The "Sincronizar com o WhatsApp" button of the WhatsApp message templates' list: who may press
it (POST, CSRF), and the pt-BR outcome it leaves on the list, against the fake Graph API."""

from typing import Any

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.contrib.messages import get_messages
from django.test import Client
from model_bakery import baker

from conversations.models import Instance, MessageTemplate
from tests.fakes.graph_server import FakeGraphAPI

pytestmark = pytest.mark.django_db

WABA = "102290129340398"
SYNC_URL = "/admin/conversations/messagetemplate/sync/"
LIST_URL = "/admin/conversations/messagetemplate/"


def staff(group: str, username: str) -> User:
    user = baker.make(User, username=username, is_staff=True)
    user.groups.add(Group.objects.get(name=group))
    return user


def client_of(user: User, *, csrf: bool = False) -> Client:
    client = Client(enforce_csrf_checks=csrf)
    client.force_login(user)
    return client


def flash(response: Any) -> list[tuple[str, str]]:
    return [(m.level_tag, str(m)) for m in get_messages(response.wsgi_request)]


@pytest.fixture
def account(fake_graph: FakeGraphAPI) -> FakeGraphAPI:
    baker.make(Instance, name="Lab Centro", phone_number_id="100000000000001", waba_id=WABA)
    baker.make(Instance, name="Lab Novo", phone_number_id="100000000000002", waba_id="")
    fake_graph.set_templates(
        WABA,
        [
            {
                "name": "aviso",
                "language": "pt_BR",
                "status": "APPROVED",
                "category": "UTILITY",
                "components": [{"type": "BODY", "text": "Olá, {{1}}!"}],
                "id": "1001",
            }
        ],
    )
    return fake_graph


@pytest.fixture
def lead() -> User:
    """A Support member given the sync permission by a superuser."""
    user = staff("Support", "lia")
    user.user_permissions.add(Permission.objects.get(codename="sync_messagetemplate"))
    return User.objects.get(pk=user.pk)


def test_a_superuser_syncs_and_reads_the_outcome(admin_user: User, account: FakeGraphAPI) -> None:
    response = client_of(admin_user).post(SYNC_URL)

    assert (response.status_code, response["Location"]) == (302, LIST_URL)
    assert flash(response) == [
        (
            "success",
            "Modelos de mensagem do WhatsApp sincronizados: 1 novo, 0 atualizados, 0 desativados.",
        ),
        (
            "warning",
            "A instância Lab Novo não tem o ID da conta do WhatsApp Business: nada foi "
            "sincronizado para ela. Preencha-o na instância.",
        ),
    ]
    assert list(MessageTemplate.objects.values_list("name", "waba_id")) == [("aviso", WABA)]


def test_support_with_the_sync_permission_may_sync(lead: User, account: FakeGraphAPI) -> None:
    response = client_of(lead).post(SYNC_URL)

    assert response.status_code == 302
    assert MessageTemplate.objects.count() == 1


def test_an_error_from_meta_is_shown_and_nothing_changes(
    admin_user: User, account: FakeGraphAPI
) -> None:
    account.respond_error(401, 190, "Session has expired")

    response = client_of(admin_user).post(SYNC_URL)

    assert flash(response)[0] == (
        "error",
        f"A conta do WhatsApp Business {WABA} (Lab Centro) não pôde ser lida: o token de "
        "acesso foi recusado (expirado ou revogado): Session has expired. Nada foi alterado "
        "nos modelos de mensagem do WhatsApp dela.",
    )
    assert MessageTemplate.objects.count() == 0


@pytest.mark.parametrize("who", ["support", "editor"])
def test_staff_without_the_permission_are_refused_with_403(who: str, account: FakeGraphAPI) -> None:
    user = staff("Support", "ana") if who == "support" else staff("Prompt editors", "carla")

    response = client_of(user).post(SYNC_URL)

    assert response.status_code == 403
    assert account.requests == []


def test_an_anonymous_visitor_is_sent_to_the_login(account: FakeGraphAPI) -> None:
    response = Client().post(SYNC_URL)

    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/")
    assert account.requests == []


def test_a_get_is_refused_with_405(admin_user: User, account: FakeGraphAPI) -> None:
    response = client_of(admin_user).get(SYNC_URL)

    assert response.status_code == 405
    assert account.requests == []


def test_a_post_without_the_csrf_token_is_refused(admin_user: User, account: FakeGraphAPI) -> None:
    response = client_of(admin_user, csrf=True).post(SYNC_URL)

    assert response.status_code == 403
    assert account.requests == []


def test_the_button_is_on_the_list_for_who_may_sync(admin_user: User, lead: User) -> None:
    for user in (admin_user, lead):
        page = client_of(user).get(LIST_URL).content.decode()

        assert f'<form method="post" action="{SYNC_URL}" id="template-sync-form"' in page
        assert "Sincronizar com o WhatsApp</button>" in page


def test_support_reads_the_list_without_the_button() -> None:
    page = client_of(staff("Support", "ana")).get(LIST_URL)

    assert page.status_code == 200
    assert "template-sync" not in page.content.decode()
    assert "Modelos de mensagem do WhatsApp" in page.content.decode()


# --- The instance's WhatsApp Business Account ID ---------------------------------------------


def instance_form(**overrides: str) -> dict[str, str]:
    data = {
        "name": "Vale",
        "phone_number_id": "100000000000001",
        "waba_id": WABA,
        "display_phone": "",
        "brand_context": "",
        "is_active": "on",
        "new_access_token": "",
    }
    return data | overrides


def test_an_instance_keeps_its_waba_id(admin_client: Client) -> None:
    response = admin_client.post("/admin/conversations/instance/add/", instance_form())

    assert response.status_code == 302
    assert Instance.objects.get().waba_id == WABA


@pytest.mark.parametrize("waba_id", ["WABA-1029", "1029 0129", "1234"])
def test_an_instance_with_an_invalid_waba_id_is_refused(admin_client: Client, waba_id: str) -> None:
    response = admin_client.post(
        "/admin/conversations/instance/add/", instance_form(waba_id=waba_id)
    )

    assert response.status_code == 200
    assert (
        "Use os dígitos do ID da conta do WhatsApp Business mostrado pela Meta, nada mais."
        in response.content.decode()
    )
    assert Instance.objects.count() == 0


def test_an_instance_without_a_waba_id_is_accepted(admin_client: Client) -> None:
    response = admin_client.post("/admin/conversations/instance/add/", instance_form(waba_id=""))

    assert response.status_code == 302
    assert Instance.objects.get().waba_id == ""
