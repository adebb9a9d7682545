"""Staff take a conversation over while a turn is waiting for the model: the turn's answer is never
sent, and the customer's message is not lost.

The turn's commit re-reads the session under its row lock; it finds the state changed (HUMAN) and
stores the model's draft with ``error="superseded"``. The take-over marked the customer's pending
message processed (staff read it on the page), so the worker finds nothing left and releases the
lease: the message stays in the transcript for the human, answered by nobody but them.
"""

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.db import connection
from django.test import Client
from django.utils import timezone
from model_bakery import baker
from pytest_django import DjangoCaptureOnCommitCallbacks

from agents.llm import OpenAIClient
from conversations.models import SUPERSEDED, Direction, LLMCall, Message
from conversations.turns.run import ProcessOutcome, ProcessReport, session_process
from conversations.turns.tasks import build_pipeline_deps
from support.staff_actions import session_take_over
from tests.fakes.graph_server import FakeGraphAPI
from tests.fakes.openai_server import FakeOpenAIServer
from tests.helpers.conversation_rows import ensure_staff_groups
from tests.helpers.fake_collaborators import FakeLLM
from tests.helpers.pipeline import Pipeline, inbound, make_instance, make_session
from tests.helpers.processes import wait_for

pytestmark = pytest.mark.usefixtures("catalog")

ANSWER = '{"s":1}Olá! Qual análise você precisa?'


def support_user() -> User:
    ensure_staff_groups()
    user = baker.make(User, username="ana", is_staff=True)
    user.groups.add(Group.objects.get(name="Support"))
    return user


def draft_and_outbound(session: Any) -> list[tuple[str, str, int | None]]:
    return [
        (m.content, m.error, m.staff_user_id)
        for m in Message.objects.filter(session=session, direction=Direction.OUTBOUND)
    ]


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_turn_waiting_for_a_slow_model_sends_nothing_after_staff_take_over(
    fake_openai: FakeOpenAIServer, fake_graph: FakeGraphAPI
) -> None:
    session = make_session(make_instance(), last_inbound_at=timezone.now())
    message = inbound(session, "Oi, quero um orçamento")
    user = support_user()
    fake_openai.queue_text(ANSWER, delay=1.5)
    llm = OpenAIClient(api_key="k", base_url=fake_openai.base_url, timeout=10, retry_max=0)
    deps = build_pipeline_deps(llm=llm)
    config = Pipeline(llm=FakeLLM()).config

    def turn() -> ProcessReport:
        try:
            return session_process(session_id=session.pk, deps=deps, config=config)
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=1) as pool:
        worker = pool.submit(turn)
        wait_for(lambda: fake_openai.request_count == 1, timeout=10, what="the model call")
        client = Client()
        client.force_login(user)
        response = client.post(f"/admin/conversations/session/{session.pk}/take-over/")
        report = worker.result(timeout=30)

    assert response.status_code == 303
    assert report == ProcessReport(ProcessOutcome.DRAINED, turns=0, superseded=1)
    session.refresh_from_db()
    assert (session.state, session.assigned_to_id) == ("HUMAN", user.pk)
    assert draft_and_outbound(session) == [("Olá! Qual análise você precisa?", SUPERSEDED, None)]
    assert fake_graph.sends == []
    assert LLMCall.objects.filter(session=session).count() == 1
    message.refresh_from_db()
    assert message.processed_at is not None
    # Nobody holds the session any more: the next message is the human's to answer.
    assert (session.lease_token, session.lease_expires_at) == (None, None)


class TakeOverDuringTheCall(FakeLLM):
    """A model whose first call is answered only after staff took the session over."""

    def __init__(self, *answers: str, session_id: int, user: User) -> None:
        super().__init__(*answers)
        self.session_id = session_id
        self.user = user

    def chat(self, **kwargs: Any) -> Any:
        if not self.calls:
            session_take_over(session_id=self.session_id, user=self.user, now=timezone.now())
        return super().chat(**kwargs)


@pytest.mark.django_db
def test_take_over_during_the_model_call_supersedes_the_draft(
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    # The same race on any database, in one thread: the take-over commits inside the model call.
    session = make_session(make_instance(), last_inbound_at=timezone.now())
    message = inbound(session, "Oi, quero um orçamento")
    run = Pipeline(llm=TakeOverDuringTheCall(ANSWER, session_id=session.pk, user=support_user()))

    report = run.run(session, capture=django_capture_on_commit_callbacks)

    assert report == ProcessReport(ProcessOutcome.DRAINED, turns=0, superseded=1)
    assert run.sent == []
    assert draft_and_outbound(session) == [("Olá! Qual análise você precisa?", SUPERSEDED, None)]
    message.refresh_from_db()
    assert message.processed_at is not None
