"""The replay's Celery tasks, thin: ``governance.replay_run(run_id)`` runs
`governance.replay.replay_run_execute`; ``governance.fail_abandoned_replays`` (beat, every 5
minutes) ends FAILED the runs whose worker died mid-run (`abandoned_replay_runs_fail`), which
would otherwise show "running" forever.

A replay makes up to `REPLAY_MAX_CALLS` model calls, `REPLAY_CONCURRENCY` at a time: longer than
a turn, so the task has its own time limits, below the broker's visibility timeout (a longer
task would be delivered twice). At the soft limit the run ends FAILED with the results so far.
"""

from datetime import timedelta
from uuid import uuid4

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from governance.models import ReplayRun
from governance.replay import abandoned_replay_runs_fail, replay_run_execute

_VISIBILITY = int(settings.CELERY_BROKER_TRANSPORT_OPTIONS.get("visibility_timeout", 600))
REPLAY_TIME_LIMIT = max(_VISIBILITY - 60, settings.CELERY_TASK_TIME_LIMIT)
REPLAY_SOFT_TIME_LIMIT = REPLAY_TIME_LIMIT - 30
# Past the hard limit, with a margin for the worker's clock and start: no task runs the run now.
REPLAY_ABANDONED_AFTER = timedelta(seconds=REPLAY_TIME_LIMIT + 60)


@shared_task(
    name="governance.replay_run",
    soft_time_limit=REPLAY_SOFT_TIME_LIMIT,
    time_limit=REPLAY_TIME_LIMIT,
)
def replay_run(run_id: int) -> str:
    run = replay_run_execute(run_id=run_id, deadline_errors=(SoftTimeLimitExceeded,))
    return str(run.status)


@shared_task(name="governance.fail_abandoned_replays")
def fail_abandoned_replays() -> int:
    """End FAILED the replay runs left RUNNING by a worker that died; returns how many."""
    return len(abandoned_replay_runs_fail(now=timezone.now(), older_than=REPLAY_ABANDONED_AFTER))


def replay_run_enqueue(run: ReplayRun) -> None:
    """Enqueue the run after the transaction that created it commits; its task id is kept."""
    task_id = str(uuid4())
    ReplayRun.objects.filter(pk=run.pk).update(task_id=task_id)
    run.task_id = task_id
    transaction.on_commit(lambda: replay_run.apply_async((run.pk,), task_id=task_id))
