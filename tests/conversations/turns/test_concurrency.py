"""The lease under real concurrency, on PostgreSQL: workers are threads with their own
connections, and the database decides who wins (no test transaction around them)."""

import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from conversations.lease import STALLED_PENDING_GRACE, lease_claim, stalled_sessions_requeue
from conversations.models import SUPERSEDED, Session
from conversations.turns.run import ProcessOutcome, ProcessReport, session_process
from tests.helpers.fake_collaborators import FakeLLM
from tests.helpers.pipeline import (
    Pipeline,
    inbound,
    make_instance,
    make_session,
    outbound,
    pending,
)

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("catalog"),
]


def in_thread(work: Callable[[], Any]) -> Callable[[], Any]:
    """Run `work` as a worker would: its own connection, closed at the end."""

    def run() -> Any:
        try:
            return work()
        finally:
            connection.close()

    return run


class GatedLLM(FakeLLM):
    """A FakeLLM whose first call signals `thinking` and waits for `proceed` (a slow model)."""

    def __init__(self, *answers: str) -> None:
        super().__init__(*answers)
        self.thinking = threading.Event()
        self.proceed = threading.Event()

    def chat(self, **kwargs: Any) -> Any:
        if not self.calls:
            self.thinking.set()
            assert self.proceed.wait(timeout=10), "the test never let the model answer"
        return super().chat(**kwargs)


def test_two_concurrent_workers_on_one_session_make_one_turn() -> None:
    session = make_session(make_instance())
    inbound(session, "Oi")
    inbound(session, "tudo bem?")
    llm = GatedLLM('{"s":1}Olá! Tudo ótimo, e você?')
    run = Pipeline(llm=llm)
    deps = run.deps()
    start = threading.Barrier(2)

    def worker() -> ProcessReport:
        start.wait(timeout=10)
        return session_process(session_id=session.pk, deps=deps, config=run.config)

    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = [pool.submit(in_thread(worker)) for _ in range(2)]
        assert llm.thinking.wait(timeout=10)
        # One worker holds the lease and waits inside the model call; the other must give up
        # before the model answers.
        done, _ = wait(futures, timeout=10, return_when=FIRST_COMPLETED)
        assert [f.result() for f in done] == [ProcessReport(ProcessOutcome.BUSY)]
        llm.proceed.set()
        reports = sorted((f.result(timeout=20) for f in futures), key=lambda r: r.outcome)

    assert reports == [
        ProcessReport(ProcessOutcome.BUSY),
        ProcessReport(ProcessOutcome.DRAINED, turns=1),
    ]
    assert len(run.llm.calls) == 1
    assert [m.content for m in outbound(session)] == ["Olá! Tudo ótimo, e você?"]
    assert run.sent == [m.pk for m in outbound(session)]
    assert pending(session) == 0
    session.refresh_from_db()
    assert session.lease_token is None


def test_a_message_arriving_during_the_model_call_supersedes_the_draft() -> None:
    session = make_session(make_instance())
    inbound(session, "Oi")
    llm = GatedLLM(
        '{"s":1}Olá! Como posso ajudar?',
        '{"s":1}Olá! Posso sim ajudar com a análise de água.',
    )
    run = Pipeline(llm=llm)
    deps = run.deps()

    with ThreadPoolExecutor(max_workers=1) as pool:
        holder = pool.submit(
            in_thread(lambda: session_process(session_id=session.pk, deps=deps, config=run.config))
        )
        assert llm.thinking.wait(timeout=10)
        # The webhook stores the new message and enqueues a turn: the lease is taken, it exits.
        inbound(session, "quero analisar água")
        assert session_process(
            session_id=session.pk, deps=deps, config=run.config
        ) == ProcessReport(ProcessOutcome.BUSY)
        llm.proceed.set()
        report = holder.result(timeout=20)

    assert report == ProcessReport(ProcessOutcome.DRAINED, turns=1, superseded=1)
    draft, answer = outbound(session)
    assert (draft.content, draft.error) == ("Olá! Como posso ajudar?", SUPERSEDED)
    assert (answer.content, answer.error) == (
        "Olá! Posso sim ajudar com a análise de água.",
        "",
    )
    assert run.sent == [answer.pk]
    # The answer that was sent saw both messages (and not the draft).
    history = [m.content for m in run.llm.calls[1]["messages"] if m.role != "developer"]
    assert history == ["Oi", "quero analisar água"]
    assert pending(session) == 0


def test_many_workers_and_a_burst_answer_each_message_exactly_once() -> None:
    session = make_session(make_instance())
    messages = [inbound(session, f"mensagem {n}") for n in range(3)]
    run = Pipeline(llm=FakeLLM(*['{"s":1}Resposta'] * 10))
    deps = run.deps()
    start = threading.Barrier(6)

    def worker() -> ProcessReport:
        start.wait(timeout=10)
        return session_process(session_id=session.pk, deps=deps, config=run.config)

    with ThreadPoolExecutor(max_workers=6) as pool:
        reports = [f.result(timeout=30) for f in [pool.submit(in_thread(worker)) for _ in range(6)]]

    # The first holder took the whole burst as one turn; everyone else found the lease taken or
    # nothing left to do.
    assert sum(r.turns for r in reports) == len(outbound(session)) == len(run.llm.calls) == 1
    assert pending(session) == 0
    for message in messages:
        message.refresh_from_db()
    # Every message belongs to exactly one answered turn.
    turns = {m.turn_id for m in outbound(session)}
    assert {m.turn_id for m in messages} <= turns
    assert Session.objects.get(pk=session.pk).lease_token is None


def test_a_lease_left_by_a_dead_worker_is_taken_over_by_the_periodic_task() -> None:
    session = make_session(make_instance())
    inbound(session, "Oi, alguém aí?")
    # A worker claimed the turn and died (killed, no `finally`): its lease stays until it expires.
    dead = in_thread(
        lambda: lease_claim(session_id=session.pk, now=timezone.now(), ttl=timedelta(seconds=1))
    )
    with ThreadPoolExecutor(max_workers=1) as pool:
        assert pool.submit(dead).result(timeout=10) is not None
    run = Pipeline(llm=FakeLLM('{"s":1}Olá! Estou aqui.'), clock=timezone.now)
    deps = run.deps()

    def enqueue(session_id: int) -> None:
        session_process(session_id=session_id, deps=deps, config=run.config)

    # Before the expiry the periodic task leaves it alone (the worker may still be alive) ...
    assert (
        stalled_sessions_requeue(now=timezone.now(), grace=STALLED_PENDING_GRACE, enqueue=enqueue)
        == []
    )
    time.sleep(1.1)
    # ... after it, the turn is run again, once.
    assert stalled_sessions_requeue(
        now=timezone.now(), grace=STALLED_PENDING_GRACE, enqueue=enqueue
    ) == [session.pk]
    assert (
        stalled_sessions_requeue(now=timezone.now(), grace=STALLED_PENDING_GRACE, enqueue=enqueue)
        == []
    )

    assert len(run.llm.calls) == 1
    assert [m.content for m in outbound(session)] == ["Olá! Estou aqui."]
    assert run.sent == [m.pk for m in outbound(session)]
    assert pending(session) == 0
