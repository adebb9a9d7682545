"""Project configuration: settings (the only place that reads the environment), URLs, Celery."""

from config.celery import app as celery_app

__all__ = ["celery_app"]
