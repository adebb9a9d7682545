"""Admin of the approved WhatsApp message templates staff may send (docs/architecture.md, Support
workflow internals): synced from Meta by the "Sincronizar com o WhatsApp" button (POST, CSRF,
superusers or ``conversations.sync_messagetemplate``; `conversations.message_templates`),
kept by superusers, read by Support (``view_messagetemplate``).

The sync permission is its own, apart from changing templates: the sync only reads what Meta
approved and writes nothing Meta did not say, so a team lead can be given it without being able
to edit or delete templates."""

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_POST

from conversations.message_templates import TemplateSyncRefused, message_templates_sync
from conversations.models import MessageTemplate
from support.staff_actions import template_placeholders

SYNC_PERMISSION = "conversations.sync_messagetemplate"
SYNC_URL_NAME = "conversations_messagetemplate_sync"
_LEVELS = {"success": messages.SUCCESS, "warning": messages.WARNING, "error": messages.ERROR}


def can_sync_templates(user: Any) -> bool:
    return bool(user.is_active and user.is_staff and user.has_perm(SYNC_PERMISSION))


class MessageTemplateForm(forms.ModelForm[MessageTemplate]):
    class Meta:
        model = MessageTemplate
        fields = ("name", "language", "body", "parameters", "is_active")

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        parameters = data.get("parameters")
        if parameters is None:
            return data
        if not isinstance(parameters, list) or not all(
            isinstance(label, str) and label.strip() for label in parameters
        ):
            self.add_error(
                "parameters", _('Give a list of labels, one per parameter: ["Nome", "Data"].')
            )
            return data
        expected = template_placeholders(data.get("body") or "")
        if data.get("body") and expected != len(parameters):
            self.add_error(
                "parameters",
                _("The body has %(count)d parameters; give one label for each.")
                % {"count": expected},
            )
        return data

    def save(self, commit: bool = True) -> MessageTemplate:
        self.instance.parameter_count = len(self.cleaned_data.get("parameters") or [])
        return super().save(commit=commit)


@admin.register(MessageTemplate)
class MessageTemplateAdmin(admin.ModelAdmin[MessageTemplate]):
    form = MessageTemplateForm
    list_display = (
        "name",
        "language",
        "category",
        "parameter_count",
        "is_active",
        "synced_at",
    )
    list_filter = ("is_active", "category", "language", "waba_id")
    search_fields = ("name", "body")
    readonly_fields = (
        "waba_id",
        "category",
        "parameter_count",
        "components",
        "meta_template_id",
        "meta_status",
        "synced_at",
        "created_at",
    )

    def has_add_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.is_superuser)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return bool(request.user.is_superuser)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return bool(request.user.is_superuser)

    def get_urls(self) -> list[URLPattern]:
        return [
            path("sync/", self.admin_site.admin_view(sync_view), name=SYNC_URL_NAME),
            *super().get_urls(),
        ]

    def changelist_view(self, request: HttpRequest, extra_context: Any = None) -> Any:
        if can_sync_templates(request.user):
            extra_context = {
                **(extra_context or {}),
                "template_sync_url": reverse(f"admin:{SYNC_URL_NAME}"),
            }
        return super().changelist_view(request, extra_context)


@require_POST
def sync_view(request: HttpRequest) -> HttpResponse:
    """Read the approved templates from Meta now; the outcome goes to the admin's messages."""
    if not can_sync_templates(request.user):
        raise PermissionDenied
    try:
        report = message_templates_sync(now=timezone.now())
    except TemplateSyncRefused as refused:
        messages.error(request, refused.message)
    else:
        for message in report.messages():
            messages.add_message(request, _LEVELS[message.level], message.text)
    return HttpResponseRedirect(reverse("admin:conversations_messagetemplate_changelist"))
