"""Admin of the catalog (segments, intents, services) and the knowledge packages, all versioned."""

from typing import TYPE_CHECKING

from django import forms
from django.contrib import admin
from django.http import HttpRequest
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from agents.parameters import ParameterSchemaError, parse_parameter_schema
from knowledge_base.forms import ServiceForm
from knowledge_base.models import Intent, KBPackage, Segment, Service
from versioning.admin import MONOSPACE_TEXTAREA, VersionedAdmin
from versioning.forms import ChangeReasonForm

if TYPE_CHECKING:
    from django.contrib.admin.options import _FieldGroups


@admin.register(Segment)
class SegmentAdmin(VersionedAdmin[Segment]):
    list_display = ("code", "label", "health_sensitive", "is_active")
    list_filter = ("is_active", "health_sensitive")
    search_fields = ("code", "label")


@admin.register(Intent)
class IntentAdmin(VersionedAdmin[Intent]):
    list_display = ("code", "label", "is_active")
    list_filter = ("is_active",)
    search_fields = ("code", "label")


@admin.register(Service)
class ServiceAdmin(VersionedAdmin[Service]):
    """Services with their parameter schema edited as rows (`ServiceForm`); a user who may only
    view a service sees the same rows as a read-only table instead."""

    form = ServiceForm
    list_display = ("code", "label", "segment", "parameter_count", "is_active")
    list_filter = ("is_active", "segment")
    list_select_related = ("segment",)
    search_fields = ("code", "label", "description")
    readonly_fields = ("parameter_table",)
    fields = (
        "code",
        "label",
        "segment",
        "description",
        "parameter_schema",
        "is_active",
    )

    def get_fields(self, request: HttpRequest, obj: Service | None = None) -> "_FieldGroups":
        fields = super().get_fields(request, obj)
        if obj is not None and not self.has_change_permission(request, obj):
            return ["parameter_table" if f == "parameter_schema" else f for f in fields]
        return fields

    @admin.display(description=_("parameters"))
    def parameter_count(self, obj: Service) -> int:
        return len(obj.parameter_schema or [])

    @admin.display(description=_("parameters as saved"))
    def parameter_table(self, obj: Service) -> SafeString | str:
        try:
            specs = parse_parameter_schema(obj.parameter_schema)
        except ParameterSchemaError as exc:
            return str(exc)
        if not specs:
            return gettext("No parameters.")
        rows = format_html_join(
            "",
            "<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            (
                (
                    spec.name,
                    spec.label,
                    spec.type,
                    gettext("yes") if spec.required else gettext("no"),
                    ", ".join(spec.choices),
                )
                for spec in specs
            ),
        )
        return format_html(
            "<table><thead><tr><th>{}</th><th>{}</th><th>{}</th><th>{}</th><th>{}</th></tr>"
            "</thead><tbody>{}</tbody></table>",
            gettext("name"),
            gettext("label"),
            gettext("type"),
            gettext("required"),
            gettext("choices"),
            rows,
        )


class KBPackageForm(ChangeReasonForm[KBPackage]):
    """The package with the editor's change reason for its history (`ChangeReasonForm`)."""

    class Meta:
        model = KBPackage
        fields = ["package_id", "title", "description", "content", "is_active", "health_sensitive"]
        widgets = {"content": forms.Textarea(attrs=MONOSPACE_TEXTAREA.attrs | {"rows": 24})}


@admin.register(KBPackage)
class KBPackageAdmin(VersionedAdmin[KBPackage]):
    form = KBPackageForm
    list_display = (
        "package_id",
        "title",
        "description",
        "health_sensitive",
        "is_active",
        "updated_at",
    )
    list_filter = ("is_active", "health_sensitive")
    search_fields = ("package_id", "title", "description")
