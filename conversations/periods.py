"""Periods of local days, as the staff's pages filter them: a day runs from its midnight in the
site's time zone to the next day's, so a period from `date_from` to `date_to` (both included)
is [`day_start(date_from)`, `day_start(date_to + 1 day)`).

`PERIOD_DATE_VALIDATORS` go on each period form's date fields: past `LATEST_PERIOD_DATE` the next
day (a week's chart, its next Monday) or its UTC time falls outside Python's calendar (year 9999
at most), which would be a 500 instead of a form message."""

from datetime import date, datetime, time, timedelta

from django.core.validators import MaxValueValidator
from django.utils import timezone

LATEST_PERIOD_DATE = date(9998, 12, 31)
PERIOD_DATE_VALIDATORS = [MaxValueValidator(LATEST_PERIOD_DATE)]


def day_start(day: date) -> datetime:
    """The midnight that starts `day` in the site's time zone."""
    return datetime.combine(day, time.min, tzinfo=timezone.get_current_timezone())


def period_bounds(date_from: date, date_to: date) -> tuple[datetime, datetime]:
    """[start, end) of the local days from `date_from` to `date_to`, both included."""
    return day_start(date_from), day_start(date_to + timedelta(days=1))
