from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.urls import include, path


def healthz(request: HttpRequest) -> HttpResponse:
    return HttpResponse("ok", content_type="text/plain")


urlpatterns = [
    path("admin/", admin.site.urls),
    path("webhooks/", include("conversations.urls")),
    path("healthz", healthz, name="healthz"),
]
