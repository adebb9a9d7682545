"""The staff action "Usar os prompts atuais" and the pinned versions on the session page: who may,
what it writes, the double submit, the pt-BR event and page text."""

import html
import re
from typing import Any

import pytest
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.auth.models import Group, User
from django.contrib.messages import get_messages
from django.test import Client
from model_bakery import baker

from agents.states import SessionState
from conversations.event_codes import EventCode
from conversations.models import Direction, Message, Session
from prompts_admin.models import PromptOverride
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
        {"from": ALL_BUILTIN, "to": current, "overrides": {str(history_id): triagem.pk}},
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
    assert event.json_part == {"from": {}, "to": ALL_BUILTIN, "overrides": {}}


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
