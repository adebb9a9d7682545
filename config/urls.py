from django.conf import settings
from django.contrib import admin
from django.urls import include, path
from django.utils.translation import gettext_lazy as _

from config.health import healthz, readyz

admin.site.site_header = _("WhatsApp attendance")
admin.site.site_title = _("WhatsApp attendance")
admin.site.index_title = _("Attendance administration")


urlpatterns = [
    path(settings.ADMIN_URL, admin.site.urls),
    path("webhooks/", include("conversations.urls")),
    path("healthz", healthz, name="healthz"),
    path("readyz", readyz, name="readyz"),
]
