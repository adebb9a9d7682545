"""A service's parameter schema edited as rows, not raw JSON (docs/architecture.md, The prompt
editor's admin).

`ParameterRowsField` shows the stored list of ``{"name", "label", "type", "required", "choices"}``
as a table with one row of inputs per parameter (name, label, type as a select, required as a
checkbox, choices comma-separated, and a "remove" checkbox), plus a few empty rows for adding; no
JavaScript is needed. It reads the rows back into the same JSON and validates each row with the
pure validator (`agents.parameters.parse_parameter_schema`), naming the row at fault ("Linha 2:
…"), so the stored value, the model's validator and the history's JSON diff are unchanged.

A choice containing a comma cannot be typed in the comma-separated column; none exists today.
"""

from collections.abc import Iterable, Mapping
from typing import Any

from django import forms
from django.core.exceptions import ValidationError
from django.forms.renderers import BaseRenderer
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from agents.parameters import PARAMETER_TYPES, ParameterSchemaError, parse_parameter_schema
from knowledge_base.models import Service

PARAMETER_TYPE_LABELS = {
    "text": _("Text"),
    "integer": _("Whole number"),
    "decimal": _("Decimal number"),
    "boolean": _("Yes/no"),
    "choice": _("Choice from a list"),
    "date": _("Date"),
}
assert set(PARAMETER_TYPE_LABELS) == set(PARAMETER_TYPES)
EMPTY_ROWS = 3
MAX_ROWS = 100
TEXT_KEYS = ("name", "label", "choices")

# One posted row: the inputs as typed ("required"/"delete" as booleans).
Row = dict[str, Any]


def rows_from_schema(schema: Any) -> list[Row]:
    """The stored JSON as rows for the inputs (choices joined by ", "); entries that are not
    objects are shown empty rather than lost silently (saving then drops them)."""
    rows: list[Row] = []
    for entry in schema if isinstance(schema, list) else []:
        entry = entry if isinstance(entry, dict) else {}
        choices = entry.get("choices") or []
        rows.append(
            {
                "name": str(entry.get("name") or ""),
                "label": str(entry.get("label") or ""),
                "type": str(entry.get("type") or "text"),
                "required": entry.get("required") is True,
                "choices": ", ".join(str(c) for c in choices)
                if isinstance(choices, list)
                else str(choices),
                "delete": False,
            }
        )
    return rows


def is_blank(row: Row) -> bool:
    """A row left as offered: nothing typed (the type select and checkboxes alone do not count)."""
    return not any(str(row.get(key) or "").strip() for key in TEXT_KEYS)


def schema_entry(row: Row) -> dict[str, Any]:
    """One kept row as stored: choices split on commas, and only for the choice type (or when
    typed for another type, so the validator says they do not apply)."""
    entry: dict[str, Any] = {
        "name": str(row.get("name") or "").strip(),
        "label": str(row.get("label") or "").strip(),
        "type": row.get("type") or "text",
        "required": bool(row.get("required")),
    }
    choices = [c.strip() for c in str(row.get("choices") or "").split(",") if c.strip()]
    if choices or entry["type"] == "choice":
        entry["choices"] = choices
    return entry


class ParameterRowsWidget(forms.Widget):
    """A table of inputs, one row per parameter plus `EMPTY_ROWS` empty ones. Inputs are named
    ``<name>-<i>-<column>``; ``<name>-TOTAL`` says how many rows were offered."""

    def format_value(self, value: Any) -> Any:
        return value

    def id_for_label(self, id_: str) -> str:
        return ""  # a table, not one input: each input has its own aria-label

    def value_from_datadict(
        self, data: Mapping[str, Any], files: Mapping[str, Iterable[Any]], name: str
    ) -> list[Row] | None:
        try:
            total = min(int(data.get(f"{name}-TOTAL", "")), MAX_ROWS)
        except ValueError:
            return None
        return [
            {
                "name": data.get(f"{name}-{i}-name", ""),
                "label": data.get(f"{name}-{i}-label", ""),
                "type": data.get(f"{name}-{i}-type", "text"),
                "required": f"{name}-{i}-required" in data,
                "choices": data.get(f"{name}-{i}-choices", ""),
                "delete": f"{name}-{i}-delete" in data,
                "number": i + 1,
            }
            for i in range(max(total, 0))
        ]

    def value_omitted_from_data(
        self, data: Mapping[str, Any], files: Mapping[str, Iterable[Any]], name: str
    ) -> bool:
        # The inputs have suffixed names: without this, removing every row would save nothing.
        return f"{name}-TOTAL" not in data

    def render(
        self,
        name: str,
        value: Any,
        attrs: dict[str, Any] | None = None,
        renderer: BaseRenderer | None = None,
    ) -> SafeString:
        posted = isinstance(value, list) and all(
            isinstance(row, dict) and "number" in row for row in value
        )
        if value and posted:
            rows = [row for row in value if not is_blank(row)]  # shown again after an error
        else:
            rows = rows_from_schema(value)
        filled = len(rows)
        rows += [
            {"name": "", "label": "", "type": "text", "required": False, "choices": ""}
            for _ in range(EMPTY_ROWS)
        ]
        body = format_html_join(
            "", "{}", ((self._row(name, i, row, i < filled),) for i, row in enumerate(rows))
        )
        return format_html(
            '<table class="parameter-rows"><thead><tr>{}</tr></thead><tbody>{}</tbody></table>'
            '<input type="hidden" name="{}-TOTAL" value="{}">',
            format_html_join("", "<th>{}</th>", ((h,) for h in _headers())),
            body,
            name,
            len(rows),
        )

    @staticmethod
    def _row(name: str, i: int, row: Row, removable: bool) -> SafeString:
        prefix = f"{name}-{i}"
        options = format_html_join(
            "",
            '<option value="{}"{}>{}</option>',
            (
                (kind, mark_safe(" selected") if row.get("type") == kind else "", label)
                for kind, label in PARAMETER_TYPE_LABELS.items()
            ),
        )
        checked = mark_safe(" checked")
        return format_html(
            "<tr><td>{}</td>"
            '<td><input type="text" name="{}-name" value="{}" maxlength="64" '
            'aria-label="{}" placeholder="tipo_amostra"></td>'
            '<td><input type="text" name="{}-label" value="{}" class="vTextField" '
            'aria-label="{}"></td>'
            '<td><select name="{}-type" aria-label="{}">{}</select></td>'
            '<td><input type="checkbox" name="{}-required" aria-label="{}"{}></td>'
            '<td><input type="text" name="{}-choices" value="{}" class="vTextField" '
            'aria-label="{}"></td>'
            "<td>{}</td></tr>",
            i + 1,
            prefix,
            row.get("name", ""),
            gettext("Name"),
            prefix,
            row.get("label", ""),
            gettext("Label"),
            prefix,
            gettext("Type"),
            options,
            prefix,
            gettext("Required"),
            checked if row.get("required") else "",
            prefix,
            row.get("choices", ""),
            gettext("Choices"),
            format_html(
                '<input type="checkbox" name="{}-delete" aria-label="{}"{}>',
                prefix,
                gettext("Remove"),
                checked if row.get("delete") else "",
            )
            if removable
            else "",
        )


def _headers() -> list[str]:
    return [
        "#",
        gettext("Name"),
        gettext("Label"),
        gettext("Type"),
        gettext("Required"),
        gettext("Choices"),
        gettext("Remove"),
    ]


class ParameterRowsField(forms.Field):
    """The rows read back as the stored JSON list, each row validated by the pure validator."""

    widget = ParameterRowsWidget

    def to_python(self, value: Any) -> list[dict[str, Any]]:
        if value is None:
            raise ValidationError(_("The parameter rows were not sent."), code="rows_missing")
        kept = [row for row in value if not row.get("delete") and not is_blank(row)]
        entries = [schema_entry(row) for row in kept]
        errors = []
        for row, entry in zip(kept, entries, strict=True):
            try:
                parse_parameter_schema([entry])
            except ParameterSchemaError as exc:
                errors.append(_row_error(row, exc.problem))
        if not errors:
            try:
                parse_parameter_schema(entries)  # what rows cannot show alone: repeated names
            except ParameterSchemaError as exc:
                position = exc.position or 1
                errors.append(_row_error(kept[position - 1], exc.problem))
        if errors:
            raise ValidationError(errors)
        return entries

    def has_changed(self, initial: Any, data: Any) -> bool:
        try:
            return self.to_python(data) != (initial or [])
        except ValidationError:
            return True


def _row_error(row: Row, problem: str) -> ValidationError:
    return ValidationError(
        _("Line %(line)s: %(problem)s"),
        code="parameter_row",
        params={"line": row.get("number", "?"), "problem": problem},
    )


class ServiceForm(forms.ModelForm[Service]):
    """The service with its parameter schema as rows (`ParameterRowsField`)."""

    parameter_schema = ParameterRowsField(
        label=_("Parameters"),
        required=False,
        help_text=_(
            "One line per technical parameter the assistant asks the customer for. Name: "
            "lowercase with underscores (e.g. tipo_amostra); label: what the customer reads; "
            "choices: separated by commas, only for the “choice from a list” type. Fill an "
            "empty line to add a parameter; tick “remove” to delete one."
        ),
    )

    class Meta:
        model = Service
        fields = ["code", "label", "segment", "description", "parameter_schema", "is_active"]
