"""The prompt preview reads sessions only through the source the conversations app registers
(docs/architecture.md, Layers): prompts_admin imports nothing of conversations.

No database here: pytest-django blocks it, so a preview that still read a session itself fails.
"""

from dataclasses import replace
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.http import Http404

from agents.invoker import AgentInvoker
from agents.masking import Masker, known_values
from agents.sources import HistoryEntry, OverrideTemplate
from agents.states import AgentName, SessionState
from conversations.prompt_preview import DatabasePreviewSessionSource
from prompts_admin import preview
from prompts_admin.preview import PreviewSession, prompt_preview, sample_session
from tests.helpers.fake_collaborators import (
    INSTANCE,
    FakeHistorySource,
    FakePromptSource,
    make_invoker,
    make_session,
)

SESSION = make_session(AgentName.COLETA)  # session 7, Marina, a water sample
SAID = "Sou a Marina, meu número é 5519987654321"


class FakePreviewSessions:
    """The source as plain data: one session, and no permissions to ask."""

    def __init__(self) -> None:
        self.reads: list[tuple[int, bool]] = []
        self.context = SESSION

    def may_pick_session(self, user: Any) -> bool:
        return True

    def may_view_personal_data(self, user: Any) -> bool:
        return False

    def sample_instance(self) -> None:
        return None

    def session(self, session_id: int, *, mask_personal_data: bool) -> PreviewSession | None:
        self.reads.append((session_id, mask_personal_data))
        if session_id != SESSION.session_id:
            return None
        masker = Masker(
            known_values(
                customer_name=SESSION.customer_name,
                customer_phone=SESSION.customer_phone,
                data=[dict(SESSION.registration_data)],
            )
        )
        return PreviewSession(context=self.context, masker=masker if mask_personal_data else None)

    def recent_sessions(self, limit: int, *, mask_personal_data: bool) -> list[tuple[int, str]]:
        return []

    def invoker(self) -> AgentInvoker:
        history = FakeHistorySource([HistoryEntry(SESSION.session_id, "INBOUND", SAID)])
        return make_invoker(history=history)


def test_a_masked_preview_is_built_from_what_the_source_read() -> None:
    sessions = FakePreviewSessions()

    shown = prompt_preview(
        agent=AgentName.COLETA,
        content=None,
        session_id=7,
        sessions=sessions,
        invoker=sessions.invoker(),
        mask_personal_data=True,
    )

    assert sessions.reads == [(7, True)]
    assert shown.session.customer_name == "M***"
    assert shown.session.registration_data == {"nome": "M*** S***"}
    assert shown.stage_changed is False
    assert "- Telefone do WhatsApp: +*************." in shown.prepared.context
    assert "Marina" not in shown.prepared.instructions + shown.prepared.context
    assert [m.content for m in shown.prepared.messages] == [
        "Sou a M***, meu número é *************"
    ]


def test_an_unmasked_preview_at_another_agent_shows_the_session_at_its_first_stage() -> None:
    sessions = FakePreviewSessions()

    shown = prompt_preview(
        agent=AgentName.TRIAGEM,
        content=None,
        session_id=7,
        sessions=sessions,
        invoker=sessions.invoker(),
    )

    assert sessions.reads == [(7, False)]
    assert shown.session.customer_name == "Marina"
    assert shown.session.state is SessionState.TRIAGE
    assert shown.stage_changed is True
    assert [m.content for m in shown.prepared.messages] == [SAID]


def test_the_preview_shows_the_active_prompt_not_the_sessions_pinned_version() -> None:
    sessions = FakePreviewSessions()
    active = OverrideTemplate("Coleta ativa de {{ agent_name }}.", "override:30")
    pinned = replace(
        SESSION,
        prompt_versions={"triagem": "builtin", "qualificacao": "builtin", "coleta": "builtin"},
    )
    sessions.context = pinned
    invoker = make_invoker(prompts=FakePromptSource(overrides={AgentName.COLETA: active}))

    shown = prompt_preview(
        agent=AgentName.COLETA, content=None, session_id=7, sessions=sessions, invoker=invoker
    )

    assert shown.prepared.prompt_version == "override:30"
    assert shown.prepared.instructions.startswith("Coleta ativa de Lia.")


def test_a_session_the_source_does_not_know_is_404() -> None:
    sessions = FakePreviewSessions()

    with pytest.raises(Http404):
        prompt_preview(
            agent=AgentName.COLETA,
            content=None,
            session_id=8,
            sessions=sessions,
            invoker=sessions.invoker(),
        )
    assert sessions.reads == [(8, False)]


def test_the_sample_speaks_for_the_instance_it_is_given() -> None:
    assert sample_session(AgentName.TRIAGEM, INSTANCE).instance == INSTANCE
    assert sample_session(AgentName.TRIAGEM, None).instance.name == "Instância de exemplo"


def test_the_conversations_app_registers_its_source_when_ready() -> None:
    assert isinstance(preview.preview_session_source(), DatabasePreviewSessionSource)


def test_without_a_registered_source_the_preview_says_what_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(preview, "_session_source", None)

    with pytest.raises(ImproperlyConfigured, match="conversations app"):
        preview.preview_session_source()
