"""``/metrics``: the Prometheus text of `conversations.prometheus`, for a scraper holding
``METRICS_TOKEN`` (docs/operations.md, Production, Metrics).

No token configured: 404, the endpoint does not exist. No ``Authorization: Bearer`` header: 401;
a wrong token: 403 (compared in constant time). With ``PROMETHEUS_MULTIPROC_DIR`` set (gunicorn's
workers and Celery's each count in their own process) the values are summed from that directory's
files by `MultiProcessCollector`; otherwise this process's default registry is read. The gauges
read from the database (`DatabaseCollector`) are computed once per scrape either way.
"""

import hmac
import os

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from prometheus_client import REGISTRY, CollectorRegistry, generate_latest, multiprocess
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from conversations.prometheus import DatabaseCollector

_BEARER = "Bearer "


def metrics_text() -> bytes:
    """What a scrape reads: every process's counters, then the database's gauges."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        counted = CollectorRegistry()
        multiprocess.MultiProcessCollector(counted)  # type: ignore[no-untyped-call]
    else:
        counted = REGISTRY  # this process's own metrics
    gauges = CollectorRegistry()
    gauges.register(DatabaseCollector())
    return generate_latest(counted) + generate_latest(gauges)


@never_cache
@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    token: str = settings.METRICS_TOKEN
    if not token:
        raise Http404
    header = request.headers.get("Authorization", "")
    if not header.startswith(_BEARER):
        response = HttpResponse("unauthorized", status=401, content_type="text/plain")
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    if not hmac.compare_digest(header[len(_BEARER) :].encode(), token.encode()):
        return HttpResponse("forbidden", status=403, content_type="text/plain")
    return HttpResponse(metrics_text(), content_type=CONTENT_TYPE_LATEST)
