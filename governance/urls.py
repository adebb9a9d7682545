"""The governance pages that are not a model's admin, under the admin's prefix (config/urls.py
includes them before `admin.site.urls`, whose catch-all would answer 404 first). Wrapped in
`admin.site.admin_view`: the admin's login, CSRF and never-cache rules apply as on its own pages.
"""

from django.contrib import admin
from django.urls import URLPattern, path

from governance.outcomes_admin import METRICS_URL_NAME, prompt_metrics_view

urlpatterns: list[URLPattern] = [
    path("metrics/", admin.site.admin_view(prompt_metrics_view), name=METRICS_URL_NAME),
]
