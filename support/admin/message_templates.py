"""Admin of the approved WhatsApp templates staff may send (docs/architecture.md, Support workflow
internals): superusers keep them, Support (``view_messagetemplate``) only reads them."""

from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _

from conversations.models import MessageTemplate
from support.staff_actions import template_placeholders


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


@admin.register(MessageTemplate)
class MessageTemplateAdmin(admin.ModelAdmin[MessageTemplate]):
    form = MessageTemplateForm
    list_display = ("name", "language", "is_active", "created_at")
    list_filter = ("is_active", "language")
    search_fields = ("name", "body")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.is_superuser)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return bool(request.user.is_superuser)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return bool(request.user.is_superuser)
