"""`conversations.turns.run`: whole turns on the database with a fake model — one answer sent
once, the lease (held, expired, drained), the deadline, an unexpected error, the sessions the bot
does not answer, and the fixed number of queries of a turn (DESIGN.md §4, §7, §8)."""

from dataclasses import replace
from datetime import timedelta
from typing import Any
from uuid import uuid4

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agents.states import SessionState
from conversations.models import DeliveryStatus, Instance, LLMCall, Session
from conversations.turns.run import ProcessOutcome, ProcessReport, session_process
from prompts_admin.models import PromptOverride
from tests.helpers.fake_collaborators import NOW
from tests.helpers.pipeline import (
    OPEN_TEXT,
    DuringCall,
    Pipeline,
    S,
    events,
    inbound,
    llm_calls,
    make_session,
    outbound,
    pending,
    pipeline,
)

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("catalog")]


# --- A RESPOND turn ---------------------------------------------------------------------------------


def test_a_respond_turn_sends_the_formatted_answer_once(instance: Instance, capture: Any) -> None:
    session = make_session(instance)
    message = inbound(session, "Oi, bom dia")
    run = pipeline('{"s":1}Olá! Sou a **Lia**. Como posso ajudar?')

    report = run.run(session, capture=capture)

    assert report == ProcessReport(ProcessOutcome.DRAINED, turns=1)
    [reply] = outbound(session)
    assert reply.content == "Olá! Sou a *Lia*. Como posso ajudar?"
    assert (reply.agent, reply.code, reply.action, reply.part_index) == ("triagem", 1, "respond", 0)
    assert (reply.raw_response, reply.json_part) == (
        '{"s":1}Olá! Sou a **Lia**. Como posso ajudar?',
        {"s": 1},
    )
    assert (reply.delivery_status, reply.error) == (DeliveryStatus.PENDING, "")
    message.refresh_from_db()
    assert message.processed_at == NOW
    assert message.turn_id == reply.turn_id
    assert run.sent == [reply.pk]
    assert run.read == [message.pk]
    assert run.summaries == []
    session.refresh_from_db()
    assert (session.state, session.lease_token, session.lease_expires_at) == ("TRIAGE", None, None)
    assert llm_calls(session) == [("agent", "triagem", "gpt-4o-mini", "ok")]
    assert events(session) == []


def test_a_burst_of_messages_is_one_turn_answered_once(instance: Instance, capture: Any) -> None:
    session = make_session(instance)
    # Stored out of order: the turn follows WhatsApp's timestamps.
    third = inbound(session, "análise de água", at=30)
    first = inbound(session, "Oi", at=10)
    second = inbound(session, "queria um orçamento", at=20)
    run = pipeline('{"s":1}Claro! Qual a origem da água?')

    run.run(session, capture=capture)

    assert len(run.llm.calls) == 1
    seen = [m.content for m in run.llm.calls[0]["messages"] if m.role != "developer"]
    assert sorted(seen) == ["Oi", "análise de água", "queria um orçamento"]
    # The newest by WhatsApp timestamp is the turn's message (marked read, linked to the calls).
    assert run.read == [third.pk]
    assert list(LLMCall.objects.values_list("message_id", flat=True)) == [third.pk]
    assert len(outbound(session)) == 1
    assert pending(session) == 0
    for message in (first, second, third):
        message.refresh_from_db()
    assert {m.turn_id for m in (first, second, third)} == {outbound(session)[0].turn_id}


def test_a_long_answer_is_split_into_parts_sent_in_order(instance: Instance, capture: Any) -> None:
    session = make_session(instance)
    inbound(session, "Me conte tudo")
    paragraph = "Texto " * 500  # 3,000 characters
    run = pipeline('{"s":1}' + f"{paragraph.strip()}\n\n{paragraph.strip()}")

    run.run(session, capture=capture)

    parts = outbound(session)
    assert [p.part_index for p in parts] == [0, 1]
    assert [len(p.content) for p in parts] == [2999, 2999]
    assert run.sent == [p.pk for p in parts]
    assert parts[0].raw_response.startswith('{"s":1}Texto')
    assert (parts[1].raw_response, parts[1].json_part) == ("", None)
    assert len({p.turn_id for p in parts}) == 1


# --- Sessions the bot does not answer ----------------------------------------------------------------


@pytest.mark.parametrize("state", [S.HUMAN, S.CLOSED])
def test_human_and_closed_sessions_call_and_send_nothing(
    instance: Instance, capture: Any, state: SessionState
) -> None:
    session = make_session(instance, state)
    message = inbound(session, "Alguém aí?")
    run = pipeline()

    report = run.run(session, capture=capture)

    assert report.outcome is ProcessOutcome.DRAINED
    assert run.llm.calls == []
    assert (outbound(session), run.sent, run.read, run.summaries) == ([], [], [], [])
    message.refresh_from_db()
    assert message.processed_at == NOW
    assert LLMCall.objects.count() == 0


# --- The lease, the deadline -----------------------------------------------------------------------


def test_a_held_lease_makes_the_second_worker_exit(instance: Instance, capture: Any) -> None:
    holder = uuid4()
    session = make_session(
        instance, lease_token=holder, lease_expires_at=NOW + timedelta(minutes=1)
    )
    inbound(session, "Oi")
    run = pipeline()

    report = run.run(session, capture=capture)

    assert report == ProcessReport(ProcessOutcome.BUSY)
    assert run.llm.calls == []
    assert pending(session) == 1
    session.refresh_from_db()
    assert session.lease_token == holder


def test_an_expired_lease_is_taken_over(instance: Instance, capture: Any) -> None:
    session = make_session(
        instance, lease_token=uuid4(), lease_expires_at=NOW - timedelta(seconds=1)
    )
    inbound(session, "Oi")
    run = pipeline('{"s":1}Olá!')

    report = run.run(session, capture=capture)

    assert report == ProcessReport(ProcessOutcome.DRAINED, turns=1)
    assert [m.content for m in outbound(session)] == ["Olá!"]
    session.refresh_from_db()
    assert (session.lease_token, session.lease_expires_at) == (None, None)


@pytest.mark.django_db(transaction=True)
def test_the_holder_drains_messages_that_arrive_after_its_turn(instance: Instance) -> None:
    session = make_session(instance)
    inbound(session, "Oi")
    run = pipeline('{"s":1}Olá!', '{"s":1}Claro!')

    def send_then_receive(message_id: int) -> None:
        # Runs right after the first turn's commit (no test transaction around it here).
        run.sent.append(message_id)
        if len(run.sent) == 1:
            inbound(session, "Tenho uma dúvida")

    deps = replace(run.deps(), send=send_then_receive)

    report = session_process(session_id=session.pk, deps=deps, config=run.config)

    assert report == ProcessReport(ProcessOutcome.DRAINED, turns=2)
    assert [m.content for m in outbound(session)] == ["Olá!", "Claro!"]
    assert run.sent == [m.pk for m in outbound(session)]
    assert pending(session) == 0


class OutOfTime(Exception):
    """Stands for Celery's SoftTimeLimitExceeded."""


def test_the_deadline_ends_the_turn_in_a_timeout_handoff_and_releases_the_lease(
    instance: Instance, capture: Any
) -> None:
    session = make_session(instance)
    message = inbound(session, "Oi")

    def deadline() -> None:
        raise OutOfTime

    run = Pipeline(llm=DuringCall('{"s":1}nunca', hooks={0: deadline}))

    report = run.run(session, capture=capture, deadline_errors=(OutOfTime,))

    assert report == ProcessReport(ProcessOutcome.DRAINED, turns=1)
    session.refresh_from_db()
    assert (session.state, session.handoff_reason, session.handoff_detail) == (
        "HUMAN",
        "llm_timeout",
        "task time limit exceeded",
    )
    assert (session.lease_token, session.lease_expires_at) == (None, None)
    assert [m.content for m in outbound(session)] == [OPEN_TEXT]
    message.refresh_from_db()
    assert message.processed_at == NOW
    assert run.summaries == [session.pk]


def test_an_unexpected_error_releases_the_lease_and_keeps_the_message_pending(
    instance: Instance, capture: Any
) -> None:
    session = make_session(instance)
    inbound(session, "Oi")

    def bug() -> None:
        raise RuntimeError("bug")

    run = Pipeline(llm=DuringCall('{"s":1}Olá', hooks={0: bug}))

    with pytest.raises(RuntimeError, match="bug"):
        run.run(session, capture=capture)

    session.refresh_from_db()
    assert (session.lease_token, pending(session), outbound(session)) == (None, 1, [])


# --- Query counts ----------------------------------------------------------------------------------


# Read once per task and shared by the pipeline and the invoker (`agents.sources.TaskScoped*`):
# runtime settings (2: RuntimeConfig, strategic companies) and the catalog (4: segments, intents,
# services, packages). The pipeline's own: claim the lease (1), the pending messages (1), the
# session with its instance (1), the commit (5: lock the session, look for newer messages, update
# the session, insert the messages, mark the turn's messages processed), and the drain (3: pending
# again, release, look once more). Each agent call: the history (1) and its LLMCall (1), and its
# prompt: a session's first turn reads every agent's active override once, the candidates of a
# gradual release once and the published release once (1 + 1 + 1, what it pins, which its calls
# then use with no other read; the packages' versions it pins come with the catalog); a later turn
# reads the pinned version of an override (1 per agent called), and nothing for a pinned built-in
# prompt.
SHARED_READS = 2 + 4
PIN_READ = 1 + 1 + 1


PIPELINE_QUERIES = 1 + 1 + 1 + 5 + 3
AGENT_CALL_QUERIES = 1 + 1


def _queries_of_one_run(session: Session, run: Pipeline, capture: Any) -> list[str]:
    with CaptureQueriesContext(connection) as queries:
        run.run(session, capture=capture)
    # Savepoints exist only because the test runs inside a transaction.
    return [q["sql"] for q in queries.captured_queries if "SAVEPOINT" not in q["sql"]]


def test_a_respond_turn_runs_a_fixed_number_of_queries(instance: Instance, capture: Any) -> None:
    session = make_session(instance)
    inbound(session, "Oi")
    run = pipeline('{"s":1}Olá!')

    sql = _queries_of_one_run(session, run, capture)

    assert len(sql) == PIPELINE_QUERIES + SHARED_READS + PIN_READ + AGENT_CALL_QUERIES == 22
    assert len(outbound(session)) == 1


def test_a_later_turn_reads_the_pinned_override_and_nothing_for_the_builtin(
    instance: Instance, capture: Any
) -> None:
    override = PromptOverride.objects.create(agent="triagem", content="Oi!", is_active=True)
    version = f"override:{override.history.get().history_id}"
    pinned = {"triagem": version, "qualificacao": "builtin", "coleta": "builtin"}
    session = make_session(instance, prompt_versions=pinned)
    for text in ("Oi", "quero um orçamento"):
        inbound(session, text)
    run = pipeline(
        '{"s":2,"segmento":"AMBIENTAL","intencao":"ORCAMENTO"}', '{"s":1}Qual a origem da água?'
    )

    sql = _queries_of_one_run(session, run, capture)

    # triagem's pinned override (1), qualificacao's built-in prompt (0).
    assert len(sql) == PIPELINE_QUERIES + SHARED_READS + 1 + 2 * AGENT_CALL_QUERIES == 22
    assert [c.prompt_version for c in LLMCall.objects.order_by("id")] == [version, "builtin"]


def test_a_routing_turn_adds_only_the_second_agent_call(instance: Instance, capture: Any) -> None:
    session = make_session(instance)
    for text in ("Oi", "quero um orçamento", "de análise de água"):
        inbound(session, text)
    run = pipeline(
        '{"s":2,"segmento":"AMBIENTAL","intencao":"ORCAMENTO"}', '{"s":1}Qual a origem da água?'
    )

    sql = _queries_of_one_run(session, run, capture)

    # Three messages in the turn cost no more than one; the routing event shares the insert; the
    # second agent's prompt is the version pinned with the first's (no read).
    assert len(sql) == PIPELINE_QUERIES + SHARED_READS + PIN_READ + 2 * AGENT_CALL_QUERIES == 24
    assert len(outbound(session)) == 1
    assert events(session) == [("state_changed", "to_qualification")]
