"""Replays share the installation: at most REPLAY_MAX_RUNNING runs at once (the others wait
queued and are published when one ends), at most REPLAY_CONCURRENCY model calls in flight for all
of them, and a run that can no longer start ends failed with its reason, never queued for ever.
The slots are database rows (governance/slots.py); the holders here are other runs' slots taken
through the same functions the runs use."""

import threading
import time
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from django.db import connections
from django.utils import timezone

from conversations.models import Instance
from governance.models import ReplayRun, ReplaySlot, ReplaySlotPool, ReplayStatus
from governance.replay import (
    REPLAY_ABANDONED_AFTER,
    REPLAY_START_TIMEOUT,
    ReplayDeps,
    ReplayFilters,
    replay_queue_advance,
    replay_run_execute,
    replay_run_start,
    replay_runs_sweep,
)
from governance.slots import slot_acquire
from governance.tasks import fail_abandoned_replays, replay_run_enqueue
from tests.fakes.openai_server import FakeOpenAIServer
from tests.helpers.recorded_calls import GREETING, conversation, draft, record_turn

LEASE = timedelta(minutes=5)


def record_three(instance: Instance, model: FakeOpenAIServer, capture: Any) -> None:
    for text in ("Oi", "Bom dia", "Olá"):
        record_turn(conversation(instance), text, GREETING, model=model, capture=capture)
    model.reset()


def new_run() -> ReplayRun:
    return replay_run_start(override=draft(), filters=ReplayFilters(), user=None)


def hold(pool: ReplaySlotPool, count: int) -> ReplayRun:
    """`count` slots of `pool` held by another run (running elsewhere)."""
    holder = new_run()
    ReplayRun.objects.filter(pk=holder.pk).update(
        status=ReplayStatus.RUNNING, started_at=timezone.now()
    )
    for _ in range(count):
        assert (
            slot_acquire(pool=pool, cap=count, run_id=holder.pk, now=timezone.now(), lease=LEASE)
            is not None
        )
    return holder


@pytest.mark.django_db
@pytest.mark.parametrize(("held", "status", "calls"), [(1, ReplayStatus.DONE, 3), (2, None, 0)])
def test_a_run_starts_only_while_fewer_than_the_maximum_run(
    instance: Instance,
    model: FakeOpenAIServer,
    settings: Any,
    django_capture_on_commit_callbacks: Any,
    held: int,
    status: ReplayStatus | None,
    calls: int,
) -> None:
    record_three(instance, model, django_capture_on_commit_callbacks)
    for _ in range(calls):
        model.queue_text(GREETING)
    settings.REPLAY_MAX_RUNNING = 2
    hold(ReplaySlotPool.RUN, held)
    run = new_run()
    replay_run_enqueue(run)

    run = replay_run_execute(run_id=run.pk)

    # With both slots taken it waits: queued, no longer dispatched, no model call.
    assert (run.status, run.dispatched_at, run.started_at is None, model.request_count) == (
        status or ReplayStatus.QUEUED,
        None,
        status is None,
        calls,
    )
    assert ReplaySlot.objects.filter(run=run).count() == 0


@pytest.mark.django_db
def test_the_run_that_ends_publishes_the_oldest_waiting_runs_as_slots_free(
    instance: Instance,
    model: FakeOpenAIServer,
    settings: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    record_three(instance, model, django_capture_on_commit_callbacks)
    for _ in range(3):
        model.queue_text(GREETING)
    settings.REPLAY_MAX_RUNNING = 2
    other = hold(ReplaySlotPool.RUN, 1)
    running = new_run()
    oldest, newer = new_run(), new_run()  # waiting for a slot (not dispatched)
    published: list[int] = []

    done = replay_run_execute(run_id=running.pk, dispatch=published.append)

    # Two slots, one still held by `other`: the one freed goes to the oldest waiting run.
    assert (done.status, published) == (ReplayStatus.DONE, [oldest.pk])
    runs = {r.pk: (r.status, r.dispatched_at is not None) for r in ReplayRun.objects.all()}
    assert runs == {
        other.pk: (ReplayStatus.RUNNING, False),
        done.pk: (ReplayStatus.DONE, False),
        oldest.pk: (ReplayStatus.QUEUED, True),
        newer.pk: (ReplayStatus.QUEUED, False),
    }
    assert list(ReplaySlot.objects.values_list("pool", "run_id")) == [("run", other.pk)]
    # A second caller (the sweep) publishes nothing more while the slots are taken or promised.
    assert replay_queue_advance(dispatch=published.append, max_running=1, now=timezone.now()) == []


@pytest.mark.django_db
def test_a_slot_whose_holder_died_is_taken_once_its_lease_expired(
    instance: Instance,
    model: FakeOpenAIServer,
    settings: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    record_three(instance, model, django_capture_on_commit_callbacks)
    for _ in range(3):
        model.queue_text(GREETING)
    settings.REPLAY_MAX_RUNNING = 1
    dead = hold(ReplaySlotPool.RUN, 1)
    ReplaySlot.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    run = new_run()

    run = replay_run_execute(run_id=run.pk)

    assert (run.status, run.calls_done) == (ReplayStatus.DONE, 3)
    assert ReplaySlot.objects.filter(run=dead).count() == 0


@pytest.mark.django_db(transaction=True)
def test_a_run_waits_for_a_call_slot_held_by_other_runs(
    instance: Instance,
    model: FakeOpenAIServer,
    settings: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    record_three(instance, model, django_capture_on_commit_callbacks)
    for _ in range(3):
        model.queue_text(GREETING)
    # Two calls in flight for all replays together: another run's two take them all.
    settings.REPLAY_CONCURRENCY = 2
    other = hold(ReplaySlotPool.CALL, 2)
    run = new_run()
    deps = replace(ReplayDeps.from_settings(), slot_poll_seconds=0.05)
    finished: list[ReplayRun] = []

    def execute() -> None:
        try:
            finished.append(replay_run_execute(run_id=run.pk, deps=deps))
        finally:
            connections.close_all()

    worker = threading.Thread(target=execute)
    worker.start()
    time.sleep(1.0)
    waiting = ReplayRun.objects.get(pk=run.pk)
    calls_while_held = model.request_count
    ReplaySlot.objects.filter(run=other).delete()
    worker.join(timeout=20)

    assert (waiting.status, calls_while_held) == (ReplayStatus.RUNNING, 0)
    [done] = finished
    assert (done.status, done.calls_done, model.request_count) == (ReplayStatus.DONE, 3, 3)
    assert ReplaySlot.objects.count() == 0


@pytest.mark.django_db
def test_an_error_before_the_run_starts_ends_it_failed_saying_so(
    instance: Instance, model: FakeOpenAIServer, caplog: pytest.LogCaptureFixture
) -> None:
    run = new_run()
    # A lease no clock can add: the slot cannot be taken, an error before the run started.
    broken = replace(ReplayDeps.from_settings(), run_lease=timedelta.max)

    run = replay_run_execute(run_id=run.pk, deps=broken)

    assert (run.status, run.detail, run.started_at, run.finished_at is not None) == (
        ReplayStatus.FAILED,
        "O teste não pôde começar: OverflowError",
        None,
        True,
    )
    assert [r.message for r in caplog.records if r.name == "governance.replay"] == [
        "replay_run_start_failed"
    ]
    assert model.request_count == 0


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("published_ago", "status"),
    [
        (REPLAY_START_TIMEOUT - timedelta(seconds=1), ReplayStatus.QUEUED),
        (REPLAY_START_TIMEOUT, ReplayStatus.QUEUED),
        (REPLAY_START_TIMEOUT + timedelta(seconds=1), ReplayStatus.FAILED),
    ],
)
def test_the_sweep_fails_a_run_no_worker_started(
    published_ago: timedelta, status: ReplayStatus
) -> None:
    # No slot is free: the sweep publishes nothing, it only looks at the published run.
    hold(ReplaySlotPool.RUN, 1)
    run = new_run()
    now = timezone.now()
    ReplayRun.objects.filter(pk=run.pk).update(dispatched_at=now - published_ago)

    published: list[int] = []

    failed = replay_runs_sweep(now=now, dispatch=published.append, max_running=1)

    run.refresh_from_db()
    assert (failed, run.status, published) == (
        [run.pk] if status == ReplayStatus.FAILED else [],
        status,
        [],
    )
    if status == ReplayStatus.FAILED:
        assert run.detail == (
            "Nenhum worker o iniciou em 15 minutos (há um worker consumindo a fila replays?); "
            "inicie-o de novo."
        )


@pytest.mark.django_db
def test_the_sweep_publishes_a_waiting_run_when_a_slot_is_free(
    django_capture_on_commit_callbacks: Any, settings: Any
) -> None:
    settings.REPLAY_MAX_RUNNING = 3
    hold(ReplaySlotPool.RUN, 1)
    waiting = new_run()  # its task found no slot: not dispatched
    dispatched = new_run()  # its task is on its way to a worker
    ReplayRun.objects.filter(pk=dispatched.pk).update(dispatched_at=timezone.now())

    # The task's own sweep, its publish captured (not run).
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        assert fail_abandoned_replays.delay().get() == 0

    waiting.refresh_from_db()
    assert (len(callbacks), waiting.dispatched_at is not None) == (1, True)


@pytest.mark.django_db
def test_the_sweep_gives_back_the_slots_of_a_run_whose_worker_died() -> None:
    died = hold(ReplaySlotPool.RUN, 1)
    slot_acquire(pool=ReplaySlotPool.CALL, cap=4, run_id=died.pk, now=timezone.now(), lease=LEASE)
    ReplayRun.objects.filter(pk=died.pk).update(
        status=ReplayStatus.RUNNING,
        started_at=timezone.now() - REPLAY_ABANDONED_AFTER - timedelta(seconds=1),
    )

    assert replay_runs_sweep(now=timezone.now(), dispatch=print, max_running=1) == [died.pk]

    assert ReplaySlot.objects.count() == 0
    assert ReplayRun.objects.get(pk=died.pk).status == ReplayStatus.FAILED
