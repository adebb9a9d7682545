"""Celery reads the project's CELERY_* settings from a dict copy under Celery's lowercase names
(config/celery_settings.py), so no deprecated setting name reaches it."""

import os
import subprocess
import sys
import warnings
from pathlib import Path
from uuid import uuid4

import pytest
from celery import Celery
from celery.exceptions import CDeprecationWarning
from django.conf import settings

from config.celery import app
from config.celery_settings import CELERY_SETTINGS, celery_key
from tests.helpers.broker import IsolatedBroker
from tests.helpers.processes import (
    celery_worker_command,
    project_env,
    start,
    stop,
    wait_for,
)

ROOT = Path(__file__).resolve().parents[2]


def test_celery_sees_every_celery_setting_of_the_project_under_its_lowercase_name() -> None:
    assert sorted(CELERY_SETTINGS) == sorted(
        name.removeprefix("CELERY_").lower() for name in dir(settings) if name.startswith("CELERY_")
    )
    assert app.conf.task_soft_time_limit == settings.CELERY_TASK_SOFT_TIME_LIMIT
    assert app.conf.task_time_limit == settings.CELERY_TASK_TIME_LIMIT
    assert app.conf.broker_transport_options == settings.CELERY_BROKER_TRANSPORT_OPTIONS
    assert app.conf.beat_schedule == settings.CELERY_BEAT_SCHEDULE
    assert app.conf.task_always_eager is settings.CELERY_TASK_ALWAYS_EAGER
    assert app.conf.task_eager_propagates is settings.CELERY_TASK_EAGER_PROPAGATES
    assert app.conf.task_ignore_result is settings.CELERY_TASK_IGNORE_RESULT
    assert app.conf.accept_content == ["json"]
    assert app.conf.result_serializer == "json"
    assert str(app.conf.timezone) == settings.TIME_ZONE
    assert app.conf.broker_connection_retry_on_startup is True
    assert app.conf.worker_prefetch_multiplier == 1


@pytest.mark.parametrize(
    ("setting", "key"),
    [
        ("CELERY_TASK_SERIALIZER", "task_serializer"),
        ("CELERY_ACCEPT_CONTENT", "accept_content"),
        ("CELERY_TIMEZONE", "timezone"),
        ("CELERY_BROKER_TRANSPORT_OPTIONS", "broker_transport_options"),
        ("CELERY_BEAT_SCHEDULE", "beat_schedule"),
    ],
)
def test_a_django_setting_name_becomes_celery_s_current_name(setting: str, key: str) -> None:
    assert celery_key(setting) == key


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


def test_loading_the_configuration_warns_of_no_deprecated_setting() -> None:
    """What the worker does at start-up (`maybe_warn_deprecated_settings`), with Celery's
    deprecation warnings turned into errors, on an app configured exactly as config/celery.py."""
    fresh = Celery("lab_attendance", set_as_current=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CDeprecationWarning)
        fresh.config_from_object("config.celery_settings:CELERY_SETTINGS")
        assert fresh.conf.task_serializer == "json"
        # celery-types declares no return value; Celery returns whether it warned.
        assert fresh.conf.maybe_warn_deprecated_settings() is False  # type: ignore[func-returns-value]
        assert app.conf.maybe_warn_deprecated_settings() is False  # type: ignore[func-returns-value]
    assert fresh.conf.deprecated_settings == set()


@pytest.mark.redis
@pytest.mark.slow
def test_a_real_worker_starts_without_a_deprecation_warning(
    tmp_path: Path, isolated_broker: IsolatedBroker
) -> None:
    log = tmp_path / "worker.log"
    # No database is touched by a worker that only starts: any URL will do.
    env = project_env(broker=isolated_broker, DATABASE_URL="sqlite:////nonexistent/never-opened.db")
    worker = start(
        celery_worker_command(f"celery-conf-{uuid4().hex[:8]}@localhost"), env=env, log=log
    )
    try:
        # "ready." is logged once the worker has passed its start-up (where Celery warns) and
        # connected to the broker. (A ping from this process would go to the broker its
        # CELERY_BROKER_URL names, which need not be this worker's.)
        wait_for(lambda: " ready." in log.read_text(), timeout=60, what="the worker to be ready")
    finally:
        stop(worker)
    output = log.read_text()
    assert "CDeprecationWarning" not in output
    assert "setting is deprecated" not in output
