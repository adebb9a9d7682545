"""The page a locked-out login gets (`AXES_LOCKOUT_CALLABLE`): the admin's look, in pt-BR,
with HTTP 429; axes' own is an English text line."""

from typing import Any

from django.conf import settings
from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.translation import gettext


def lockout_response(
    request: HttpRequest, original_response: HttpResponse | None = None, credentials: Any = None
) -> HttpResponse:
    context = {
        **admin.site.each_context(request),
        "title": gettext("Too many login attempts"),
        "failure_limit": settings.AXES_FAILURE_LIMIT,
        "cooloff_minutes": int(settings.AXES_COOLOFF_TIME.total_seconds() // 60),
    }
    return render(request, "admin/staff_auth/locked_out.html", context, status=429)
