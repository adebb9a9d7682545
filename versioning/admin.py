"""`VersionedAdmin`, the base of every admin-edited model with history (knowledge_base,
prompts_admin): simple-history's list of versions and revert, plus a field-by-field diff between
any two versions (`versioning.diff`). Its version page is read-only, and refuses a POST, for
anyone who may not change the object: simple-history 3.13 checks only the view permission there
and saves any POST.
"""

import json
from typing import Any, TypeVar

from django import forms
from django.contrib.admin import helpers
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import models
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import URLPattern, path
from django.utils.html import conditional_escape
from django.utils.safestring import SafeString
from django.utils.translation import gettext
from simple_history.admin import SimpleHistoryAdmin
from simple_history.manager import HistoryManager
from simple_history.models import ModelChange
from simple_history.template_utils import HistoricalRecordContextHelper

from compat.django_private import flatten_fieldsets, unquote
from versioning.diff import diff_versions, display_value


class PrettyJSONFormField(forms.JSONField):
    """A JSON form field that shows the stored value indented, one key per line."""

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, forms.fields.InvalidJSONInput):
            return value
        return json.dumps(value, ensure_ascii=False, indent=2, cls=self.encoder)


# Styled by a class from VersionedAdmin's stylesheet: the CSP allows no inline style attribute.
MONOSPACE_TEXTAREA = forms.Textarea(attrs={"rows": 16, "class": "vLargeTextField monospace"})
JSON_FIELD_OVERRIDES: dict[type[models.Field[Any, Any]], dict[str, Any]] = {
    models.JSONField: {"form_class": PrettyJSONFormField, "widget": MONOSPACE_TEXTAREA}
}


ModelT = TypeVar("ModelT", bound=models.Model)


def history_of(model: models.Model | type[models.Model]) -> HistoryManager:
    """The `history` manager of a versioned model, or of one of its objects."""
    # Every model under VersionedAdmin declares `history = HistoricalRecords()`; the type of a
    # model in general cannot say so.
    manager: HistoryManager = model.history  # type: ignore[union-attr]
    return manager


class VersionHistoryContextHelper(HistoricalRecordContextHelper):
    """The history list's "changes" column: booleans as Sim/Não and choices by their label, as
    the compare page shows them (`versioning.diff.display_value`); other values as
    simple-history shows them."""

    def prepare_delta_change_value(self, change: ModelChange, value: Any) -> Any:
        field = self.model._meta.get_field(change.field)
        if (
            isinstance(field, models.Field)
            and not field.many_to_many
            and (isinstance(value, bool) or (field.choices and value is not None))
        ):
            return display_value(field, value)
        return super().prepare_delta_change_value(change, value)

    def stringify_delta_change_values(
        self, change: ModelChange, old: Any, new: Any
    ) -> tuple[SafeString, SafeString]:
        """A multi-line text (a prompt, a package) shows its first changed line, numbered,
        instead of simple-history's shortened middle ("[6137 chars]"); the compare page has the
        whole diff."""
        if isinstance(old, str) and isinstance(new, str) and ("\n" in old or "\n" in new):
            line = first_changed_line(old, new)
            if line is not None:
                number, old_line, new_line = line
                return (
                    conditional_escape(numbered_line(number, old_line)),
                    conditional_escape(numbered_line(number, new_line)),
                )
        return super().stringify_delta_change_values(change, old, new)


HISTORY_LINE_MAX_CHARS = 80


def first_changed_line(old: str, new: str) -> tuple[int, str | None, str | None] | None:
    """(1-based number, old line, new line) of the first line that differs; None for a line
    that is not there on that side; None when the lines are all the same."""
    old_lines, new_lines = old.splitlines(), new.splitlines()
    for index in range(max(len(old_lines), len(new_lines))):
        before = old_lines[index] if index < len(old_lines) else None
        after = new_lines[index] if index < len(new_lines) else None
        if before != after:
            return index + 1, before, after
    return None


def numbered_line(number: int, text: str | None) -> str:
    """ "linha 12: …" for the history list, at most `HISTORY_LINE_MAX_CHARS` of the line."""
    if text is None:
        shown = gettext("(no line)")
    elif not text.strip():
        shown = gettext("(empty line)")
    elif len(text) > HISTORY_LINE_MAX_CHARS:
        shown = text[: HISTORY_LINE_MAX_CHARS - 1] + "…"
    else:
        shown = text
    return gettext("line %(number)s: %(text)s") % {"number": number, "text": shown}


class VersionedAdmin(SimpleHistoryAdmin[ModelT]):
    """SimpleHistoryAdmin with a diff between any two versions (`<pk>/history/compare/`)."""

    object_history_list_template = "admin/history/object_history_list.html"
    history_compare_template = "admin/history/compare.html"
    formfield_overrides = JSON_FIELD_OVERRIDES
    # Catalog entries, packages and prompts are deactivated, not deleted: their history and the
    # codes old sessions name stay readable. Superusers may still delete one at a time.
    actions: list[Any] = []

    class Media:
        css = {"all": ("versioning/admin/versioned.css",)}

    def get_urls(self) -> list[URLPattern]:
        opts = self.model._meta
        compare = path(
            "<path:object_id>/history/compare/",
            self.admin_site.admin_view(self.history_compare_view),
            name=f"{opts.app_label}_{opts.model_name}_history_compare",
        )
        # Before simple-history's `<pk>/history/<version>/`, which would take "compare".
        return [compare, *super().get_urls()]

    def get_historical_record_context_helper(
        self, request: HttpRequest, historical_record: Any
    ) -> HistoricalRecordContextHelper:
        return VersionHistoryContextHelper(self.model, historical_record)

    def revert_disabled(self, request: HttpRequest, obj: ModelT | None = None) -> bool:
        """Whether `request.user` may NOT write a version back: hides the Revert button and the
        compare page's revert link, makes the version page read-only and its POST a 403.

        simple-history only asks the history permissions; a revert is a change of the object.
        """
        return super().revert_disabled(request, obj) or not self.has_change_permission(request, obj)

    def _pk_or_404(self, object_id: str, version_id: str = "0") -> None:
        """404 for an id the primary key (or a version's history id) cannot hold: simple-history
        passes it to the ORM as is, and `int("x")` there answered 500."""
        try:
            self.model._meta.pk.to_python(unquote(object_id))
            int(version_id)
        except (ValidationError, ValueError):
            raise Http404 from None

    def history_view(
        self, request: HttpRequest, object_id: str, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        self._pk_or_404(object_id)
        return super().history_view(request, object_id, extra_context)

    def history_form_view(
        self,
        request: HttpRequest,
        object_id: str,
        version_id: str,
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        """simple-history's version page, closed to writes by anyone who may not revert.

        simple-history 3.13 saves any POST to this page after checking only the (view) history
        permission, so a view-only user could change the object; the check here runs first, on
        every method but GET and HEAD.
        """
        self._pk_or_404(object_id, version_id)
        if request.method not in ("GET", "HEAD"):
            history_model = history_of(self.model).model
            version = get_object_or_404(
                history_model,
                **{self.model._meta.pk.attname: unquote(object_id), "history_id": version_id},
            )
            if self.revert_disabled(request, version.instance):
                raise PermissionDenied
        return super().history_form_view(request, object_id, version_id, extra_context)

    def render_history_view(
        self, request: HttpRequest, template: str, context: dict[str, Any], **kwargs: Any
    ) -> HttpResponse:
        """Shows a version to a user who may not revert it as text, not as an editable form."""
        adminform = context.get("adminform")
        if adminform is not None and context.get("revert_disabled"):
            obj = context["original"]
            fieldsets = self.get_fieldsets(request, obj)
            context["adminform"] = helpers.AdminForm(
                adminform.form,
                # django-stubs declares AdminForm's fieldsets narrower than get_fieldsets' own
                # return type (labels may be lazy, options are any field options).
                fieldsets,  # type: ignore[arg-type]
                {},
                readonly_fields=flatten_fieldsets(fieldsets),
                model_admin=self,
            )
        return super().render_history_view(request, template, context, **kwargs)

    def history_compare_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        obj = self.get_object(request, unquote(object_id))
        if obj is None:
            raise Http404
        if not self.has_view_history_or_change_history_permission(request, obj):
            raise PermissionDenied
        versions = list(
            history_of(obj).select_related("history_user").order_by("-history_date", "-history_id")
        )
        if not versions:
            raise Http404
        by_id = {str(version.history_id): version for version in versions}
        default_old = versions[1] if len(versions) > 1 else versions[0]
        old = by_id.get(request.GET.get("old", str(default_old.history_id)))
        new = by_id.get(request.GET.get("new", str(versions[0].history_id)))
        if old is None or new is None:
            raise Http404
        changes = diff_versions(model=self.model, old=old, new=new)
        opts = self.model._meta
        context = {
            **self.admin_site.each_context(request),
            "title": gettext("Compare versions: %s") % obj,
            "subtitle": None,
            "opts": opts,
            "app_label": opts.app_label,
            "object": obj,
            "versions": versions,
            "old": old,
            "new": new,
            "changes": changes,
            "revert_disabled": self.revert_disabled(request, obj),
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(request, self.history_compare_template, context)
