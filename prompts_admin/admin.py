"""Admin of the versioned resources: prompt overrides, runtime configuration, strategic companies.

Each is a `versioning.admin.VersionedAdmin` (history, diff, read-only versions); the override
admin adds the prompt tools of `prompts_admin.preview`.
"""

from typing import Any

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError
from django.http import HttpRequest
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from prompts_admin.forms import (
    HOURS_FIELD_PREFIX,
    WEEKDAY_LABELS,
    PromptTemplateForm,
    RuntimeConfigForm,
    holidays_description,
)
from prompts_admin.models import AGENT_CHOICES, PromptOverride, RuntimeConfig, StrategicCompany
from prompts_admin.preview import PromptOverrideToolsMixin
from versioning.admin import MONOSPACE_TEXTAREA, VersionedAdmin


class PromptOverrideForm(PromptTemplateForm):
    """The override form; `PromptTemplateForm` validates the template for the chosen agent.

    A save that would leave an agent on the built-in prompt (the override is its active one and
    is deactivated, or moved to another agent) is refused once with a message saying so; the
    `confirm_builtin` box, hidden until then, lets the editor save it anyway.
    """

    confirm_builtin = forms.BooleanField(
        label=_("Leave the agent on the built-in prompt"),
        required=False,
        widget=forms.HiddenInput,
    )

    class Meta:
        model = PromptOverride
        fields = ["agent", "content", "is_active", "note"]
        widgets = {"content": forms.Textarea(attrs=MONOSPACE_TEXTAREA.attrs | {"rows": 30})}

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        stored = (
            PromptOverride.objects.filter(pk=self.instance.pk, is_active=True)
            .values_list("agent", flat=True)
            .first()
            if self.instance.pk is not None
            else None
        )
        leaves_builtin = stored is not None and (
            not cleaned.get("is_active") or cleaned.get("agent") != stored
        )
        if leaves_builtin and not cleaned.get("confirm_builtin"):
            # Shown from now on, so the editor can tick it and save again.
            self.fields["confirm_builtin"].widget = forms.CheckboxInput()
            self.add_error(
                "confirm_builtin",
                ValidationError(
                    _(
                        "Saving this leaves the %(agent)s agent on the built-in prompt: this is "
                        "its active override. Tick “Leave the agent on the built-in prompt” and "
                        "save again to confirm."
                    ),
                    code="leaves_builtin",
                    params={"agent": dict(AGENT_CHOICES)[str(stored)]},
                ),
            )
        return cleaned


# simple-history's name for the version (revert) page of an override.
REVERT_URL_NAME = "prompts_admin_promptoverride_simple_history"


@admin.register(PromptOverride)
class PromptOverrideAdmin(PromptOverrideToolsMixin, VersionedAdmin[PromptOverride]):
    form = PromptOverrideForm
    list_display = ("__str__", "agent", "is_active", "note", "updated_at")
    list_filter = ("agent", "is_active")
    search_fields = ("note", "content")

    def get_form(
        self,
        request: HttpRequest,
        obj: PromptOverride | None = None,
        change: bool = False,
        **kwargs: Any,
    ) -> type[forms.ModelForm[PromptOverride]]:
        """On the revert page (simple-history's version form), the "active" box starts as the
        override is now, not as it was in that version: reverting the text of the active
        override must not deactivate it, nor reverting a draft activate it, unless the editor
        ticks the box."""
        match = request.resolver_match
        if obj is not None and match is not None and match.url_name == REVERT_URL_NAME:
            current = (
                PromptOverride.objects.filter(pk=obj.pk).values_list("is_active", flat=True).first()
            )
            if current is not None:
                obj.is_active = current
        return super().get_form(request, obj, change, **kwargs)


@admin.register(RuntimeConfig)
class RuntimeConfigAdmin(VersionedAdmin[RuntimeConfig]):
    """The single configuration row: it can be edited, never added twice or deleted."""

    form = RuntimeConfigForm
    list_display = ("__str__", "agent_name", "company_name", "updated_at")
    fieldsets = (
        (None, {"fields": ("agent_name", "company_name")}),
        (
            _("Business hours (Brasília time)"),
            {"fields": tuple(HOURS_FIELD_PREFIX + day for day in WEEKDAY_LABELS)},
        ),
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

    def get_fieldsets(self, request: HttpRequest, obj: RuntimeConfig | None = None) -> Any:
        """The business-hours section lists this year's national holidays (closed all day)."""
        fieldsets = super().get_fieldsets(request, obj)
        year = timezone.localdate().year
        return [
            (name, options | {"description": holidays_description(year)})
            if HOURS_FIELD_PREFIX + "mon" in options.get("fields", ())
            else (name, options)
            for name, options in fieldsets
        ]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return super().has_add_permission(request) and not RuntimeConfig.objects.exists()

    def has_delete_permission(self, request: HttpRequest, obj: RuntimeConfig | None = None) -> bool:
        return False


@admin.register(StrategicCompany)
class StrategicCompanyAdmin(VersionedAdmin[StrategicCompany]):
    list_display = ("name", "cnpj", "is_active")
    list_filter = ("is_active",)
    search_fields = ("name", "cnpj", "phone_numbers")
