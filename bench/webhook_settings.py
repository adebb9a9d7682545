"""Settings of the webhook benchmark: the project's own, plus two comparison views.

Used by `bench/webhook.py` (``DJANGO_SETTINGS_MODULE=webhook_settings`` with ``bench/`` on the
Python path); the environment supplies DATABASE_URL, CELERY_BROKER_URL and the secrets.
"""

from config.settings import *  # noqa: F403

ROOT_URLCONF = "webhook_urls"
DEBUG = False
SECURE_SSL_REDIRECT = False  # plain HTTP on 127.0.0.1
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
