"""`conversations.turns.commit`: a draft superseded by a newer message or by staff, a handoff
committed anyway, and a worker that lost its lease writing nothing."""

from typing import Any
from uuid import uuid4

import pytest

from conversations.models import SUPERSEDED, Instance, Lead, Message, Session
from conversations.turns.run import ProcessOutcome, ProcessReport
from tests.helpers.fake_collaborators import NOW
from tests.helpers.pipeline import (
    OPEN_TEXT,
    DuringCall,
    Pipeline,
    S,
    confirming,
    inbound,
    llm_calls,
    make_session,
    outbound,
    pending,
)

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("catalog")]


# --- Superseded drafts -----------------------------------------------------------------------------


def test_a_message_arriving_during_the_model_call_supersedes_the_draft(
    instance: Instance, capture: Any
) -> None:
    session = make_session(instance)
    first = inbound(session, "Oi")
    late: list[Message] = []
    run = Pipeline(
        llm=DuringCall(
            '{"s":1}Olá! Como posso ajudar?',
            '{"s":1}Olá! Claro, vamos falar da análise de água.',
            hooks={0: lambda: late.append(inbound(session, "quero falar de análise de água"))},
        )
    )

    report = run.run(session, capture=capture)

    assert report == ProcessReport(ProcessOutcome.DRAINED, turns=1, superseded=1)
    draft, answer = outbound(session)
    assert (draft.content, draft.error, draft.delivery_status) == (
        "Olá! Como posso ajudar?",
        SUPERSEDED,
        "",
    )
    assert (answer.content, answer.error) == ("Olá! Claro, vamos falar da análise de água.", "")
    assert run.sent == [answer.pk]
    # The second call saw both messages, and not the superseded draft.
    assert [m.content for m in run.llm.calls[1]["messages"] if m.role != "developer"] == [
        "Oi",
        "quero falar de análise de água",
    ]
    assert draft.turn_id != answer.turn_id
    for message in (first, late[0]):
        message.refresh_from_db()
        assert (message.processed_at, message.turn_id) == (NOW, answer.turn_id)


def test_a_superseded_turn_changes_nothing_in_the_session(instance: Instance, capture: Any) -> None:
    session = confirming(instance)
    inbound(session, "Sim")
    run = Pipeline(
        llm=DuringCall(
            '{"s":5}Registrado!',
            '{"s":6}Claro, o que deseja corrigir?',
            hooks={0: lambda: inbound(session, "Não, espera, o e-mail está errado")},
        )
    )

    run.run(session, capture=capture)

    assert not Lead.objects.exists()
    session.refresh_from_db()
    assert (session.state, session.handoff_reason) == ("DATA_COLLECT", "")
    assert [(m.content, m.error) for m in outbound(session)] == [
        ("Registrado!", SUPERSEDED),
        ("Claro, o que deseja corrigir?", ""),
    ]
    assert run.summaries == []


def test_a_handoff_is_committed_even_when_a_message_arrives_meanwhile(
    instance: Instance, capture: Any
) -> None:
    session = make_session(instance)
    inbound(session, "Quero falar com uma pessoa")
    run = Pipeline(
        llm=DuringCall(
            '{"s":98,"motivo":"pedido_cliente"}',
            hooks={0: lambda: inbound(session, "urgente!")},
        )
    )

    report = run.run(session, capture=capture)

    assert report == ProcessReport(ProcessOutcome.DRAINED, turns=2)
    assert len(run.llm.calls) == 1
    session.refresh_from_db()
    assert session.state == "HUMAN"
    assert [m.content for m in outbound(session)] == [OPEN_TEXT]
    assert pending(session) == 0


def test_staff_taking_the_session_during_the_call_discards_the_draft(
    instance: Instance, capture: Any
) -> None:
    session = make_session(instance)
    inbound(session, "Oi")

    def staff_takes_over() -> None:
        Session.objects.filter(pk=session.pk).update(state=S.HUMAN, handoff_reason="staff_takeover")

    run = Pipeline(llm=DuringCall('{"s":1}Olá!', hooks={0: staff_takes_over}))

    run.run(session, capture=capture)

    assert [(m.content, m.error) for m in outbound(session)] == [("Olá!", SUPERSEDED)]
    assert run.sent == []
    assert pending(session) == 0
    assert len(run.llm.calls) == 1


# --- The lease at commit ---------------------------------------------------------------------------


def test_a_worker_that_lost_its_lease_writes_and_sends_nothing(
    instance: Instance, capture: Any
) -> None:
    session = make_session(instance)
    message = inbound(session, "Oi")
    other = uuid4()

    def another_worker_takes_over() -> None:
        Session.objects.filter(pk=session.pk).update(lease_token=other)

    run = Pipeline(llm=DuringCall('{"s":1}Olá!', hooks={0: another_worker_takes_over}))

    report = run.run(session, capture=capture)

    assert report == ProcessReport(ProcessOutcome.LEASE_LOST)
    assert outbound(session) == []
    assert run.sent == []
    message.refresh_from_db()
    assert message.processed_at is None
    session.refresh_from_db()
    assert session.lease_token == other
    # The call itself happened and is recorded: its cost is real.
    assert llm_calls(session) == [("agent", "triagem", "gpt-4o-mini", "ok")]
