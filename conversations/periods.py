"""Periods of local days, as the staff's pages filter them: a day runs from its midnight in the
site's time zone to the next day's, so a period from `date_from` to `date_to` (both included)
is [`day_start(date_from)`, `day_start(date_to + 1 day)`).

`PeriodForm` is the staff pages' choice of a period (the CSAT and the prompt metrics pages):
both days, the start not after the end, at most `MAX_PERIOD_DAYS`. `PERIOD_DATE_VALIDATORS` go on
each period date field: past `LATEST_PERIOD_DATE` the next day (a week's chart, its next Monday)
or its UTC time falls outside Python's calendar (year 9999 at most), which would be a 500 instead
of a form message."""

from datetime import date, datetime, time, timedelta
from typing import Any

from django import forms
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator
from django.utils import timezone
from django.utils.translation import gettext_lazy

LATEST_PERIOD_DATE = date(9998, 12, 31)
PERIOD_DATE_VALIDATORS = [MaxValueValidator(LATEST_PERIOD_DATE)]
# A year and a day: a year's figures whatever the day it starts on.
MAX_PERIOD_DAYS = 366


def day_start(day: date) -> datetime:
    """The midnight that starts `day` in the site's time zone."""
    return datetime.combine(day, time.min, tzinfo=timezone.get_current_timezone())


def period_bounds(date_from: date, date_to: date) -> tuple[datetime, datetime]:
    """[start, end) of the local days from `date_from` to `date_to`, both included."""
    return day_start(date_from), day_start(date_to + timedelta(days=1))


class PeriodForm(forms.Form):
    date_from = forms.DateField(
        label=gettext_lazy("Start date"),
        widget=forms.DateInput(attrs={"type": "date"}),
        validators=PERIOD_DATE_VALIDATORS,
    )
    date_to = forms.DateField(
        label=gettext_lazy("End date"),
        widget=forms.DateInput(attrs={"type": "date"}),
        validators=PERIOD_DATE_VALIDATORS,
    )

    def clean(self) -> dict[str, Any]:
        super().clean()
        start, end = self.cleaned_data.get("date_from"), self.cleaned_data.get("date_to")
        if start and end:
            if start > end:
                raise ValidationError(gettext_lazy("The start date is after the end date."))
            if (end - start).days + 1 > MAX_PERIOD_DAYS:
                raise ValidationError(
                    gettext_lazy("Choose a period of at most %(days)s days."),
                    params={"days": MAX_PERIOD_DAYS},
                )
        return self.cleaned_data
