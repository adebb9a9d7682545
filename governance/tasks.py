"""The replay's Celery tasks, thin: ``governance.replay_run(run_id)`` runs
`governance.replay.replay_run_execute`, on its own queue (``replays``); and
``governance.fail_abandoned_replays`` (beat, every minute) ends FAILED the runs whose worker died
mid-run, which would otherwise show "running" forever, and the queued runs no worker started,
and publishes the queued runs waiting for a free run slot that no ending run published
(`governance.replay.replay_runs_sweep`).

A replay makes up to `REPLAY_MAX_CALLS` model calls: longer than a turn, so the task has its own
time limits (`governance.replay.REPLAY_TIME_LIMIT`), below the broker's visibility timeout. At
the soft limit the run ends FAILED with the results so far.

``governance.prompt_tests_run(override_id, user_id)`` runs the agent's active prompt test cases
against an override's text and stores the run (`governance.test_cases.prompt_tests_run`), on the
replays queue too: its model calls are the same kind of work.

``governance.check_rollout_pauses`` (beat, every `ROLLOUT_PAUSE_CHECK_SECONDS`) pauses the
gradual releases whose candidate is worse than the current version
(`governance.rollout_pause.rollout_pauses_check`).

The sweep also ends FAILED the runs of simulated customers whose worker died
(`governance.replay.abandoned_persona_runs_fail`; their task is `simulator.tasks.persona_run`).
"""

from uuid import uuid4

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from governance.models import ReplayRun
from governance.replay import (
    REPLAY_ABANDONED_AFTER,
    REPLAY_SOFT_TIME_LIMIT,
    REPLAY_TIME_LIMIT,
    ReplayDeps,
    abandoned_persona_runs_fail,
    replay_run_execute,
    replay_runs_sweep,
)
from governance.rollout_pause import rollout_pauses_check
from governance.test_cases import prompt_tests_run
from prompts_admin.models import PromptOverride


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
    now = timezone.now()
    failed = replay_runs_sweep(
        now=now,
        dispatch=replay_run_dispatch,
        max_running=max(1, settings.REPLAY_MAX_RUNNING),
    )
    failed += abandoned_persona_runs_fail(now=now, older_than=REPLAY_ABANDONED_AFTER)
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


@shared_task(
    name="governance.prompt_tests_run",
    soft_time_limit=REPLAY_SOFT_TIME_LIMIT,
    time_limit=REPLAY_TIME_LIMIT,
)
def prompt_tests_run_task(override_id: int, user_id: int | None) -> int | None:
    """The run's id; None when the override is gone."""
    override = PromptOverride.objects.filter(pk=override_id).first()
    if override is None:
        return None
    user = get_user_model().objects.filter(pk=user_id).first() if user_id else None
    run, _report = prompt_tests_run(override=override, deps=ReplayDeps.from_settings(), user=user)
    return run.pk


def prompt_tests_enqueue(*, override_id: int, user_id: int | None) -> None:
    """Enqueue a run of the test cases after the current transaction commits."""
    transaction.on_commit(lambda: prompt_tests_run_task.delay(override_id, user_id))


@shared_task(name="governance.check_rollout_pauses")
def check_rollout_pauses() -> int:
    """Pauses the worse candidates of running gradual releases; how many were paused."""
    return len(rollout_pauses_check())
