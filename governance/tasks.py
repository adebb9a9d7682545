"""The replay's Celery tasks, thin: ``governance.replay_run(run_id)`` runs
`governance.replay.replay_run_execute`, on its own queue (``replays``); and
``governance.fail_abandoned_replays`` (beat, every minute) ends FAILED the runs whose worker died
mid-run, which would otherwise show "running" forever, and the queued runs no worker started,
and publishes the queued runs waiting for a free run slot that no ending run published
(`governance.replay.replay_runs_sweep`).

A replay makes up to `REPLAY_MAX_CALLS` model calls: longer than a turn, so the task has its own
time limits (`governance.replay.REPLAY_TIME_LIMIT`), below the broker's visibility timeout. At
the soft limit the run ends FAILED with the results so far.
"""

from uuid import uuid4

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from governance.models import ReplayRun
from governance.replay import (
    REPLAY_SOFT_TIME_LIMIT,
    REPLAY_TIME_LIMIT,
    replay_run_execute,
    replay_runs_sweep,
)


@shared_task(
    name="governance.replay_run",
    soft_time_limit=REPLAY_SOFT_TIME_LIMIT,
    time_limit=REPLAY_TIME_LIMIT,
)
def replay_run(run_id: int) -> str:
    run = replay_run_execute(
        run_id=run_id, deadline_errors=(SoftTimeLimitExceeded,), dispatch=replay_run_dispatch
    )
    return str(run.status)


@shared_task(name="governance.fail_abandoned_replays")
def fail_abandoned_replays() -> int:
    """End FAILED the replay runs left RUNNING by a worker that died and the queued ones no
    worker started, then publish the runs waiting for a free slot; returns how many failed."""
    failed = replay_runs_sweep(
        now=timezone.now(),
        dispatch=replay_run_dispatch,
        max_running=max(1, settings.REPLAY_MAX_RUNNING),
    )
    return len(failed)


def replay_run_dispatch(run_id: int) -> None:
    """Publish the run's task after the current transaction commits (at once outside one)."""
    transaction.on_commit(lambda: replay_run.delay(run_id))


def replay_run_enqueue(run: ReplayRun) -> None:
    """Enqueue a new run after the transaction that created it commits; its task id is kept,
    and it counts as dispatched from now (`governance.replay.stuck_replay_runs_fail`)."""
    task_id = str(uuid4())
    now = timezone.now()
    ReplayRun.objects.filter(pk=run.pk).update(task_id=task_id, dispatched_at=now)
    run.task_id, run.dispatched_at = task_id, now
    transaction.on_commit(lambda: replay_run.apply_async((run.pk,), task_id=task_id))
