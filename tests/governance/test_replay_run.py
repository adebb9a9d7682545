"""A replay run as a whole: cancelled while it runs, an unexpected error, the Celery task."""

import threading
import time
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import pytest
from django.db import connections
from django.utils import timezone

from agents.llm import CallPurpose, ChatMessage, LLMCallResult
from conversations.models import Instance
from governance.models import ReplayRun, ReplayStatus
from governance.replay import (
    REPLAY_ABANDONED_AFTER,
    ReplayDeps,
    ReplayFilters,
    replay_run_cancel,
    replay_run_execute,
    replay_run_start,
)
from governance.tasks import fail_abandoned_replays, replay_run
from tests.fakes.openai_server import FakeOpenAIServer
from tests.helpers.recorded_calls import GREETING, conversation, draft, record_turn


def record_three(instance: Instance, model: FakeOpenAIServer, capture: Any) -> None:
    for text in ("Oi", "Bom dia", "Olá"):
        record_turn(conversation(instance), text, GREETING, model=model, capture=capture)
    model.reset()


@pytest.mark.django_db(transaction=True)
def test_cancel_stops_a_running_run_before_its_next_call(
    instance: Instance, model: FakeOpenAIServer, django_capture_on_commit_callbacks: Any
) -> None:
    record_three(instance, model, django_capture_on_commit_callbacks)
    # The first call takes 0.3 s (the client's timeout is 0.5 s): cancel meanwhile.
    model.queue_text(GREETING, delay=0.3)
    run = replay_run_start(override=draft(), filters=ReplayFilters(), user=None)
    finished: list[ReplayRun] = []

    def execute() -> None:
        try:
            finished.append(replay_run_execute(run_id=run.pk))
        finally:
            connections.close_all()

    worker = threading.Thread(target=execute)
    worker.start()
    deadline = time.monotonic() + 10
    while model.request_count == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert replay_run_cancel(run=run) is True
    worker.join(timeout=20)

    [done] = finished
    assert (done.status, done.calls_selected, done.calls_done, model.request_count) == (
        ReplayStatus.CANCELLED,
        3,
        1,
        1,
    )
    assert done.results.count() == 1


class BrokenLLM:
    """A model client with a bug (not a provider error): the run must say it failed."""

    def chat(
        self,
        *,
        model: str,
        instructions: str,
        messages: Sequence[ChatMessage],
        purpose: CallPurpose,
        cache_key: str = "",
    ) -> LLMCallResult:
        raise RuntimeError("a bug, not a provider error")


@pytest.mark.django_db
def test_an_unexpected_error_ends_the_run_failed_with_a_detail(
    instance: Instance,
    model: FakeOpenAIServer,
    django_capture_on_commit_callbacks: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    record_three(instance, model, django_capture_on_commit_callbacks)
    run = replay_run_start(override=draft(), filters=ReplayFilters(), user=None)

    run = replay_run_execute(run_id=run.pk, deps=ReplayDeps.from_settings(llm=BrokenLLM()))

    assert (run.status, run.detail, run.calls_done, run.finished_at is not None) == (
        ReplayStatus.FAILED,
        "Erro inesperado: RuntimeError",
        0,
        True,
    )
    assert [r.message for r in caplog.records if r.name == "governance.replay"] == [
        "replay_run_failed"
    ]


@pytest.mark.django_db
def test_the_task_runs_the_run_and_a_second_delivery_changes_nothing(
    instance: Instance, model: FakeOpenAIServer, django_capture_on_commit_callbacks: Any
) -> None:
    record_three(instance, model, django_capture_on_commit_callbacks)
    for _ in range(3):
        model.queue_text(GREETING)
    run = replay_run_start(override=draft(), filters=ReplayFilters(), user=None)

    first = replay_run.delay(run.pk).get()
    again = replay_run.delay(run.pk).get()

    assert replay_run.name == "governance.replay_run"
    assert (first, again, model.request_count) == ("done", "done", 3)
    assert ReplayRun.objects.get().results.count() == 3


@pytest.mark.django_db
def test_an_active_override_may_be_replayed_and_the_run_says_so(
    instance: Instance, model: FakeOpenAIServer, django_capture_on_commit_callbacks: Any
) -> None:
    record_three(instance, model, django_capture_on_commit_callbacks)
    model.queue_text(GREETING)
    active = draft(is_active=True)

    run = replay_run_start(override=active, filters=ReplayFilters(last_n=1), user=None)
    run = replay_run_execute(run_id=run.pk)

    assert (run.status, run.detail, run.calls_done) == (
        ReplayStatus.DONE,
        "O prompt personalizado estava ativo quando foi testado.",
        1,
    )


@pytest.mark.django_db
def test_calls_run_concurrently_up_to_the_setting(
    instance: Instance,
    model: FakeOpenAIServer,
    settings: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    record_three(instance, model, django_capture_on_commit_callbacks)
    # The same answer for each: with three at a time, the order they are served in is free.
    for _ in range(3):
        model.queue_text(GREETING, input_tokens=100, output_tokens=10, delay=0.2)
    settings.REPLAY_CONCURRENCY = 3
    run = replay_run_start(override=draft(), filters=ReplayFilters(), user=None)

    run = replay_run_execute(run_id=run.pk)

    assert (
        run.status,
        run.calls_done,
        run.code_changed,
        run.tokens_input,
        model.request_count,
    ) == (
        ReplayStatus.DONE,
        3,
        0,
        300,
        3,
    )
    assert list(run.results.values_list("replayed_code", flat=True)) == [1, 1, 1]


@pytest.mark.django_db
def test_a_run_whose_worker_died_ends_failed_by_the_sweep_with_its_results_kept(
    instance: Instance,
    model: FakeOpenAIServer,
    django_capture_on_commit_callbacks: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    record_three(instance, model, django_capture_on_commit_callbacks)
    for _ in range(3):
        model.queue_text(GREETING)
    done = replay_run_start(override=draft(), filters=ReplayFilters(), user=None)
    replay_run_execute(run_id=done.pk)
    # Two runs a worker left "running": one long past the task's limits, one started recently.
    died = replay_run_start(override=draft(), filters=ReplayFilters(), user=None)
    live = replay_run_start(override=draft(), filters=ReplayFilters(), user=None)
    now = timezone.now()
    ReplayRun.objects.filter(pk=died.pk).update(
        status=ReplayStatus.RUNNING,
        started_at=now - REPLAY_ABANDONED_AFTER - timedelta(seconds=1),
        calls_done=2,
        detail="Já havia uma nota.",
    )
    ReplayRun.objects.filter(pk=live.pk).update(
        status=ReplayStatus.RUNNING, started_at=now - timedelta(minutes=5)
    )

    assert fail_abandoned_replays.delay().get() == 1

    runs = {
        r.pk: (r.status, r.calls_done, r.detail, r.finished_at is not None)
        for r in ReplayRun.objects.all()
    }
    assert runs == {
        done.pk: (ReplayStatus.DONE, 3, "", True),
        died.pk: (
            ReplayStatus.FAILED,
            2,
            "O worker que executava o teste parou; os resultados até aqui foram mantidos.; "
            "Já havia uma nota.",
            True,
        ),
        live.pk: (ReplayStatus.RUNNING, 0, "", False),
    }
    [record] = [r for r in caplog.records if r.message == "replay_run_abandoned"]
    assert vars(record)["run_id"] == died.pk
    # The task redelivered after the sweep finds the run ended and leaves it so.
    assert replay_run.delay(died.pk).get() == "failed"
    assert fail_abandoned_replays.delay().get() == 0
    assert model.request_count == 3
