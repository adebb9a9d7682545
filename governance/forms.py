"""The replay start form: which recorded calls to replay (`governance.replay.ReplayFilters`)."""

from typing import Any

from django import forms
from django.utils.translation import gettext_lazy as _

from conversations.models import HANDOFF_REASON_CHOICES
from governance.replay import ReplayFilters
from knowledge_base.models import Segment


class ReplayStartForm(forms.Form):
    date_from = forms.DateField(
        label=_("From"), required=False, widget=forms.DateInput(attrs={"type": "date"})
    )
    date_to = forms.DateField(
        label=_("Until"), required=False, widget=forms.DateInput(attrs={"type": "date"})
    )
    segment = forms.ChoiceField(label=_("Segment of the conversation"), required=False)
    handoff_reason = forms.ChoiceField(
        label=_("Handoff reason of the conversation"),
        required=False,
        choices=[("", _("any")), *HANDOFF_REASON_CHOICES],
    )
    last_n = forms.IntegerField(
        label=_("Only the newest N calls"), required=False, min_value=1, max_value=100_000
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        segments = Segment.objects.order_by("code").values_list("code", "label")
        segment = self.fields["segment"]
        assert isinstance(segment, forms.ChoiceField)
        segment.choices = [
            ("", _("any")),
            *((code, f"{label} ({code})") for code, label in segments),
        ]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        start, end = data.get("date_from"), data.get("date_to")
        if start and end and start > end:
            raise forms.ValidationError(_("The start date is after the end date."))
        return data

    def filters(self) -> ReplayFilters:
        data = self.cleaned_data
        return ReplayFilters(
            date_from=data.get("date_from"),
            date_to=data.get("date_to"),
            segment=data.get("segment") or "",
            handoff_reason=data.get("handoff_reason") or "",
            last_n=data.get("last_n"),
        )
