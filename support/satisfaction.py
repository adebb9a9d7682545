"""The CSAT page's figures (`support.admin.satisfaction`): the satisfaction surveys of a period
by week, by the staff member who closed the conversation and by handoff reason.

Each group counts the surveys due (every row: asked, or not sent because the window had closed),
those asked, those answered, the average score on the 1-5 scale and the CSAT — the share of the
answers at `conversations.satisfaction.TOP_SCORE` or above. A survey belongs to the period and
week in which it was due (`SatisfactionSurvey.created_at`, local time; weeks start on Monday),
so a week's figures do not move when an answer arrives days later. Four aggregate queries, one
per table and one for the whole period, whatever the number of surveys.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date
from typing import Any

from django.db.models import Avg, Count, Q, QuerySet
from django.db.models.functions import TruncWeek
from django.utils import timezone

from conversations.models import SatisfactionSurvey
from conversations.periods import period_bounds
from conversations.satisfaction import TOP_SCORE

_FIGURES: dict[str, Any] = {
    "due": Count("pk"),
    "asked": Count("pk", filter=Q(asked_at__isnull=False)),
    "answered": Count("score"),
    "average": Avg("score"),
    "top": Count("pk", filter=Q(score__gte=TOP_SCORE)),
}


@dataclass(frozen=True, slots=True)
class Figures:
    """The counts of one group of surveys, and what follows from them."""

    due: int
    asked: int
    answered: int
    average: float | None  # None: no answer
    top: int

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> "Figures":
        return cls(
            due=row["due"] or 0,
            asked=row["asked"] or 0,
            answered=row["answered"] or 0,
            average=None if row["average"] is None else float(row["average"]),
            top=row["top"] or 0,
        )

    @property
    def not_sent(self) -> int:
        return self.due - self.asked

    @property
    def csat(self) -> float | None:
        """The share of satisfied answers, in percent (None: no answer)."""
        return 100 * self.top / self.answered if self.answered else None

    @property
    def response_rate(self) -> float | None:
        """The share of the questions asked that were answered, in percent."""
        return 100 * self.answered / self.asked if self.asked else None


@dataclass(frozen=True, slots=True)
class StaffKey:
    user_id: int | None  # None: asked after a confirmed lead, or the closer was deleted
    username: str
    full_name: str


@dataclass(frozen=True, slots=True)
class SatisfactionReport:
    date_from: date
    date_to: date
    total: Figures
    weeks: list[tuple[date, Figures]]  # the Monday of each week, oldest first
    staff: list[tuple[StaffKey, Figures]]  # most surveys first
    reasons: list[tuple[str, Figures]]  # the handoff reason ("" for none), most surveys first


def period_surveys(date_from: date, date_to: date) -> QuerySet[SatisfactionSurvey]:
    """The surveys due from `date_from` to `date_to` (inclusive, local days)."""
    start, end = period_bounds(date_from, date_to)
    return SatisfactionSurvey.objects.filter(created_at__gte=start, created_at__lt=end)


def satisfaction_report(*, date_from: date, date_to: date) -> SatisfactionReport:
    surveys = period_surveys(date_from, date_to).order_by()
    total = Figures.of(surveys.aggregate(**_FIGURES))
    weeks = [
        (timezone.localtime(row["week"]).date(), Figures.of(row))
        for row in surveys.annotate(week=TruncWeek("created_at"))
        .values("week")
        .annotate(**_FIGURES)
        .order_by("week")
    ]
    staff = [
        (
            StaffKey(
                user_id=row["closed_by"],
                username=row["closed_by__username"] or "",
                full_name=" ".join(
                    part
                    for part in (row["closed_by__first_name"], row["closed_by__last_name"])
                    if part
                ),
            ),
            Figures.of(row),
        )
        for row in surveys.values(
            "closed_by", "closed_by__username", "closed_by__first_name", "closed_by__last_name"
        )
        .annotate(**_FIGURES)
        .order_by("closed_by__username")
    ]
    staff.sort(key=lambda pair: -pair[1].due)  # stable: by username among equals
    reasons = [
        (row["handoff_reason"], Figures.of(row))
        for row in surveys.values("handoff_reason").annotate(**_FIGURES).order_by("handoff_reason")
    ]
    reasons.sort(key=lambda pair: -pair[1].due)
    return SatisfactionReport(
        date_from=date_from,
        date_to=date_to,
        total=total,
        weeks=weeks,
        staff=staff,
        reasons=reasons,
    )
