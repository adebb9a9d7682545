"""Health and readiness probes for load balancers and orchestrators (docs/operations.md,
Production).

- ``/healthz``: the process answers; nothing else is checked (a liveness probe must not fail
  because PostgreSQL is down, or every web process restarts at once).
- ``/readyz``: this process can serve: the database answers, every migration is applied, and the
  broker answers (skipped when tasks run eagerly, the embedded default). 200 or 503 with a JSON
  body naming each check's result; a failure names the exception's class only, never a URL or a
  credential.
"""

import logging
from collections.abc import Callable

from django.conf import settings
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

logger = logging.getLogger("config.health")

# A probe waits this long for the broker at most (a load balancer's own timeout is a few seconds).
BROKER_TIMEOUT_SECONDS = 2
OK = "ok"

_migrations_applied = False  # once seen applied, they stay so until the next deploy restarts us


def database_check() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()
    return OK


def migrations_check() -> str:
    global _migrations_applied
    if not _migrations_applied:
        executor = MigrationExecutor(connection)
        plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
        if plan:
            return f"{len(plan)} not applied"
        _migrations_applied = True
    return OK


def broker_check() -> str:
    if settings.CELERY_TASK_ALWAYS_EAGER:
        return "eager (no broker)"
    from config.celery import app  # the Celery app imports settings; load it only when asked

    with app.connection_for_read(
        settings.CELERY_BROKER_URL, connect_timeout=BROKER_TIMEOUT_SECONDS
    ) as conn:
        conn.ensure_connection(max_retries=0, timeout=BROKER_TIMEOUT_SECONDS)
    return OK


CHECKS: dict[str, Callable[[], str]] = {
    "database": database_check,
    "migrations": migrations_check,
    "broker": broker_check,
}


def run_checks() -> tuple[bool, dict[str, str]]:
    results: dict[str, str] = {}
    ready = True
    for name, check in CHECKS.items():
        try:
            result = check()
        except Exception as exc:  # any failure makes the process not ready; none may raise
            result = f"failed: {type(exc).__name__}"
        if not result.startswith((OK, "eager")):
            ready = False
        results[name] = result
    return ready, results


@require_GET
def healthz(request: HttpRequest) -> HttpResponse:
    return HttpResponse("ok", content_type="text/plain")


@never_cache
@require_GET
def readyz(request: HttpRequest) -> HttpResponse:
    ready, results = run_checks()
    if not ready:
        logger.warning("readiness_failed", extra={"checks": results})
    return JsonResponse(
        {"status": "ready" if ready else "unavailable", "checks": results},
        status=200 if ready else 503,
    )
