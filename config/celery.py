"""The Celery application. Tasks are discovered in each installed app's `tasks` module."""

import os
from logging.config import dictConfig
from typing import Any

from celery import Celery
from celery.signals import setup_logging
from django.conf import settings

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

# Celery's Django fix-up, with Django's connection lifetime (CONN_MAX_AGE) around each task.
app = Celery("lab_attendance", fixups=["config.celery_fixup:fixup"])
# A dict copy of the CELERY_* settings under Celery's lowercase names, read without a namespace:
# cheaper look-ups than the lazy settings, and no deprecated names (see the module).
app.config_from_object("config.celery_settings:CELERY_SETTINGS")
# Pipeline tasks are idempotent: acknowledge after the work, and put a task back when the worker
# running it dies, so a crash never drops a customer's message.
app.conf.task_acks_late = True
app.conf.task_reject_on_worker_lost = True
app.autodiscover_tasks()


@setup_logging.connect
def keep_the_project_logging(**kwargs: Any) -> None:
    """Worker and beat keep settings.LOGGING instead of Celery's own logging setup.

    Without a receiver Celery replaces the root and `celery` handlers with its formatter, and
    library lines and task failures (with their tracebacks) would skip the redacting formatter
    of `config.logging`. Levels then come from LOGGING (`LOG_LEVEL`), not from `--loglevel`.
    """
    dictConfig(settings.LOGGING)
