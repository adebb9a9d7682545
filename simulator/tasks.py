"""The simulator page's Celery task: ``conversations.simulated_turn(turn_id)`` runs one simulated
turn off the web request (`simulator.simulation.simulated_turn_run`), with the simulator's
dry-run sender whatever the WhatsApp configuration. On the ``turns`` queue, with the turn task's
time limits; eager Celery (the embedded default) runs it inside the page's POST.

``governance.persona_run(run_id)`` plays a run of simulated customers
(`simulator.personas.persona_run_execute`) on the ``replays`` queue, with the replay's time
limits: its model calls are a replay's kind of work, under the replay's caps."""

from uuid import uuid4

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from governance.models import PersonaRun, ReplayStatus
from governance.replay import REPLAY_SOFT_TIME_LIMIT, REPLAY_START_TIMEOUT, REPLAY_TIME_LIMIT
from simulator.personas import persona_run_execute, persona_run_fail_waiting
from simulator.simulation import simulated_turn_run


@shared_task(
    name="conversations.simulated_turn",
    soft_time_limit=settings.CELERY_TASK_SOFT_TIME_LIMIT,
    time_limit=settings.CELERY_TASK_TIME_LIMIT,
)
def simulated_turn(turn_id: int) -> None:
    simulated_turn_run(turn_id=turn_id, deadline_errors=(SoftTimeLimitExceeded,))


# How often a persona run that found no free run slot is published again.
PERSONA_RUN_RETRY_SECONDS = 15


@shared_task(
    name="governance.persona_run",
    soft_time_limit=REPLAY_SOFT_TIME_LIMIT,
    time_limit=REPLAY_TIME_LIMIT,
)
def persona_run(run_id: int) -> str:
    """Play the run's simulated customers; a run that waits for a run slot is published again
    in a few seconds, and fails once it has waited `REPLAY_START_TIMEOUT`."""
    run = persona_run_execute(run_id=run_id, deadline_errors=(SoftTimeLimitExceeded,))
    if run.status == ReplayStatus.QUEUED:
        if persona_run_fail_waiting(
            run_id=run_id, now=timezone.now(), older_than=REPLAY_START_TIMEOUT
        ):
            return str(ReplayStatus.FAILED)
        persona_run.apply_async((run_id,), countdown=PERSONA_RUN_RETRY_SECONDS)
    return str(run.status)


def persona_run_enqueue(run: PersonaRun) -> None:
    """Enqueue a new run after the transaction that created it commits, with the task id it
    was started with (the start form's token) or a new one, kept on the run."""
    task_id = run.task_id or str(uuid4())
    PersonaRun.objects.filter(pk=run.pk).update(task_id=task_id)
    run.task_id = task_id
    transaction.on_commit(lambda: persona_run.apply_async((run.pk,), task_id=task_id))
