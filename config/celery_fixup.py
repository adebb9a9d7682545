"""Celery's Django fix-up, with Django's own connection lifetime around each task.

Celery's fix-up (`celery.fixups.django`) closes every database connection before and after each
task (Celery 5.7 went back to an unconditional ``close()``, celery/celery#9824), so a worker
opened a new PostgreSQL connection for every task and ignored ``CONN_MAX_AGE``: three
connections per customer turn (the turn, its send, its mark-read), about a fifth of the worker's
CPU per turn (bench/worker_cpu.py). This fix-up keeps everything else of Celery's (django.setup,
the model checks, closing the connections a prefork child inherits, the cache) and, around each
task, calls Django's `close_old_connections` instead, as Django does around each request: a
connection older than ``CONN_MAX_AGE`` (``DB_CONN_MAX_AGE``; 0 closes it after every
task), left in an unusable state or in a transaction is closed, the others are reused
(``CONN_HEALTH_CHECKS`` checks a reused one before its first query). With Django's connection
pool (``OPTIONS["pool"]``, which needs ``CONN_MAX_AGE`` 0) the connection goes back to the pool
after every task.

Selected by `config.celery` (``Celery(fixups=...)``). Relies on Celery's ``DjangoFixup`` (its
``worker_fixup`` property, which its receivers read) and ``DjangoWorkerFixup`` (the two signal
receivers it overrides),
checked against `CHECKED_VERSIONS` (tests/compat/test_celery_fixup.py).
"""

import os
from typing import Any

from celery import Celery, Task

# DjangoWorkerFixup is absent from celery-types' stubs (so Any, and subclassing it is the other
# ignore below).
from celery.fixups.django import DjangoFixup, DjangoWorkerFixup  # type: ignore[attr-defined]
from django.db import close_old_connections

# Requirement specifier this module was checked against, as declared in pyproject.toml.
CHECKED_VERSIONS = {"celery": "~=5.7"}


class WorkerFixup(DjangoWorkerFixup):  # type: ignore[misc]
    def on_task_prerun(self, sender: Task[..., Any], **kwargs: Any) -> None:
        if not getattr(sender.request, "is_eager", False):
            close_old_connections()

    def on_task_postrun(self, sender: Task[..., Any], **kwargs: Any) -> None:
        if not getattr(sender.request, "is_eager", False):
            close_old_connections()
            self.close_cache()


class Fixup(DjangoFixup):
    _ours: WorkerFixup | None = None

    @property
    def worker_fixup(self) -> WorkerFixup:
        # Built when the worker first needs it, as Celery's: it reads the app's configuration.
        if self._ours is None:
            self._ours = WorkerFixup(self.app)
        return self._ours


def fixup(app: Celery) -> Fixup | None:
    """Celery's `celery.fixups.django.fixup` (installed when DJANGO_SETTINGS_MODULE is set; Django
    is a dependency, so no import check), with `Fixup`."""
    if not os.environ.get("DJANGO_SETTINGS_MODULE") or "django" in (app.loader_cls or "").lower():
        return None
    installed = Fixup(app)
    installed.install()
    return installed
