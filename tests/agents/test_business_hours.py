from datetime import UTC, date, datetime, timedelta

import pytest

from agents.business_hours import (
    BUSINESS_TZ,
    BusinessHoursStatus,
    business_hours_status,
    national_holiday,
)

WEEKLY = {
    "mon": [["08:00", "12:00"], ["13:00", "18:00"]],
    "tue": [["08:00", "18:00"]],
    "wed": [["08:00", "18:00"]],
    "thu": [["08:00", "18:00"]],
    "fri": [["08:00", "17:00"]],
    "sat": [],
    "sun": [],
}


def sp(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=BUSINESS_TZ)


@pytest.mark.parametrize(
    ("now", "expected"),
    [
        # Tuesday 2026-03-10, inside the span.
        (sp(2026, 3, 10, 10, 30), BusinessHoursStatus(True, None, None)),
        # Opening minute is open, closing minute is closed (half-open spans).
        (sp(2026, 3, 10, 8, 0), BusinessHoursStatus(True, None, None)),
        (sp(2026, 3, 10, 18, 0), BusinessHoursStatus(False, sp(2026, 3, 11, 8, 0), None)),
        # Before opening: opens later the same day.
        (sp(2026, 3, 10, 6, 15), BusinessHoursStatus(False, sp(2026, 3, 10, 8, 0), None)),
        # Monday lunch break: the afternoon span the same day.
        (sp(2026, 3, 9, 12, 30), BusinessHoursStatus(False, sp(2026, 3, 9, 13, 0), None)),
        # Friday after 17:00, Saturday and Sunday: next Monday.
        (sp(2026, 3, 13, 17, 5), BusinessHoursStatus(False, sp(2026, 3, 16, 8, 0), None)),
        (sp(2026, 3, 14, 11, 0), BusinessHoursStatus(False, sp(2026, 3, 16, 8, 0), None)),
        (sp(2026, 3, 15, 23, 59), BusinessHoursStatus(False, sp(2026, 3, 16, 8, 0), None)),
    ],
)
def test_open_or_closed_and_next_opening(now: datetime, expected: BusinessHoursStatus) -> None:
    assert business_hours_status(WEEKLY, now) == expected


def test_a_national_holiday_on_a_weekday_is_closed_all_day_and_named() -> None:
    # 2026-11-20 is a Friday and, since 2024, a national holiday.
    status = business_hours_status(WEEKLY, sp(2026, 11, 20, 10, 0))

    assert status == BusinessHoursStatus(
        is_open=False,
        next_opening=sp(2026, 11, 23, 8, 0),
        holiday="Dia Nacional de Zumbi e da Consciência Negra",
    )


def test_next_opening_skips_a_holiday_friday_and_the_weekend() -> None:
    # Thursday evening before Christmas (Friday 2026-12-25).
    status = business_hours_status(WEEKLY, sp(2026, 12, 24, 19, 0))

    assert status == BusinessHoursStatus(False, sp(2026, 12, 28, 8, 0), None)


def test_now_in_another_time_zone_is_read_in_brasilia_time() -> None:
    # 12:30 UTC is 09:30 in São Paulo (UTC-3): open on a Tuesday.
    status = business_hours_status(WEEKLY, datetime(2026, 3, 10, 12, 30, tzinfo=UTC))

    assert status == BusinessHoursStatus(True, None, None)


def test_next_opening_is_in_brasilia_time() -> None:
    status = business_hours_status(WEEKLY, datetime(2026, 3, 10, 22, 0, tzinfo=UTC))

    assert status.next_opening == sp(2026, 3, 11, 8, 0)
    assert status.next_opening is not None
    assert status.next_opening.utcoffset() == timedelta(hours=-3)


def test_a_week_without_any_span_has_no_next_opening() -> None:
    closed_week: dict[str, list[list[str]]] = {day: [] for day in WEEKLY}

    assert business_hours_status(closed_week, sp(2026, 3, 10, 10, 0)) == BusinessHoursStatus(
        False, None, None
    )


def test_missing_weekdays_are_closed() -> None:
    assert business_hours_status({"mon": [["08:00", "18:00"]]}, sp(2026, 3, 10, 10, 0)) == (
        BusinessHoursStatus(False, sp(2026, 3, 16, 8, 0), None)
    )


def test_a_naive_datetime_is_refused() -> None:
    with pytest.raises(ValueError, match="aware datetime"):
        business_hours_status(WEEKLY, datetime(2026, 3, 10, 10, 0))


@pytest.mark.parametrize(
    ("day", "name"),
    [
        (date(2026, 12, 25), "Natal"),
        (date(2026, 4, 21), "Tiradentes"),
        (date(2026, 3, 10), None),
        # Carnival is an optional day off, not a national holiday.
        (date(2026, 2, 17), None),
    ],
)
def test_national_holiday(day: date, name: str | None) -> None:
    assert national_holiday(day) == name
