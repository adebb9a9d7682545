"""The replay start form: which recorded calls to replay (`governance.replay.ReplayFilters`); the
prompt test case form: what an editor expects of a case's answer (`governance.test_cases`)."""

from typing import Any

from django import forms
from django.utils.translation import gettext_lazy as _

from conversations.models import HANDOFF_REASON_CHOICES
from conversations.periods import PERIOD_DATE_VALIDATORS
from governance.models import PromptTestCase
from governance.replay import ReplayFilters
from knowledge_base.models import Segment


class ReplayStartForm(forms.Form):
    date_from = forms.DateField(
        label=_("From"),
        required=False,
        widget=forms.DateInput(attrs={"type": "date"}),
        validators=PERIOD_DATE_VALIDATORS,
    )
    date_to = forms.DateField(
        label=_("Until"),
        required=False,
        widget=forms.DateInput(attrs={"type": "date"}),
        validators=PERIOD_DATE_VALIDATORS,
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


# A case's texts and fields are a few short lines; longer would be a rule, not a test.
LINES_MAX = 20
LINE_MAX_CHARS = 200


class LinesField(forms.CharField):
    """A list of short texts, one per line (blank lines dropped)."""

    widget = forms.Textarea(attrs={"rows": 3, "cols": 60})

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, list | tuple):
            return "\n".join(str(v) for v in value)
        return value

    def to_python(self, value: Any) -> list[str]:  # type: ignore[override]
        if isinstance(value, list | tuple):
            return [str(v).strip() for v in value if str(v).strip()]
        text = super().to_python(value) or ""
        return [line.strip() for line in text.splitlines() if line.strip()]

    def run_validators(self, value: Any) -> None:
        # Line by line: on the list, the null-character check would read its repr, where a
        # NUL is escaped, and PostgreSQL's jsonb refuses one (a 500 instead of the message).
        for line in value:
            super().run_validators(line)

    def validate(self, value: Any) -> None:
        if len(value) > LINES_MAX:
            raise forms.ValidationError(
                _("At most %(max)s lines."), code="too_many", params={"max": LINES_MAX}
            )
        for line in value:
            if len(line) > LINE_MAX_CHARS:
                raise forms.ValidationError(
                    _("A line has at most %(max)s characters."),
                    code="too_long",
                    params={"max": LINE_MAX_CHARS},
                )

    def has_changed(self, initial: Any, data: Any) -> bool:
        return bool(self.to_python(initial or []) != self.to_python(data))


EXPECTATION_FIELDS = (
    "title",
    "expected_code",
    "expected_state",
    "handoff_expected",
    "expected_handoff_reason",
    "required_fields",
    "must_contain",
    "must_not_contain",
    "expected_package",
    "is_active",
)


class PromptTestCaseForm(forms.ModelForm[PromptTestCase]):
    """The editor's expectations of a case; the frozen call is never edited."""

    required_fields = LinesField(
        label=_("Required fields"),
        required=False,
        help_text=_(
            "One per line: a key of the answer's JSON (motivo), or a key inside one "
            "(dados.email); each must be present and not empty."
        ),
    )
    must_contain = LinesField(
        label=_("Texts that must appear in the reply"),
        required=False,
        help_text=_("One per line; compared as plain text, ignoring upper and lower case."),
    )
    must_not_contain = LinesField(
        label=_("Texts that must not appear in the reply"),
        required=False,
        help_text=_("One per line; compared as plain text, ignoring upper and lower case."),
    )

    class Meta:
        model = PromptTestCase
        fields = list(EXPECTATION_FIELDS)
        help_texts = {
            "expected_code": _("Empty: any code."),
            "expected_state": _("Empty: not checked."),
            "expected_handoff_reason": _("Empty: any reason."),
            "expected_package": _("Empty: not checked."),
        }

    def expectations(self) -> dict[str, Any]:
        return {name: self.cleaned_data[name] for name in EXPECTATION_FIELDS if name != "title"}
