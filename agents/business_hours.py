"""Business hours: is the company open now, and when does it open next (DESIGN.md §6, §8).

The weekly hours are RuntimeConfig's ``{"mon": [["08:00", "18:00"]], ..., "sun": []}`` in
Brasília time; Brazilian national holidays (the `holidays` package, public category, no state or
city holidays) are closed all day. Spans are half-open: ``["08:00", "18:00"]`` is open at 08:00
and closed at 18:00. Pure module (no Django import).
"""

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo

import holidays

BUSINESS_TZ = ZoneInfo("America/Sao_Paulo")
WEEKDAY_KEYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
# How far ahead to look for the next opening; a week with no span at all has none.
_SEARCH_DAYS = 21


@dataclass(frozen=True, slots=True)
class BusinessHoursStatus:
    """Open or closed at a moment; `next_opening` is None while open (or when there is none)."""

    is_open: bool
    next_opening: datetime | None
    # The national holiday of that day (pt-BR name), when it is one.
    holiday: str | None


@lru_cache(maxsize=8)
def _national_holidays(year: int) -> dict[date, str]:
    calendar = holidays.country_holidays("BR", years=year, language="pt_BR")
    return dict(calendar.items())


def national_holidays(year: int) -> list[tuple[date, str]]:
    """The Brazilian national holidays of `year` (pt-BR names), in date order."""
    return sorted(_national_holidays(year).items())


def national_holiday(day: date) -> str | None:
    """The pt-BR name of the Brazilian national holiday on `day`, or None."""
    return _national_holidays(day.year).get(day)


def _spans(weekly: Mapping[str, list[list[str]]], day: date) -> list[tuple[time, time]]:
    spans = weekly.get(WEEKDAY_KEYS[day.weekday()]) or []
    return sorted((time.fromisoformat(start), time.fromisoformat(end)) for start, end in spans)


def business_hours_status(
    weekly: Mapping[str, list[list[str]]], now: datetime
) -> BusinessHoursStatus:
    """Whether the company is open at `now` (an aware datetime) and, if not, its next opening.

    `next_opening` is an aware datetime in America/Sao_Paulo; it skips national holidays.
    """
    if now.tzinfo is None:
        raise ValueError("business_hours_status needs an aware datetime")
    local = now.astimezone(BUSINESS_TZ)
    today = local.date()
    holiday = national_holiday(today)
    if holiday is None:
        for start, end in _spans(weekly, today):
            if start <= local.time() < end:
                return BusinessHoursStatus(is_open=True, next_opening=None, holiday=None)
    return BusinessHoursStatus(
        is_open=False, next_opening=_next_opening(weekly, local), holiday=holiday
    )


def _next_opening(weekly: Mapping[str, list[list[str]]], local: datetime) -> datetime | None:
    for offset in range(_SEARCH_DAYS):
        day = local.date() + timedelta(days=offset)
        if national_holiday(day) is not None:
            continue
        for start, _end in _spans(weekly, day):
            opening = datetime.combine(day, start, tzinfo=BUSINESS_TZ)
            if opening > local:
                return opening
    return None
