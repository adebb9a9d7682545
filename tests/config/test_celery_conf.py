"""Celery reads the project's CELERY_* settings from a dict copy (config/celery_settings.py)."""

from django.conf import settings

from config.celery import app
from config.celery_settings import CELERY_SETTINGS


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
