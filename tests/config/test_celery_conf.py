"""Celery reads the project's CELERY_* settings from a dict copy (config/celery_settings.py)."""

import os
import subprocess
import sys
from pathlib import Path

from django.conf import settings

from config.celery import app
from config.celery_settings import CELERY_SETTINGS

ROOT = Path(__file__).resolve().parents[2]


def test_celery_sees_every_celery_setting_of_the_project() -> None:
    assert sorted(CELERY_SETTINGS) == sorted(n for n in dir(settings) if n.startswith("CELERY_"))
    assert app.conf.task_soft_time_limit == settings.CELERY_TASK_SOFT_TIME_LIMIT
    assert app.conf.task_time_limit == settings.CELERY_TASK_TIME_LIMIT
    assert app.conf.broker_transport_options == settings.CELERY_BROKER_TRANSPORT_OPTIONS
    assert app.conf.beat_schedule == settings.CELERY_BEAT_SCHEDULE
    assert app.conf.task_always_eager is settings.CELERY_TASK_ALWAYS_EAGER
    assert app.conf.worker_prefetch_multiplier == 1


def test_keys_the_project_leaves_alone_keep_celery_s_defaults_and_the_app_s_own() -> None:
    assert app.conf.task_default_queue == "celery"
    assert app.conf.task_serializer == "json"
    assert (app.conf.task_acks_late, app.conf.task_reject_on_worker_lost) == (True, True)


def test_the_worker_keeps_the_project_logging_so_its_lines_are_redacted() -> None:
    # Celery's worker and beat set logging up on start; left alone, they replace the root and
    # `celery` handlers with Celery's own formatter, and library and task-failure lines would
    # skip the redaction. Run in a child process: the setup changes the process' logging.
    script = (
        "import logging, django\n"
        "django.setup()\n"
        "from config.celery import app\n"
        "app.log.setup(loglevel='INFO')\n"
        "logging.getLogger('httpx').warning('token %s', 'EAAGSENTINEL0123456789abcdefXYZ')\n"
        "logging.getLogger('celery.app.trace').error('raised: %s', 'sk-proj-SENTINEL0123456789')\n"
    )
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings_test",
        "PYTHONPATH": str(ROOT),
    }

    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )

    lines = [line.split(" ", 2)[2] for line in result.stderr.splitlines()]
    assert lines == [
        "WARNING httpx token EAA[redacted]",
        "ERROR celery.app.trace raised: sk-[redacted]",
    ]
