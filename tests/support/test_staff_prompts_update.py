"""The staff action "Usar os prompts atuais" and the pinned versions on the session page: who may,
what it writes, the double submit, the pt-BR event and page text."""

import html
import re
from typing import Any

import pytest
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.auth.models import Group, User
from django.contrib.messages import get_messages
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from model_bakery import baker

from agents.states import SessionState
from conversations.event_codes import EventCode
from conversations.models import Direction, Message, Session
from knowledge_base.models import KBPackage
from prompts_admin.models import PromptOverride, Release, ReleaseStatus
from tests import baker_recipes as recipes

pytestmark = pytest.mark.django_db

ALL_BUILTIN = {"triagem": "builtin", "qualificacao": "builtin", "coleta": "builtin"}


def staff(group: str, username: str) -> User:
    user = baker.make(User, username=username, is_staff=True)
    user.groups.add(Group.objects.get(name=group))
    return user


def client_of(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def support() -> User:
    return staff("Support", "ana")


@pytest.fixture
def editor() -> User:
    return staff("Prompt editors", "carla")


@pytest.fixture
def session() -> Session:
    """A conversation with the bot whose first turn pinned the built-in prompts."""
    session: Session = recipes.session.make(
        state=SessionState.QUALIFYING.value, prompt_versions=ALL_BUILTIN
    )
    return session


def activate(agent: str, content: str) -> tuple[PromptOverride, int]:
    override = PromptOverride.objects.create(agent=agent, content=content, is_active=True)
    return override, override.history.get().history_id


def update(client: Client, session: Session) -> Any:
    return client.post(f"/admin/conversations/session/{session.pk}/prompts-update/")


def flash(response: Any) -> list[tuple[str, str]]:
    return [(m.level_tag, str(m)) for m in get_messages(response.wsgi_request)]


def text_of(page: str) -> str:
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", page)))


def pins(session: Session) -> dict[str, str]:
    session.refresh_from_db()
    return dict(session.prompt_versions)


def events(session: Session) -> list[Message]:
    return list(
        Message.objects.filter(
            session=session,
            direction=Direction.SYSTEM,
            message_type=EventCode.STAFF_PROMPTS_UPDATED,
        )
    )


def test_support_moves_the_conversation_to_the_current_prompts(
    session: Session, support: User
) -> None:
    triagem, history_id = activate("triagem", "Nova triagem.")

    response = update(client_of(support), session)

    assert response.status_code == 303
    assert response["Location"] == (
        f"/admin/conversations/session/{session.pk}/change/#staff-actions"
    )
    assert flash(response) == [("success", "A conversa agora usa os prompts atuais.")]
    current = {**ALL_BUILTIN, "triagem": f"override:{history_id}"}
    assert pins(session) == current
    [event] = events(session)
    assert (event.staff_user, event.json_part) == (
        support,
        {
            "from": ALL_BUILTIN,
            "to": current,
            "overrides": {str(history_id): triagem.pk},
            "release": {"from": None, "to": None},
            "packages": {"from": {}, "to": {}},
        },
    )
    assert [
        (e.user.username, e.action_flag, e.change_message)
        for e in LogEntry.objects.filter(object_id=str(session.pk))
    ] == [("ana", CHANGE, "Passou a conversa para os prompts atuais.")]


def test_the_event_and_the_versions_read_in_portuguese_on_the_page(
    session: Session, support: User
) -> None:
    triagem, history_id = activate("triagem", "Nova triagem.")
    client = client_of(support)
    update(client, session)

    page = text_of(
        client.get(f"/admin/conversations/session/{session.pk}/change/").content.decode()
    )

    assert (
        "Ana passou a conversa para os prompts atuais: Triagem: prompt padrão → prompt "
        f"personalizado #{triagem.pk} (versão {history_id})." in page
    )
    assert (
        f"Versões dos prompts Triagem: prompt personalizado #{triagem.pk} (versão {history_id}) "
        "Qualificação: prompt padrão Coleta: prompt padrão" in page
    )


def test_a_second_submit_changes_nothing(session: Session, support: User) -> None:
    activate("coleta", "Nova coleta.")
    client = client_of(support)
    update(client, session)
    moved = pins(session)

    second = update(client, session)

    assert flash(second)[-1:] == [("info", "A conversa já usa os prompts atuais.")]
    assert pins(session) == moved
    assert len(events(session)) == 1
    assert LogEntry.objects.count() == 1


def test_a_session_not_pinned_yet_is_pinned_to_the_current_prompts(support: User) -> None:
    session = recipes.session.make()

    update(client_of(support), session)

    assert pins(session) == ALL_BUILTIN
    [event] = events(session)
    page = client_of(support).get(f"/admin/conversations/session/{session.pk}/change/")
    assert (
        "Ana passou a conversa para os prompts atuais: Triagem: ainda não fixada → prompt padrão; "
        "Qualificação: ainda não fixada → prompt padrão; Coleta: ainda não fixada → prompt padrão."
        in text_of(page.content.decode())
    )
    assert event.json_part == {
        "from": {},
        "to": ALL_BUILTIN,
        "overrides": {},
        "release": {"from": None, "to": None},
        "packages": {"from": {}, "to": {}},
    }


def test_a_closed_conversation_is_refused(session: Session, support: User) -> None:
    Session.objects.filter(pk=session.pk).update(state=SessionState.CLOSED.value)
    activate("triagem", "Nova triagem.")

    response = update(client_of(support), session)

    assert flash(response) == [("error", "Esta conversa está encerrada.")]
    assert pins(session) == ALL_BUILTIN
    assert events(session) == []


def test_a_prompt_editor_is_refused_with_403(session: Session, editor: User) -> None:
    activate("triagem", "Nova triagem.")

    response = update(client_of(editor), session)

    assert response.status_code == 403
    assert pins(session) == ALL_BUILTIN
    assert (events(session), LogEntry.objects.count()) == ([], 0)


def test_a_get_is_refused_with_405(session: Session, support: User) -> None:
    activate("triagem", "Nova triagem.")

    response = client_of(support).get(f"/admin/conversations/session/{session.pk}/prompts-update/")

    assert response.status_code == 405
    assert pins(session) == ALL_BUILTIN


def test_the_page_says_when_nothing_is_pinned_yet(support: User) -> None:
    session = recipes.session.make()

    page = client_of(support).get(f"/admin/conversations/session/{session.pk}/change/")

    assert (
        "Versões dos prompts Ainda não fixadas: o primeiro turno da conversa fixa os prompts "
        "ativos." in text_of(page.content.decode())
    )


def test_a_version_whose_history_row_is_gone_is_named_by_its_number(support: User) -> None:
    session = recipes.session.make(
        prompt_versions={**ALL_BUILTIN, "coleta": "override:424242", "triagem": ""}
    )

    page = client_of(support).get(f"/admin/conversations/session/{session.pk}/change/")

    assert (
        "Triagem: ainda não fixada Qualificação: prompt padrão Coleta: versão 424242 (sem registro no "
        "histórico)" in text_of(page.content.decode())
    )


# --- The knowledge: the release and the package versions ---------------------------------------


def package(package_id: str, content: str) -> tuple[KBPackage, int]:
    """An active package; the history id it has now."""
    created = KBPackage.objects.create(
        package_id=package_id, title=package_id.title(), description="d", content=content
    )
    return created, created.history.latest("history_id").history_id


def edit(pkg: KBPackage, content: str) -> int:
    pkg.content = content
    pkg.save()
    latest: int = pkg.history.latest("history_id").history_id
    return latest


def knowing(release: Release | None, packages: dict[str, int]) -> Session:
    """A conversation with the bot that pinned the built-in prompts, `release` and `packages`."""
    session: Session = recipes.session.make(
        state=SessionState.QUALIFYING.value,
        prompt_versions=ALL_BUILTIN,
        release=release,
        package_versions=packages,
    )
    return session


def test_the_release_and_the_package_versions_move_to_the_current_ones(support: User) -> None:
    old = Release.objects.create(name="Março", status=ReleaseStatus.SUPERSEDED)
    new = Release.objects.create(name="Abril", status=ReleaseStatus.PUBLISHED)
    agua, agua_first = package("COLETA_AGUA", "Frasco estéril.")
    _, unidades = package("UNIDADES", "Rua A, 1.")
    session = knowing(old, {"COLETA_AGUA": agua_first})
    agua_now = edit(agua, "Frasco estéril de 500 mL.")
    client = client_of(support)

    response = update(client, session)

    # The prompts did not change: the knowledge alone moves the conversation.
    assert flash(response) == [("success", "A conversa agora usa os prompts atuais.")]
    session.refresh_from_db()
    assert (session.prompt_versions, session.release_id, session.package_versions) == (
        ALL_BUILTIN,
        new.pk,
        {"COLETA_AGUA": agua_now, "UNIDADES": unidades},
    )
    [event] = events(session)
    assert event.json_part is not None
    assert (event.json_part["release"], event.json_part["packages"]) == (
        {"from": old.pk, "to": new.pk},
        {
            "from": {"COLETA_AGUA": agua_first},
            "to": {"COLETA_AGUA": agua_now, "UNIDADES": unidades},
        },
    )
    page = text_of(
        client.get(f"/admin/conversations/session/{session.pk}/change/").content.decode()
    )
    assert (
        "Ana passou a conversa para os prompts atuais: pacotes de conhecimento: as versões "
        "ativas agora." in page
    )
    assert f"Coleta: prompt padrão Lançamento #{new.pk} — Abril" in page


def test_a_conversation_on_the_current_knowledge_already_uses_the_current_prompts(
    support: User,
) -> None:
    release = Release.objects.create(name="Abril", status=ReleaseStatus.PUBLISHED)
    _, agua = package("COLETA_AGUA", "Frasco estéril.")
    session = knowing(release, {"COLETA_AGUA": agua})

    response = update(client_of(support), session)

    assert flash(response) == [("info", "A conversa já usa os prompts atuais.")]
    assert events(session) == []


def test_one_package_version_apart_is_enough_to_move_the_conversation(support: User) -> None:
    release = Release.objects.create(name="Abril", status=ReleaseStatus.PUBLISHED)
    agua, before = package("COLETA_AGUA", "Frasco estéril.")
    after = edit(agua, "Frasco estéril de 500 mL.")
    session = knowing(release, {"COLETA_AGUA": before})

    response = update(client_of(support), session)

    assert flash(response) == [("success", "A conversa agora usa os prompts atuais.")]
    session.refresh_from_db()
    assert (session.release_id, session.package_versions) == (release.pk, {"COLETA_AGUA": after})


def test_a_release_no_longer_published_is_left_when_none_is(support: User) -> None:
    old = Release.objects.create(name="Março", status=ReleaseStatus.SUPERSEDED)
    session = recipes.session.make(
        state=SessionState.QUALIFYING.value, prompt_versions=ALL_BUILTIN, release=old
    )

    update(client_of(support), session)

    session.refresh_from_db()
    assert (session.release_id, session.package_versions) == (None, {})


def test_the_button_says_it_moves_the_prompts_and_the_knowledge(
    session: Session, support: User
) -> None:
    page = client_of(support).get(f"/admin/conversations/session/{session.pk}/change/")

    assert (
        'title="A conversa mantém as versões dos prompts e do conhecimento do seu primeiro turno; '
        'este botão a passa para os prompts e o conhecimento atuais.">Usar os prompts atuais'
        in page.content.decode()
    )


def test_the_page_shows_no_release_line_when_the_conversation_pinned_none(
    session: Session, support: User
) -> None:
    page = client_of(support).get(f"/admin/conversations/session/{session.pk}/change/")

    assert "Lançamento #" not in text_of(page.content.decode())


def test_the_release_line_costs_one_query_only_when_the_conversation_pinned_one(
    support: User,
) -> None:
    release = Release.objects.create(name="Abril", status=ReleaseStatus.PUBLISHED)
    without = recipes.session.make(prompt_versions=ALL_BUILTIN)
    with_release = recipes.session.make(
        prompt_versions=ALL_BUILTIN,
        release=release,
        instance=without.instance,
        customer_phone="5511977776666",
    )
    client = client_of(support)
    client.get(f"/admin/conversations/session/{without.pk}/change/")  # warm the caches
    counts = []
    for session in (without, with_release):
        with CaptureQueriesContext(connection) as queries:
            client.get(f"/admin/conversations/session/{session.pk}/change/")
        counts.append(len(queries))

    assert counts[1] - counts[0] == 1
