"""Labels: their admin, the filter of the conversation list, the box of the conversation page
(`templates/admin/conversations/session/labels.html`) and ``POST …/conversations/session/<id>/
labels/`` (field ``add`` or ``remove``: a label's id), a thin view over `support.labels`.

The POST is CSRF-checked and behind the admin's login, for staff with
``conversations.attend_session`` (403 otherwise). A plain form post is answered with a redirect
(303) to the conversation page and an admin message; a request sending ``Accept:
application/json`` gets 200 ``{"ok": true, "changed", "message", "labels"}`` or 400/403/404
``{"error": "<sentence>"}``.

Support may create and rename labels (the team's own vocabulary; the events keep the name a
label had); deleting one, which takes it off every conversation, is for superusers.
"""

from dataclasses import dataclass
from typing import Any

from django.contrib import admin, messages
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.translation import gettext, pgettext_lazy
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_POST

from conversations.models import Session
from support.labels import session_label_add, session_label_remove, session_labels, with_label
from support.models import Label
from support.staff_actions import StaffActionRefused, can_attend
from versioning.admin import VersionedAdmin

LABELS_URL_NAME = "conversations_session_labels"


@admin.register(Label)
class LabelAdmin(VersionedAdmin[Label]):
    list_display = ("name", "chip", "created_at")
    search_fields = ("name",)
    fields = ("name", "colour")

    class Media:
        css = {"all": ("support/admin/labels.css",)}

    @admin.display(description=_("colour"), ordering="colour")
    def chip(self, obj: Label) -> SafeString:
        return label_chip(obj)


def label_chip(label: Label) -> SafeString:
    return format_html('<span class="label-chip label-{}">{}</span>', label.colour, label.name)


class LabelFilter(admin.SimpleListFilter):
    """Conversations with a label: the labels in one small query, the filter one `EXISTS`."""

    title = pgettext_lazy("tag", "label")
    parameter_name = "label"

    def lookups(
        self, request: HttpRequest, model_admin: admin.ModelAdmin[Session]
    ) -> list[tuple[str, str]]:
        return [(str(pk), name) for pk, name in Label.objects.values_list("pk", "name")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Session]) -> QuerySet[Session]:
        value = self.value()
        if not value:
            return queryset
        label_id = parse_label_id(value)
        return queryset.none() if label_id is None else with_label(queryset, label_id)


def parse_label_id(raw: str) -> int | None:
    """A label id (a positive whole number that fits a bigint), None for anything else."""
    raw = raw.strip()
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 18:
        return None
    return int(raw) or None


# --- The box on the conversation page ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LabelsPanel:
    """What `labels.html` shows: the session's labels (chips with a remove button), the others
    (the add select), and where both post."""

    url: str
    current: list[Label]
    available: list[Label]


def labels_panel(*, session: Session, user: Any) -> LabelsPanel | None:
    """The box for staff who may attend conversations (one query), None for anyone else."""
    if not can_attend(user):
        return None
    labels = session_labels(session.pk)
    return LabelsPanel(
        url=reverse(f"admin:{LABELS_URL_NAME}", args=[session.pk]),
        current=labels.current,
        available=labels.available,
    )


# --- POST …/<id>/labels/ ----------------------------------------------------------------------


def _wants_json(request: HttpRequest) -> bool:
    return "application/json" in request.headers.get("Accept", "")


def _refused(request: HttpRequest, session_id: int, status: int, message: str) -> HttpResponse:
    if _wants_json(request):
        return JsonResponse({"error": message}, status=status)
    messages.error(request, message)
    return _back(session_id)


def _back(session_id: int) -> HttpResponse:
    page = reverse("admin:conversations_session_change", args=[session_id])
    return HttpResponseRedirect(page + "#session-labels", status=303)


def session_labels_change(request: HttpRequest, session_id: int) -> HttpResponse:
    user = request.user
    if not can_attend(user):
        if _wants_json(request):
            return JsonResponse({"error": gettext("You may not attend conversations.")}, status=403)
        raise PermissionDenied
    assert isinstance(user, User)  # the admin lets only logged-in staff through
    add, remove = request.POST.get("add", "").strip(), request.POST.get("remove", "").strip()
    if bool(add) == bool(remove):
        return _refused(request, session_id, 400, gettext("Choose one label to add or to remove."))
    label_id = parse_label_id(add or remove)
    if label_id is None:
        return _refused(request, session_id, 400, gettext("Choose one of the labels."))
    change = session_label_add if add else session_label_remove
    try:
        outcome = change(session_id=session_id, user=user, label_id=label_id, now=timezone.now())
    except Session.DoesNotExist:
        message = gettext("Conversation #%(id)s does not exist.") % {"id": session_id}
        if _wants_json(request):
            return JsonResponse({"error": message}, status=404)
        messages.error(request, message)
        return HttpResponseRedirect(reverse("admin:conversations_session_changelist"), status=303)
    except StaffActionRefused as refused:
        return _refused(request, session_id, 400, refused.message)
    if _wants_json(request):
        return JsonResponse(
            {
                "ok": True,
                "changed": outcome.changed,
                "message": outcome.message,
                "labels": [label.as_json() for label in session_labels(session_id).current],
            }
        )
    messages.add_message(
        request, messages.SUCCESS if outcome.changed else messages.INFO, outcome.message
    )
    return _back(session_id)


def label_urls(model_admin: admin.ModelAdmin[Session]) -> list[URLPattern]:
    """``<id>/labels/``, registered through `support.admin.sessions.session_admin_urls`."""
    view = require_POST(session_labels_change)
    return [
        path(
            "<int:session_id>/labels/",
            model_admin.admin_site.admin_view(view),
            name=LABELS_URL_NAME,
        )
    ]
