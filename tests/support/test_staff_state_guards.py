"""The staff actions' state guards with every state written out: take-over from each of the four
bot states and from no other; give-back to each of the four bot states (and, by default, to the
state the session left) and to no other; close from every open state."""

from datetime import UTC, datetime
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import translation
from model_bakery import baker

from conversations.models import Instance, Session
from support.staff_actions import (
    StaffActionRefused,
    session_close,
    session_give_back,
    session_take_over,
)

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 11, 30, 15, 0, tzinfo=UTC)
BOT_STATES = ["TRIAGE", "QUALIFYING", "DATA_COLLECT", "CONFIRM"]


@pytest.fixture
def ana() -> User:
    user: User = baker.make(User, username="ana", is_staff=True)
    return user


def session_in(state: str, **fields: Any) -> Session:
    session: Session = baker.make(
        Session, instance=baker.make(Instance, access_token=""), state=state, **fields
    )
    return session


def state_of(session: Session) -> tuple[str, str]:
    session.refresh_from_db()
    return session.state, session.state_before_handoff


@pytest.mark.parametrize("state", BOT_STATES)
def test_each_bot_state_may_be_taken_over(ana: User, state: str) -> None:
    session = session_in(state)

    outcome = session_take_over(session_id=session.pk, user=ana, now=NOW)

    assert outcome.changed is True
    assert state_of(session) == ("HUMAN", state)


@pytest.mark.parametrize(
    ("state", "label"), [("HUMAN", "Com humano"), ("CLOSED", "Encerrada")], ids=["human", "closed"]
)
def test_no_other_state_may_be_taken_over(ana: User, state: str, label: str) -> None:
    session = session_in(state, assigned_to=baker.make(User, username="bruno"))

    with translation.override("pt-br"), pytest.raises(StaffActionRefused) as refused:
        session_take_over(session_id=session.pk, user=ana, now=NOW)

    assert refused.value.message == (
        f"Só uma conversa com o robô pode ser assumida; esta está no estado {label}."
    )
    assert state_of(session) == (state, "")


@pytest.mark.parametrize("target", BOT_STATES)
def test_a_session_is_given_back_to_any_bot_state_chosen(ana: User, target: str) -> None:
    session = session_in("HUMAN", state_before_handoff="QUALIFYING")

    session_give_back(session_id=session.pk, user=ana, state=target, now=NOW)

    assert state_of(session) == (target, "")


@pytest.mark.parametrize("before", BOT_STATES)
def test_by_default_a_session_goes_back_to_the_state_it_left(ana: User, before: str) -> None:
    session = session_in("HUMAN", state_before_handoff=before)

    session_give_back(session_id=session.pk, user=ana, state="", now=NOW)

    assert state_of(session) == (before, "")


@pytest.mark.parametrize("before", ["HUMAN", "CLOSED", ""])
def test_by_default_a_session_that_left_no_bot_state_goes_back_to_triage(
    ana: User, before: str
) -> None:
    session = session_in("HUMAN", state_before_handoff=before)

    session_give_back(session_id=session.pk, user=ana, state="", now=NOW)

    assert state_of(session) == ("TRIAGE", "")


@pytest.mark.parametrize("state", BOT_STATES)
def test_a_session_the_bot_holds_is_not_given_back(ana: User, state: str) -> None:
    session = session_in(state)

    with translation.override("pt-br"), pytest.raises(StaffActionRefused) as refused:
        session_give_back(session_id=session.pk, user=ana, state="", now=NOW)

    assert refused.value.message == "Esta conversa não está com a equipe agora."
    assert state_of(session) == (state, "")


@pytest.mark.parametrize("state", [*BOT_STATES, "HUMAN"])
def test_every_open_state_may_be_closed(ana: User, state: str) -> None:
    session = session_in(state)

    session_close(session_id=session.pk, user=ana, now=NOW)

    session.refresh_from_db()
    assert (session.state, session.closed_at) == ("CLOSED", NOW)
