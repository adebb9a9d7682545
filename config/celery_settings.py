"""Celery's configuration: every ``CELERY_*`` Django setting, copied into a dict once, under
Celery's current lowercase name (``CELERY_TASK_SERIALIZER`` -> ``task_serializer``).

Why a dict: Celery reads its configuration through layered look-ups, and most keys it asks for
are ones the project leaves at Celery's default: on Django's lazy settings object each such miss
raises and catches an AttributeError (twice per key, with and without the ``CELERY_`` prefix),
seven keys per publish — a quarter of the CPU of `apply_async` on the webhook. On a dict a miss
is one hash look-up. Celery imports this module when it first reads its configuration (after
Django is set up), so the copy holds the settings as loaded; Celery settings changed at run time
(a test's ``settings`` override) do not reach it — no test does that.

Why lowercase keys and no namespace: Celery 5 flags every key it finds in its table of pre-4.0
names as deprecated, and several of those old names (``CELERY_TASK_SERIALIZER``,
``CELERY_RESULT_SERIALIZER``, ``CELERY_ACCEPT_CONTENT``, ``CELERY_TIMEZONE``,
``CELERY_RESULT_BACKEND``) are spelled exactly like the Django settings it documents for
``namespace="CELERY"``, so the worker printed five ``CDeprecationWarning``s at start-up
(celery/celery#6366). The Django settings keep their ``CELERY_`` names (they are the
environment's names); the dict Celery reads holds only the new-style names.
"""

from django.conf import settings

PREFIX = "CELERY_"


def celery_key(setting_name: str) -> str:
    """The Celery (4.0+) name of a ``CELERY_*`` Django setting."""
    return setting_name.removeprefix(PREFIX).lower()


CELERY_SETTINGS = {
    celery_key(name): getattr(settings, name) for name in dir(settings) if name.startswith(PREFIX)
}
