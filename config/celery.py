"""The Celery application. Tasks are discovered in each installed app's `tasks` module."""

import os
from logging.config import dictConfig
from typing import Any

from celery import Celery
from celery.concurrency import get_implementation
from celery.concurrency.solo import TaskPool as SoloPool
from celery.concurrency.thread import TaskPool as ThreadPool
from celery.signals import setup_logging, task_postrun, task_prerun, worker_init
from django.conf import settings

from config import task_deadlines

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


@worker_init.connect
def soft_time_limits_in_threads(sender: Any, **kwargs: Any) -> None:
    """Celery applies time limits in the prefork pool only; a threads (or solo) worker gets the
    soft limit from a watchdog thread instead (config/task_deadlines.py)."""
    # Sent before Celery resolves the pool's name ("threads") to its class.
    pool = get_implementation(sender.pool_cls)
    task_deadlines.enabled = issubclass(pool, ThreadPool | SoloPool)


@worker_init.connect
def pool_the_database_connections(**kwargs: Any) -> None:
    """The worker's threads share a bounded PostgreSQL pool (conversations/db_connections.py)."""
    from conversations.db_connections import worker_connection_pool_enable

    worker_connection_pool_enable()


@worker_init.connect
def keep_the_configuration_reads(**kwargs: Any) -> None:
    """The worker reads the runtime settings, overrides and catalog at most every
    WORKER_CONFIG_CACHE_SECONDS (conversations/config_cache.py)."""
    from conversations.config_cache import worker_config_cache_enable

    worker_config_cache_enable(settings.WORKER_CONFIG_CACHE_SECONDS)


@worker_init.connect
def preload_the_model_sdk(**kwargs: Any) -> None:
    """Import the OpenAI SDK (agents.llm imports it lazily, for the web's sake) when the worker
    starts, not in its first turn: a second or more of imports on a busy machine would count
    against that turn's soft time limit (and be paid once per prefork child instead of once)."""
    import openai  # noqa: F401


@task_prerun.connect
def _task_started(sender: Any, task_id: str, **kwargs: Any) -> None:
    task_deadlines.task_started(sender, task_id)


@task_postrun.connect
def _task_ended(**kwargs: Any) -> None:
    task_deadlines.task_ended()
