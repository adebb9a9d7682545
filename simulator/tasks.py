"""The simulator page's Celery task: ``conversations.simulated_turn(turn_id)`` runs one simulated
turn off the web request (`simulator.simulation.simulated_turn_run`), with the simulator's
dry-run sender whatever the WhatsApp configuration. On the ``turns`` queue, with the turn task's
time limits; eager Celery (the embedded default) runs it inside the page's POST."""

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings

from simulator.simulation import simulated_turn_run


@shared_task(
    name="conversations.simulated_turn",
    soft_time_limit=settings.CELERY_TASK_SOFT_TIME_LIMIT,
    time_limit=settings.CELERY_TASK_TIME_LIMIT,
)
def simulated_turn(turn_id: int) -> None:
    simulated_turn_run(turn_id=turn_id, deadline_errors=(SoftTimeLimitExceeded,))
