"""The replay's Celery task, thin: ``governance.replay_run(run_id)`` runs
`governance.replay.replay_run_execute`.

A replay makes up to `REPLAY_MAX_CALLS` model calls, `REPLAY_CONCURRENCY` at a time: longer than
a turn, so the task has its own time limits, below the broker's visibility timeout (a longer
task would be delivered twice). At the soft limit the run ends FAILED with the results so far.
"""

from uuid import uuid4

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import transaction

from governance.models import ReplayRun
from governance.replay import replay_run_execute

_VISIBILITY = int(settings.CELERY_BROKER_TRANSPORT_OPTIONS.get("visibility_timeout", 600))
REPLAY_TIME_LIMIT = max(_VISIBILITY - 60, settings.CELERY_TASK_TIME_LIMIT)
REPLAY_SOFT_TIME_LIMIT = REPLAY_TIME_LIMIT - 30


@shared_task(
    name="governance.replay_run",
    soft_time_limit=REPLAY_SOFT_TIME_LIMIT,
    time_limit=REPLAY_TIME_LIMIT,
)
def replay_run(run_id: int) -> str:
    run = replay_run_execute(run_id=run_id, deadline_errors=(SoftTimeLimitExceeded,))
    return str(run.status)


def replay_run_enqueue(run: ReplayRun) -> None:
    """Enqueue the run after the transaction that created it commits; its task id is kept."""
    task_id = str(uuid4())
    ReplayRun.objects.filter(pk=run.pk).update(task_id=task_id)
    run.task_id = task_id
    transaction.on_commit(lambda: replay_run.apply_async((run.pk,), task_id=task_id))
