"""Admin of the WhatsApp instances: the form keeps the access token write-only."""

from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _

from conversations.models import MAX_ACCESS_TOKEN_CHARS, Instance


class InstanceForm(forms.ModelForm[Instance]):
    """The access token is write-only: a new one can be typed or the stored one removed."""

    new_access_token = forms.CharField(
        label=_("new access token"),
        required=False,
        strip=True,
        max_length=MAX_ACCESS_TOKEN_CHARS,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text=_("Leave empty to keep the current token. The stored token is never shown."),
    )
    clear_access_token = forms.BooleanField(
        label=_("remove the stored token"),
        required=False,
        help_text=_("The instance then sends with WHATSAPP_ACCESS_TOKEN."),
    )

    class Meta:
        model = Instance
        fields = [
            "name",
            "phone_number_id",
            "waba_id",
            "display_phone",
            "brand_context",
            "health_sensitive",
            "is_active",
        ]

    def clean(self) -> dict[str, Any]:
        super().clean()
        cleaned = self.cleaned_data
        if cleaned.get("new_access_token") and cleaned.get("clear_access_token"):
            raise forms.ValidationError(_("Either type a new token or remove it, not both."))
        return cleaned

    def save(self, commit: bool = True) -> Instance:
        if self.cleaned_data.get("clear_access_token"):
            self.instance.access_token = ""
        elif self.cleaned_data.get("new_access_token"):
            self.instance.access_token = self.cleaned_data["new_access_token"]
        return super().save(commit=commit)


@admin.register(Instance)
class InstanceAdmin(admin.ModelAdmin[Instance]):
    form = InstanceForm
    list_display = (
        "name",
        "phone_number_id",
        "display_phone",
        "health_sensitive",
        "has_access_token",
        "is_active",
    )
    list_filter = ("is_active", "health_sensitive")
    search_fields = ("name", "phone_number_id", "waba_id", "display_phone")
    readonly_fields = ("has_access_token", "created_at")
    fieldsets = (
        (
            None,
            {
                "fields": (
                    "name",
                    "phone_number_id",
                    "waba_id",
                    "display_phone",
                    "brand_context",
                    "health_sensitive",
                    "is_active",
                    "created_at",
                )
            },
        ),
        (
            _("Access token"),
            {"fields": ("has_access_token", "new_access_token", "clear_access_token")},
        ),
    )

    @admin.display(description=_("own access token"), boolean=True)
    def has_access_token(self, obj: Instance) -> bool:
        return obj.has_access_token

    def get_fieldsets(self, request: HttpRequest, obj: Instance | None = None) -> Any:
        if not self.has_change_permission(request, obj):
            # View-only users see whether a token is set, without the write-only fields.
            return (
                (None, self.fieldsets[0][1]),
                (_("Access token"), {"fields": ("has_access_token",)}),
            )
        return self.fieldsets
