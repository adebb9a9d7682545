"""The project's URLs plus the two floors the webhook is compared with, on the same server.

- ``/bench/bare/``: a Django view answering 200 without work (the framework's floor);
- ``/bench/durable/``: stores the raw body with one committed INSERT (the floor of any durable
  webhook: one commit, so one WAL flush, per delivery).
"""

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.urls import path
from django.views.decorators.csrf import csrf_exempt

from config.urls import urlpatterns as project_urlpatterns
from conversations.models import WebhookDelivery


@csrf_exempt
def bare(request: HttpRequest) -> HttpResponse:
    return HttpResponse("ok", content_type="text/plain")


@csrf_exempt
def durable(request: HttpRequest) -> HttpResponse:
    body = request.read(settings.WEBHOOK_MAX_BODY_BYTES + 1)
    # Autocommit: the INSERT is its own transaction, committed before the answer.
    WebhookDelivery.objects.create(raw_body=body)
    return HttpResponse("ok", content_type="text/plain")


urlpatterns = [
    path("bench/bare/", bare),
    path("bench/durable/", durable),
    *project_urlpatterns,
]
