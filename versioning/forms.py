"""`ChangeReasonForm`, the base of the admin forms of versioned models whose editors say why they
change a version (prompt overrides, knowledge packages): one optional "Motivo da alteração" field,
written to the new version's ``history_change_reason``, which the history page shows in its own
column (`versioning/templates/admin/history/object_history_list.html`).

The model keeps its change reasons as text (``HistoricalRecords(history_change_reason_field=
models.TextField(null=True))``): simple-history's default column holds 100 characters.
"""

from typing import TypeVar

from django import forms
from django.db import models
from django.utils.translation import gettext_lazy as _

CHANGE_REASON_MAX_CHARS = 255

ModelT = TypeVar("ModelT", bound=models.Model)


class ChangeReasonForm(forms.ModelForm[ModelT]):
    """A ModelForm with the optional `change_reason` field; `change_reason_text` is what the
    version records (a subclass may add to it: the override's activation gate does)."""

    change_reason = forms.CharField(
        label=_("Change reason"),
        max_length=CHANGE_REASON_MAX_CHARS,
        required=False,
        help_text=_("Why you change it, in a few words: the history shows it beside the version."),
        widget=forms.TextInput(attrs={"class": "vTextField", "maxlength": CHANGE_REASON_MAX_CHARS}),
    )

    def typed_change_reason(self) -> str:
        """The reason as the editor typed it, trimmed ("" when none, or not valid yet)."""
        return str(getattr(self, "cleaned_data", {}).get("change_reason") or "").strip()

    def change_reason_text(self) -> str:
        """What the new version records as its change reason ("" for none)."""
        return self.typed_change_reason()

    def save(self, commit: bool = True) -> ModelT:
        reason = self.change_reason_text()
        if reason:
            # Read by simple-history when this save writes the version.
            self.instance._change_reason = reason  # type: ignore[attr-defined]
        return super().save(commit)
