"""Admin of the versioned resources: prompt overrides, runtime configuration, strategic companies.

Each is a `versioning.admin.VersionedAdmin` (history, diff, read-only versions); the override
admin adds the prompt tools of `prompts_admin.preview`.
"""

from django import forms
from django.contrib import admin
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _

from prompts_admin.forms import PromptTemplateForm
from prompts_admin.models import PromptOverride, RuntimeConfig, StrategicCompany
from prompts_admin.preview import PromptOverrideToolsMixin
from versioning.admin import MONOSPACE_TEXTAREA, VersionedAdmin


class PromptOverrideForm(PromptTemplateForm):
    """The override form; `PromptTemplateForm` validates the template for the chosen agent."""

    class Meta:
        model = PromptOverride
        fields = ["agent", "content", "is_active", "note"]
        widgets = {"content": forms.Textarea(attrs=MONOSPACE_TEXTAREA.attrs | {"rows": 30})}


@admin.register(PromptOverride)
class PromptOverrideAdmin(PromptOverrideToolsMixin, VersionedAdmin[PromptOverride]):
    form = PromptOverrideForm
    list_display = ("__str__", "agent", "is_active", "note", "updated_at")
    list_filter = ("agent", "is_active")
    search_fields = ("note", "content")


@admin.register(RuntimeConfig)
class RuntimeConfigAdmin(VersionedAdmin[RuntimeConfig]):
    """The single configuration row: it can be edited, never added twice or deleted."""

    list_display = ("__str__", "agent_name", "company_name", "updated_at")
    fieldsets = (
        (None, {"fields": ("agent_name", "company_name", "business_hours")}),
        (
            _("Fixed messages"),
            {
                "fields": (
                    "handoff_message_open",
                    "handoff_message_closed",
                    "unsupported_media_message",
                    "invalid_format_message",
                )
            },
        ),
    )

    def has_add_permission(self, request: HttpRequest) -> bool:
        return super().has_add_permission(request) and not RuntimeConfig.objects.exists()

    def has_delete_permission(self, request: HttpRequest, obj: RuntimeConfig | None = None) -> bool:
        return False


@admin.register(StrategicCompany)
class StrategicCompanyAdmin(VersionedAdmin[StrategicCompany]):
    list_display = ("name", "cnpj", "is_active")
    list_filter = ("is_active",)
    search_fields = ("name", "cnpj", "phone_numbers")
