from django.conf import settings
from django.contrib import admin
from django.urls import include, path
from django.utils.translation import gettext_lazy as _
from django.views.generic import RedirectView

from config.health import healthz, readyz
from config.metrics_view import metrics
from config.settings import DEFAULT_ADMIN_URL

admin.site.site_header = _("WhatsApp attendance")
admin.site.site_title = _("WhatsApp attendance")
admin.site.index_title = _("Attendance administration")


urlpatterns = [
    # Before the admin's own URLs: its catch-all would answer first.
    path(f"{settings.ADMIN_URL}governance/", include("governance.urls")),
    path(settings.ADMIN_URL, admin.site.urls),
    path("webhooks/", include("conversations.urls")),
    path("healthz", healthz, name="healthz"),
    path("readyz", readyz, name="readyz"),
    path("metrics", metrics, name="metrics"),
]
# The site is the admin: the bare domain leads there (to its login when signed out), unless the
# admin lives at a path of its own (ADMIN_URL), which a redirect would give away: then 404.
if settings.ADMIN_URL == DEFAULT_ADMIN_URL:
    urlpatterns.append(path("", RedirectView.as_view(url=f"/{DEFAULT_ADMIN_URL}")))
