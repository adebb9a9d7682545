"""Celery's configuration: every ``CELERY_*`` Django setting, copied into a dict once.

Celery reads its configuration through layered look-ups, and most keys it asks for are ones the
project leaves at Celery's default: on Django's lazy settings object each such miss raises and
catches an AttributeError (twice per key, with and without the ``CELERY_`` prefix), seven keys
per publish — a quarter of the CPU of `apply_async` on the webhook. On a dict a miss is one hash
look-up. Celery imports this module when it first reads its configuration (after Django is set
up), so the copy holds the settings as loaded; Celery settings changed at run time (a test's
``settings`` override) do not reach it — no test does that.
"""

from django.conf import settings

CELERY_SETTINGS = {
    name: getattr(settings, name) for name in dir(settings) if name.startswith("CELERY_")
}
