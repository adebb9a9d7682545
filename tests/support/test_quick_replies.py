"""Quick replies: the model's rules, who may do what in their admin, and the composer's list
``GET …/conversations/session/<id>/quick-replies/?q=`` (permissions, matching, the names filled
in and masked, bad input, a query count that does not grow with the matches)."""

import io
import json

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.db import IntegrityError, transaction
from django.test import Client
from pytest_django import DjangoAssertNumQueries, Settings

from conversations.models import Session
from support.models import MAX_SHORTCUT_CHARS, Label, QuickReply
from support.staff_actions import MAX_REPLY_CHARS
from tests import baker_recipes as recipes
from tests.helpers.staff import PROMPT_EDITORS, SUPPORT, logged_in, staff_member

pytestmark = pytest.mark.django_db

LIST_URL = "/admin/support/quickreply/"
ADD_URL = LIST_URL + "add/"
MANAGE_SHARED = "support.manage_shared_quickreply"


def change_url(reply: QuickReply) -> str:
    return f"{LIST_URL}{reply.pk}/change/"


def endpoint(session: Session, query: str = "") -> str:
    return f"/admin/conversations/session/{session.pk}/quick-replies/?q={query}"


def support_member(username: str, first_name: str = "", *permissions: str) -> User:
    user = staff_member(SUPPORT, permissions=permissions)
    user.username, user.first_name = username, first_name
    user.save()
    return user


def reply(
    shortcut: str, *, owner: User | None = None, title: str = "", text: str = ""
) -> QuickReply:
    return QuickReply.objects.create(
        shortcut=shortcut, title=title or shortcut, text=text or f"Texto de {shortcut}", owner=owner
    )


@pytest.fixture
def ana() -> User:
    return support_member("ana", "Ana Paula")


@pytest.fixture
def bruno() -> User:
    return support_member("bruno", "Bruno")


@pytest.fixture
def maria() -> Session:
    return recipes.session.make(customer_name="Maria Souza", state="HUMAN")


# --- The model -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "shortcut", ["oi", "boas-vindas", "prazo-2", "a", "2via", "x" * MAX_SHORTCUT_CHARS]
)
def test_a_shortcut_of_letters_digits_and_inner_hyphens_is_valid(shortcut: str) -> None:
    QuickReply(shortcut=shortcut, title="t", text="x").full_clean()


@pytest.mark.parametrize(
    "shortcut", ["Oi", "boas vindas", "oi_", "-oi", "oi-", "a--b", "orçamento", "/oi", ""]
)
def test_any_other_shortcut_is_refused(shortcut: str) -> None:
    with pytest.raises(ValidationError) as refused:
        QuickReply(shortcut=shortcut, title="t", text="x").full_clean()
    assert "shortcut" in refused.value.message_dict


def test_a_shortcut_one_character_too_long_is_refused() -> None:
    with pytest.raises(ValidationError):
        QuickReply(shortcut="x" * (MAX_SHORTCUT_CHARS + 1), title="t", text="x").full_clean()


def test_the_text_fits_one_whatsapp_reply() -> None:
    QuickReply(shortcut="oi", title="t", text="x" * MAX_REPLY_CHARS).full_clean()
    with pytest.raises(ValidationError):
        QuickReply(shortcut="oi", title="t", text="x" * (MAX_REPLY_CHARS + 1)).full_clean()


def test_a_shortcut_is_unique_among_the_shared_and_among_each_persons_own(
    ana: User, bruno: User
) -> None:
    reply("oi")
    reply("oi", owner=ana)
    reply("oi", owner=bruno)
    with pytest.raises(IntegrityError), transaction.atomic():
        reply("oi")
    with pytest.raises(IntegrityError), transaction.atomic():
        reply("oi", owner=ana)
    assert QuickReply.objects.filter(shortcut="oi").count() == 3


def test_every_change_is_a_version(ana: User) -> None:
    saved = reply("oi", owner=ana)
    saved.text = "Olá!"
    saved.save()
    assert [v.text for v in saved.history.order_by("history_id")] == ["Texto de oi", "Olá!"]


# --- The admin: who may do what --------------------------------------------------------------


def form_data(**fields: str) -> dict[str, str]:
    return {"shortcut": "oi", "title": "Saudação", "text": "Olá, {{primeiro_nome}}!", **fields}


def test_support_adds_a_personal_reply_and_cannot_make_it_shared(ana: User) -> None:
    client = logged_in(ana)
    page = client.get(ADD_URL).content.decode()
    assert 'name="shared"' not in page

    response = client.post(ADD_URL, form_data(shortcut="Boas-Vindas", shared="on"))

    assert response.status_code == 302
    saved = QuickReply.objects.get()
    assert (saved.shortcut, saved.owner) == ("boas-vindas", ana)
    assert saved.history.get().history_user == ana


def test_support_lists_their_own_and_the_shared_replies_not_a_colleagues(
    ana: User, bruno: User
) -> None:
    reply("mine", owner=ana)
    reply("team")
    reply("his", owner=bruno)

    page = logged_in(ana).get(LIST_URL).content.decode()

    assert ">mine<" in page
    assert ">team<" in page
    assert ">his<" not in page
    assert "pessoal de Ana Paula" in page
    assert "compartilhada com a equipe" in page


def test_support_can_neither_open_change_nor_delete_a_colleagues_reply(
    ana: User, bruno: User
) -> None:
    his = reply("his", owner=bruno, text="original")
    client = logged_in(ana)

    assert client.get(change_url(his)).status_code == 302  # "does not exist", to the index
    assert client.post(change_url(his), form_data(text="hacked")).status_code == 302
    assert client.get(f"{LIST_URL}{his.pk}/history/").status_code == 403
    assert client.post(f"{LIST_URL}{his.pk}/delete/", {"post": "yes"}).status_code == 302
    his.refresh_from_db()
    assert his.text == "original"


def test_support_reads_a_shared_reply_but_may_not_change_or_delete_it(ana: User) -> None:
    team = reply("prazo", text="Prazo de 5 dias úteis.")
    client = logged_in(ana)

    page = client.get(change_url(team))
    assert page.status_code == 200
    content = page.content.decode()
    assert "Prazo de 5 dias úteis." in content
    assert 'name="text"' not in content
    assert client.post(change_url(team), form_data(text="hacked")).status_code == 403
    assert client.post(f"{LIST_URL}{team.pk}/delete/", {"post": "yes"}).status_code == 403
    team.refresh_from_db()
    assert team.text == "Prazo de 5 dias úteis."


def test_support_changes_and_deletes_their_own_reply(ana: User) -> None:
    mine = reply("oi", owner=ana)
    client = logged_in(ana)

    response = client.post(change_url(mine), form_data(text="Oi de novo", shared="on"))
    assert response.status_code == 302
    mine.refresh_from_db()
    assert (mine.text, mine.owner) == ("Oi de novo", ana)
    assert client.post(f"{LIST_URL}{mine.pk}/delete/", {"post": "yes"}).status_code == 302
    assert not QuickReply.objects.exists()


def test_the_permission_manages_shared_replies(ana: User) -> None:
    keeper = support_member("carla", "Carla", MANAGE_SHARED)
    team = reply("prazo")
    client = logged_in(keeper)
    assert 'name="shared"' in client.get(ADD_URL).content.decode()

    assert client.post(ADD_URL, form_data(shortcut="oi", shared="on")).status_code == 302
    assert (
        client.post(change_url(team), form_data(shortcut="prazo", shared="on")).status_code == 302
    )

    assert QuickReply.objects.get(shortcut="oi").owner is None
    team.refresh_from_db()
    assert (team.title, team.owner) == ("Saudação", None)


def test_unticking_shared_makes_a_reply_personal_to_who_edits_it() -> None:
    keeper = support_member("carla", "Carla", MANAGE_SHARED)
    team = reply("prazo")
    response = logged_in(keeper).post(change_url(team), form_data(shortcut="prazo"))
    assert response.status_code == 302
    team.refresh_from_db()
    assert team.owner == keeper


def test_a_superuser_manages_every_reply(admin_client: Client, bruno: User) -> None:
    his = reply("his", owner=bruno)
    assert ">his<" in admin_client.get(LIST_URL).content.decode()
    response = admin_client.post(change_url(his), form_data(shortcut="his", text="corrigido"))
    assert response.status_code == 302
    his.refresh_from_db()
    assert (his.text, his.owner) == ("corrigido", bruno)


def test_a_prompt_editor_has_no_quick_replies() -> None:
    client = logged_in(staff_member(PROMPT_EDITORS))
    assert client.get(LIST_URL).status_code == 403
    assert client.get(ADD_URL).status_code == 403


def test_a_repeated_shortcut_is_refused_in_portuguese(ana: User) -> None:
    reply("oi", owner=ana)
    reply("prazo")
    keeper = support_member("carla", "Carla", MANAGE_SHARED)

    mine = logged_in(ana).post(ADD_URL, form_data(shortcut="oi"))
    shared = logged_in(keeper).post(ADD_URL, form_data(shortcut="prazo", shared="on"))

    assert "Já existe uma resposta rápida pessoal com o atalho /oi." in mine.content.decode()
    assert (
        "Já existe uma resposta rápida compartilhada com o atalho /prazo."
        in shared.content.decode()
    )
    assert QuickReply.objects.count() == 2


def test_an_invalid_shortcut_is_refused_in_portuguese(ana: User) -> None:
    response = logged_in(ana).post(ADD_URL, form_data(shortcut="boas vindas"))
    assert response.status_code == 200
    assert (
        "Use só letras sem acento, números e hífens entre eles, por exemplo boas-vindas ou "
        "prazo-2." in response.content.decode()
    )
    assert not QuickReply.objects.exists()


# --- The composer's list: permissions --------------------------------------------------------


def test_anonymous_users_are_sent_to_login(client: Client, maria: Session) -> None:
    response = client.get(endpoint(maria, "oi"))
    assert response.status_code == 302
    assert response.headers["Location"].startswith("/admin/login/?next=")


@pytest.mark.parametrize("who", ["no permission", "prompt editor"])
def test_staff_who_do_not_attend_conversations_get_403(who: str, maria: Session) -> None:
    user = staff_member(PROMPT_EDITORS) if who == "prompt editor" else staff_member()
    reply("oi")
    assert logged_in(user).get(endpoint(maria, "oi")).status_code == 403


def test_support_gets_the_matches_with_both_names_filled_in(ana: User, maria: Session) -> None:
    reply("oi", title="Saudação", text="Olá, {{primeiro_nome}}! Sou {{atendente}}, da equipe.")

    response = logged_in(ana).get(endpoint(maria, "oi"))

    assert response.status_code == 200
    assert response.headers["Content-Type"] == "application/json"
    assert json.loads(response.content) == {
        "results": [
            {
                "shortcut": "oi",
                "title": "Saudação",
                "text": "Olá, Maria! Sou Ana, da equipe.",
                "shared": True,
            }
        ]
    }


def test_a_superuser_gets_them_too(admin_client: Client, admin_user: User, maria: Session) -> None:
    reply("oi", text="{{primeiro_nome}} / {{atendente}}")
    body = json.loads(admin_client.get(endpoint(maria, "o")).content)
    assert [r["text"] for r in body["results"]] == ["Maria / admin"]


def test_the_customers_name_is_masked_for_staff_without_personal_data(maria: Session) -> None:
    masked = staff_member(
        permissions=("conversations.view_session", "conversations.attend_session")
    )
    reply("oi", text="Olá, {{primeiro_nome}}!")
    body = json.loads(logged_in(masked).get(endpoint(maria, "oi")).content)
    assert body["results"][0]["text"] == "Olá, M***!"


def test_an_unknown_customer_name_leaves_its_placeholder(ana: User) -> None:
    nameless = recipes.session.make(customer_name="")
    reply("oi", text="Olá, {{primeiro_nome}}! {{atendente}} aqui.")
    body = json.loads(logged_in(ana).get(endpoint(nameless, "oi")).content)
    assert body["results"][0]["text"] == "Olá, {{primeiro_nome}}! Ana aqui."


def test_a_staff_member_without_a_first_name_signs_with_the_username(maria: Session) -> None:
    user = support_member("joao.silva")
    reply("oi", text="{{atendente}}")
    body = json.loads(logged_in(user).get(endpoint(maria, "oi")).content)
    assert body["results"][0]["text"] == "joao.silva"


# --- The composer's list: what matches, in what order -----------------------------------------


def test_shortcut_prefixes_come_first_then_titles_personal_before_shared(
    ana: User, bruno: User, maria: Session
) -> None:
    reply("prazo", title="Prazo do laudo")
    reply("prazo", owner=ana, title="Meu prazo")
    reply("pr", title="Preço")
    reply("laudo", title="Envio do prazo")  # title contains "pra"
    reply("prazo-bruno", owner=bruno, title="Prazo do Bruno")
    reply("oi", title="Saudação")

    body = json.loads(logged_in(ana).get(endpoint(maria, "PRA")).content)

    assert [(r["shortcut"], r["title"]) for r in body["results"]] == [
        ("prazo", "Meu prazo"),
        ("prazo", "Prazo do laudo"),
        ("laudo", "Envio do prazo"),
    ]
    assert [r["shared"] for r in body["results"]] == [False, True, True]


def test_at_most_ten_matches_and_every_reply_for_an_empty_query(ana: User, maria: Session) -> None:
    for i in range(12):
        reply(f"r{i:02d}")
    client = logged_in(ana)

    for url in (endpoint(maria, "r"), endpoint(maria)):
        body = json.loads(client.get(url).content)
        assert [r["shortcut"] for r in body["results"]] == [f"r{i:02d}" for i in range(10)]


def test_no_match_is_an_empty_list(ana: User, maria: Session) -> None:
    reply("oi")
    assert json.loads(logged_in(ana).get(endpoint(maria, "xyz")).content) == {"results": []}


# --- The composer's list: bad input ----------------------------------------------------------


@pytest.mark.parametrize("query", ["a" * 200, "a" * 41, "oi tchau", "oi%25", "a_b", "<b>"])
def test_a_query_that_cannot_follow_a_slash_is_a_400(query: str, ana: User, maria: Session) -> None:
    response = logged_in(ana).get(endpoint(maria, query))
    assert response.status_code == 400
    assert json.loads(response.content) == {
        "error": "q: o que vem depois da / na caixa de resposta, até 40 letras, números ou hífens."
    }


def test_a_query_of_forty_characters_is_accepted(ana: User, maria: Session) -> None:
    assert logged_in(ana).get(endpoint(maria, "a" * 40)).status_code == 200


def test_an_unknown_conversation_is_a_404(ana: User) -> None:
    response = logged_in(ana).get("/admin/conversations/session/999999/quick-replies/?q=oi")
    assert response.status_code == 404
    assert json.loads(response.content) == {"error": "A conversa #999999 não existe."}


def test_the_list_is_get_only(ana: User, maria: Session) -> None:
    assert logged_in(ana).post(endpoint(maria, "oi")).status_code == 405


@pytest.mark.parametrize("n_replies", [1, 10])
def test_the_list_costs_the_same_queries_for_1_and_10_matches(
    django_assert_num_queries: DjangoAssertNumQueries, n_replies: int, ana: User, maria: Session
) -> None:
    for i in range(n_replies):
        reply(f"r{i:02d}")
    client = logged_in(ana)
    client.get(endpoint(maria, "r"))

    # Login session and user; the user's own and group permissions; the session's name; the
    # matches.
    with django_assert_num_queries(6):
        response = client.get(endpoint(maria, "r"))

    assert len(json.loads(response.content)["results"]) == n_replies


def test_the_change_page_loads_the_composers_script_for_staff_who_attend(
    ana: User, maria: Session
) -> None:
    url = f"/admin/conversations/session/{maria.pk}/change/"
    page = logged_in(ana).get(url).content.decode()
    editor_page = logged_in(staff_member(PROMPT_EDITORS)).get(url).content.decode()

    assert (
        f'data-quick-replies-url="/admin/conversations/session/{maria.pk}/quick-replies/"' in page
    )
    assert "quick_replies.js" not in editor_page


def test_support_reverts_their_own_reply_but_not_a_shared_one(ana: User) -> None:
    mine = reply("oi", owner=ana, text="Primeira versão")
    team = reply("prazo", text="Prazo original")
    for obj, text in ((mine, "Segunda versão"), (team, "Prazo novo")):
        obj.text = text
        obj.save()
    client = logged_in(ana)
    first_of_mine = mine.history.earliest().history_id
    first_of_team = team.history.earliest().history_id

    reverted = client.post(
        f"{LIST_URL}{mine.pk}/history/{first_of_mine}/",
        form_data(shortcut="oi", text="Primeira versão"),
    )
    refused = client.post(
        f"{LIST_URL}{team.pk}/history/{first_of_team}/",
        form_data(shortcut="prazo", text="Prazo original"),
    )

    assert (reverted.status_code, refused.status_code) == (302, 403)
    mine.refresh_from_db()
    team.refresh_from_db()
    assert (mine.text, mine.owner, team.text) == ("Primeira versão", ana, "Prazo novo")


def test_the_demo_has_shared_quick_replies_and_labels_with_a_history_baseline(
    settings: Settings,
) -> None:
    settings.DEBUG = True
    call_command("bootstrap_dev", stdout=io.StringIO())

    replies = list(QuickReply.objects.all())
    for demo_reply in replies:
        demo_reply.full_clean()
    assert [(r.shortcut, r.owner) for r in replies] == [
        ("amostra", None),
        ("boas-vindas", None),
        ("encerramento", None),
        ("prazo-laudo", None),
    ]
    labels = list(Label.objects.all())
    for label in labels:
        label.full_clean()
    assert [label.name for label in labels] == [
        "aguardando amostra",
        "orçamento",
        "urgente",
        "venda perdida",
    ]
    assert (QuickReply.history.count(), Label.history.count()) == (4, 4)
