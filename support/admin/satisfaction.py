"""The satisfaction surveys' admin and the CSAT page (``/admin/conversations/satisfactionsurvey/
csat/``): the score by week, by staff member and by handoff reason over a period
(`support.satisfaction`). The surveys' list is read-only.

Staff with ``conversations.view_satisfactionsurvey`` (Support, superusers) see both, from the
admin index (its "Customer satisfaction (CSAT)" module) or the list; the others get 403. Nothing
here writes: surveys are written by `conversations.satisfaction` only.
"""

from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.formats import date_format, number_format
from django.utils.html import format_html
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from agents.labels import handoff_label_msgid
from conversations.models import SatisfactionSurvey
from conversations.periods import PeriodForm
from support.satisfaction import Figures, StaffKey, satisfaction_report

DEFAULT_WEEKS = 12
DASH = "—"


def default_period(today: date) -> tuple[date, date]:
    """The last `DEFAULT_WEEKS` weeks, this one included (Monday to today)."""
    monday = today - timedelta(days=today.weekday())
    return monday - timedelta(weeks=DEFAULT_WEEKS - 1), today


def period_form(request: HttpRequest, *, today: date) -> PeriodForm:
    start, end = default_period(today)
    data = {"date_from": start.isoformat(), "date_to": end.isoformat()}
    for key in data:
        if key in request.GET:
            data[key] = request.GET[key]
    return PeriodForm(data)


def decimal(value: float | None, places: int = 1) -> str:
    if value is None:
        return DASH
    # Rounded first: `number_format` cuts the digits beyond `places` off.
    return number_format(round(value, places), places, force_grouping=True)


def percent(value: float | None) -> str:
    return DASH if value is None else f"{decimal(value)} %"


@dataclass(frozen=True, slots=True)
class FigureRow:
    """One table row, formatted for pt-BR."""

    label: str
    due: str
    asked: str
    not_sent: str
    answered: str
    response_rate: str
    average: str
    csat: str


def figure_row(label: str, figures: Figures) -> FigureRow:
    return FigureRow(
        label=label,
        due=decimal(figures.due, 0),
        asked=decimal(figures.asked, 0),
        not_sent=decimal(figures.not_sent, 0),
        answered=decimal(figures.answered, 0),
        response_rate=percent(figures.response_rate),
        average=decimal(figures.average),
        csat=percent(figures.csat),
    )


def week_label(monday: date) -> str:
    return _("week of %(date)s") % {"date": date_format(monday, "SHORT_DATE_FORMAT")}


def staff_label(key: StaffKey) -> str:
    if key.user_id is None:
        return _("Nobody (after a confirmed lead)")
    return key.full_name or key.username


def reason_label(reason: str) -> str:
    return _(handoff_label_msgid(reason)) if reason else _("No handoff")


REPORT_URL_NAME = "conversations_satisfactionsurvey_report"


@admin.register(SatisfactionSurvey)
class SatisfactionSurveyAdmin(admin.ModelAdmin[SatisfactionSurvey]):
    """The surveys, read-only (to find the answers and open their conversations), and the CSAT
    page at ``csat/``, linked from the list and the admin index."""

    list_display = (
        "__str__",
        "conversation",
        "trigger",
        "created_at",
        "not_sent",
        "score",
        "answered_at",
        "closed_by",
        "handoff_reason",
    )
    list_filter = ("trigger", "score", "not_sent", "style")
    list_select_related = ("closed_by",)
    fields = (
        "session",
        "trigger",
        "style",
        "not_sent",
        "question",
        "closed_by",
        "handoff_reason",
        "created_at",
        "asked_at",
        "score",
        "answered_at",
    )
    readonly_fields = fields

    @admin.display(description=gettext_lazy("conversation"))
    def conversation(self, survey: SatisfactionSurvey) -> str:
        url = reverse("admin:conversations_session_change", args=[survey.session_id])
        return format_html('<a href="{}">#{}</a>', url, survey.session_id)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_urls(self) -> list[URLPattern]:
        report = path("csat/", self.admin_site.admin_view(self.report_view), name=REPORT_URL_NAME)
        return [report, *super().get_urls()]

    def report_view(self, request: HttpRequest) -> HttpResponse:
        """The CSAT page; 403 for staff who may not view the surveys."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        form = period_form(request, today=timezone.localdate())
        context: dict[str, Any] = {
            **self.admin_site.each_context(request),
            "title": _("Customer satisfaction (CSAT)"),
            "opts": self.model._meta,
            "form": form,
        }
        if form.is_valid():
            report = satisfaction_report(
                date_from=form.cleaned_data["date_from"], date_to=form.cleaned_data["date_to"]
            )
            context |= {
                "report": report,
                "period": _("from %(start)s to %(end)s")
                % {
                    "start": date_format(report.date_from, "SHORT_DATE_FORMAT"),
                    "end": date_format(report.date_to, "SHORT_DATE_FORMAT"),
                },
                "total": figure_row(_("Whole period"), report.total),
                "weeks": [figure_row(week_label(day), f) for day, f in report.weeks],
                "staff": [figure_row(staff_label(key), f) for key, f in report.staff],
                "reasons": [figure_row(reason_label(r), f) for r, f in report.reasons],
            }
        return TemplateResponse(
            request, "admin/conversations/satisfactionsurvey/report.html", context
        )
