"""A field-by-field diff between any two historical records of a model: simple-history 3.13 shows
each version only against the previous one, with long texts cut."""

import difflib
import json
from dataclasses import dataclass
from typing import Any

from django.db import models
from django.db.models import Model
from django.utils.formats import localize
from django.utils.text import capfirst
from django.utils.translation import gettext
from simple_history.models import DeletedObject

# A value longer than this, or with a line break, is diffed line by line.
INLINE_DIFF_MAX_CHARS = 80
DIFF_CONTEXT_LINES = 3


@dataclass(frozen=True, slots=True)
class DiffLine:
    kind: str  # "context", "added", "removed" or "hunk"
    text: str


@dataclass(frozen=True, slots=True)
class FieldChange:
    name: str
    label: str
    old: str
    new: str
    lines: tuple[DiffLine, ...]  # empty for short values, shown as old → new


def display_value(field: models.Field[Any, Any], value: Any) -> str:
    """A stored value as staff read it: a choice's label, Sim/Não, "—" for nothing."""
    if value is None or isinstance(value, DeletedObject):
        return "—" if value is None else str(value)
    if field.choices:
        return str(dict(field.flatchoices).get(value, value))
    if isinstance(value, bool):
        return gettext("Yes") if value else gettext("No")
    if isinstance(field, models.JSONField):
        return json.dumps(value, ensure_ascii=False, indent=2, sort_keys=True)
    return str(localize(value))


def line_diff(old: str, new: str) -> tuple[DiffLine, ...]:
    """A unified diff of two texts, line by line (`DIFF_CONTEXT_LINES` of context)."""
    lines: list[DiffLine] = []
    diff = difflib.unified_diff(
        old.splitlines(), new.splitlines(), lineterm="", n=DIFF_CONTEXT_LINES
    )
    for raw in diff:
        if raw.startswith(("---", "+++")):
            continue
        if raw.startswith("@@"):
            lines.append(DiffLine("hunk", raw))
        elif raw.startswith("+"):
            lines.append(DiffLine("added", raw[1:]))
        elif raw.startswith("-"):
            lines.append(DiffLine("removed", raw[1:]))
        else:
            lines.append(DiffLine("context", raw[1:]))
    return tuple(lines)


def diff_versions(*, model: type[Model], old: Any, new: Any) -> list[FieldChange]:
    """The fields that differ between two historical records of `model`, in form order.

    Long or multi-line values (prompts, package contents, JSON) come with a unified line diff.
    """
    delta = new.diff_against(old, foreign_keys_are_objs=True)
    by_name = {change.field: change for change in delta.changes}
    changes: list[FieldChange] = []
    for field in model._meta.concrete_fields:
        change = by_name.get(field.name)
        if change is None:
            continue
        old_text = display_value(field, change.old)
        new_text = display_value(field, change.new)
        long_value = max(len(old_text), len(new_text)) > INLINE_DIFF_MAX_CHARS
        multiline = "\n" in old_text or "\n" in new_text
        changes.append(
            FieldChange(
                name=field.name,
                label=capfirst(str(field.verbose_name)),
                old=old_text,
                new=new_text,
                lines=line_diff(old_text, new_text) if (long_value or multiline) else (),
            )
        )
    return changes
