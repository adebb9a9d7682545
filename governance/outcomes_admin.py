"""The admin page "Prompt metrics per version" (docs/architecture.md, Outcome metrics per prompt
version): a filter form, the agent's gradual release if it has one (its candidate and the current
version side by side, counted as the automatic pause counts them), a table of the versions newest
first with the change in handoff rate from the version before, the handoff rate by reason, and a
chart of the handoff rate over the period.

Staff who may read prompt overrides (`prompts_admin.view_promptoverride`: prompt editors,
superusers) see it; other staff get 403, the admin's login check comes first (the URL is wrapped
in `admin.site.admin_view`, governance/urls.py). The numbers come from
`governance.outcomes.prompt_metrics`; this module only labels and formats them.
"""

from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from django import forms
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils import timezone
from django.utils.formats import date_format, number_format
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from agents.labels import HANDOFF_REASON_LABELS
from agents.sources import BUILTIN_PROMPT_VERSION
from agents.states import AgentName, HandoffReason
from conversations.periods import PeriodForm
from governance.charts import Point, Series, line_chart
from governance.outcomes import (
    HANDOFF_REASONS,
    OVERRIDE_PREFIX,
    MetricsFilters,
    PromptMetrics,
    VersionMetrics,
    default_filters,
    prompt_metrics,
)
from governance.rollout_pause import ReleaseSides, Side, release_sides, releases
from prompts_admin.models import AGENT_CHOICES, PromptOverride

VIEW_PERMISSION = "prompts_admin.view_promptoverride"
METRICS_URL_NAME = "governance_prompt_metrics"
DASH = "—"


class MetricsFilterForm(PeriodForm):
    field_order = ["agent", "date_from", "date_to", "include_simulated"]

    agent = forms.ChoiceField(label=gettext_lazy("Agent"), choices=AGENT_CHOICES)
    include_simulated = forms.BooleanField(
        label=gettext_lazy("Include simulated conversations"), required=False
    )

    def filters(self) -> MetricsFilters:
        data = self.cleaned_data
        return MetricsFilters(
            agent=AgentName(data["agent"]),
            date_from=data["date_from"],
            date_to=data["date_to"],
            include_simulated=data["include_simulated"],
        )


def filter_form(request: HttpRequest, *, today: date) -> MetricsFilterForm:
    """The form bound to the query string, the defaults filling what it leaves out."""
    defaults = default_filters(today=today)
    data: dict[str, Any] = {
        "agent": defaults.agent.value,
        "date_from": defaults.date_from.isoformat(),
        "date_to": defaults.date_to.isoformat(),
    }
    for key in ("agent", "date_from", "date_to", "include_simulated"):
        if key in request.GET:
            data[key] = request.GET[key]
    return MetricsFilterForm(data)


def can_view_metrics(user: Any) -> bool:
    return bool(user.is_active and user.is_staff and user.has_perm(VIEW_PERMISSION))


def version_label(metrics: VersionMetrics) -> str:
    """ "Padrão (built-in)", "Override #3 · versão 345 · 12/11", or the recorded version."""
    if metrics.version == BUILTIN_PROMPT_VERSION:
        return _("Built-in (default)")
    if not metrics.version:  # calls recorded before the version was
        return _("No version recorded")
    override = metrics.override
    if override is not None:
        when = date_format(timezone.localtime(override.date), "d/m")
        return _("Override #%(override)s · version %(version)s · %(date)s") % {
            "override": override.override_id,
            "version": override.history_id,
            "date": when,
        }
    tail = metrics.version.removeprefix(OVERRIDE_PREFIX)
    if tail.startswith("unversioned-"):
        return _("Override #%(override)s (unversioned)") % {
            "override": tail.removeprefix("unversioned-")
        }
    if tail.isascii() and tail.isdigit():
        return _("Override, version %(version)s (deleted)") % {"version": tail}
    return metrics.version


def decimal(value: float | None, places: int = 1) -> str:
    if value is None:
        return DASH
    # Rounded first: `number_format` cuts the digits beyond `places` off.
    return number_format(round(value, places), places, force_grouping=True)


def percent_text(value: float | None) -> str:
    """A share with one decimal and the percent sign ("90,0 %"); a dash for None."""
    return DASH if value is None else f"{decimal(value)} %"


def points_change(current: float, previous: float | None) -> str:
    """The change in percentage points, signed: "+4,2 p.p."; a dash without a previous."""
    if previous is None:
        return DASH
    change = round(current - previous, 1)
    sign = "+" if change > 0 else ("\N{MINUS SIGN}" if change < 0 else "±")
    return _("%(sign)s%(value)s p.p.") % {"sign": sign, "value": decimal(abs(change))}


@dataclass(frozen=True, slots=True)
class VersionRow:
    label: str
    note: str
    version: str
    sessions: str
    turns: str
    calls: str
    handoff_rate: str
    handoff_change: str
    handoff_change_direction: str  # "up", "down" or "" (the cell's class)
    contract_violations: str
    repairs: str
    turns_to_qualification: str
    turns_to_confirmation: str
    leads_per_session: str
    tokens_per_session: str
    cost_per_session: str
    cache_share: str
    latency: str
    by_reason: list[str]


def version_rows(metrics: PromptMetrics, reasons: list[HandoffReason]) -> list[VersionRow]:
    rows = []
    versions = metrics.versions
    for index, one in enumerate(versions):
        previous = versions[index + 1].handoff_rate if index + 1 < len(versions) else None
        change = None if previous is None else round(one.handoff_rate - previous, 1)
        cost = one.cost_per_session_usd
        rows.append(
            VersionRow(
                label=version_label(one),
                note=one.override.note if one.override else "",
                version=one.version,
                sessions=decimal(one.sessions, 0),
                turns=decimal(one.turns, 0),
                calls=decimal(one.calls, 0),
                handoff_rate=f"{decimal(one.handoff_rate)} %",
                handoff_change=points_change(one.handoff_rate, previous),
                handoff_change_direction=("" if not change else ("up" if change > 0 else "down")),
                contract_violations=decimal(one.contract_violations_per_100_calls, 2),
                repairs=decimal(one.repairs_per_100_calls, 2),
                turns_to_qualification=decimal(one.turns_to_qualification),
                turns_to_confirmation=decimal(one.turns_to_confirmation),
                leads_per_session=decimal(one.leads_per_session, 2),
                tokens_per_session=decimal(one.tokens_per_session, 0),
                cost_per_session=DASH if cost is None else number_format(round(cost, 6), 6),
                cache_share=percent_text(one.cache_hit_share),
                latency=f"{decimal(one.latency_p50_ms, 0)} / {decimal(one.latency_p95_ms, 0)}",
                by_reason=[
                    f"{decimal(one.handoff_rate_for(reason.value))} %" for reason in reasons
                ],
            )
        )
    return rows


def shown_reasons(metrics: PromptMetrics) -> list[HandoffReason]:
    """The handoff reasons some version had, in the enum's order (the by-reason columns)."""
    seen = {reason for one in metrics.versions for reason in one.handoffs_by_reason}
    return [reason for reason in HANDOFF_REASONS if reason.value in seen]


def bucket_label(day: date, bucket: str) -> str:
    text = date_format(day, "d/m")
    return _("week of %(date)s") % {"date": text} if bucket == "week" else text


def handoff_chart_title(metrics: PromptMetrics, *, agent_label: str) -> str:
    per = _("per day") if metrics.filters.bucket == "day" else _("per week")
    return _("Handoff rate of the %(agent)s agent's prompt versions, %(per)s") % {
        "agent": agent_label,
        "per": per,
    }


def handoff_chart(metrics: PromptMetrics, *, agent_label: str) -> SafeString:
    """The handoff rate per version and day (or week), oldest version first in the legend."""
    bucket = metrics.filters.bucket
    labels = [bucket_label(day, bucket) for day in metrics.buckets]
    series = []
    top = 0.0
    for one in reversed(metrics.versions):
        name = version_label(one)
        by_day = metrics.points.get(one.version, {})
        points: list[Point | None] = []
        for day, label in zip(metrics.buckets, labels, strict=True):
            point = by_day.get(day)
            if point is None:
                points.append(None)
                continue
            top = max(top, point.handoff_rate)
            title = _(
                "%(version)s · %(date)s: %(rate)s %% handed off "
                "(%(handoffs)s of %(sessions)s conversations)"
            ) % {
                "version": name,
                "date": label,
                "rate": decimal(point.handoff_rate),
                "handoffs": point.handoffs,
                "sessions": point.sessions,
            }
            points.append(Point(value=point.handoff_rate, title=title))
        series.append(Series(name=name, points=points))
    y_max = min(100.0, max(10.0, 10 * -(-top // 10)))
    per = _("per day") if bucket == "day" else _("per week")
    title = handoff_chart_title(metrics, agent_label=agent_label)
    description = _(
        "Share of the conversations that spoke to each version and were handed to a person "
        "(confirmed leads excluded), %(per)s, from %(start)s to %(end)s."
    ) % {
        "per": per,
        "start": date_format(metrics.filters.date_from, "SHORT_DATE_FORMAT"),
        "end": date_format(metrics.filters.date_to, "SHORT_DATE_FORMAT"),
    }
    svg = line_chart(
        title=title,
        description=description,
        x_labels=labels,
        series=series,
        y_max=y_max,
        format_y=lambda value: f"{decimal(value, 0)} %",
        chart_id="handoff-chart",
    )
    # The chart escapes every text it writes (governance.charts).
    return mark_safe(svg)


@dataclass(frozen=True, slots=True)
class SideColumn:
    label: str
    share: str
    conversations: str
    handoff_rate: str
    contract_error_rate: str


@dataclass(frozen=True, slots=True)
class ReleaseComparison:
    """The agent's gradual release, its candidate and the current version side by side."""

    override_id: int
    started_at: datetime
    paused_at: datetime | None
    pause_reason: str
    candidate: SideColumn
    current: SideColumn


def _side_column(side: Side, *, label: str, share: str) -> SideColumn:
    return SideColumn(
        label=label,
        share=share,
        conversations=decimal(side.conversations, 0),
        handoff_rate=percent_text(100 * side.handoff.rate),
        contract_error_rate=percent_text(100 * side.contract.rate),
    )


def release_comparison(agent: AgentName) -> ReleaseComparison | None:
    """The agent's gradual release, paused or not, counted as its automatic pause counts it
    (`governance.rollout_pause.release_sides`); None without one. One query without a release,
    three with one."""
    found: list[ReleaseSides] = release_sides(releases(agent=agent.value, include_paused=True))
    if not found:
        return None
    sides = found[0]  # one candidate per agent (prompts_admin.rollout)
    release = sides.release
    return ReleaseComparison(
        override_id=release.override_id,
        started_at=release.started_at,
        paused_at=release.paused_at,
        pause_reason=release.pause_reason,
        candidate=_side_column(
            sides.candidate,
            label=_("Candidate: override #%(id)s") % {"id": release.override_id},
            # Paused, the share is kept for the resume but no new conversation gets it.
            share=(
                _("%(percent)s %% (paused)") % {"percent": release.percent}
                if release.paused_at
                else f"{release.percent} %"
            ),
        ),
        current=_side_column(
            sides.current, label=_("Current version"), share=f"{100 - release.percent} %"
        ),
    )


def prompt_metrics_view(request: HttpRequest) -> HttpResponse:
    """The page; 403 for staff who may not read prompt overrides."""
    if not can_view_metrics(request.user):
        raise PermissionDenied
    form = filter_form(request, today=timezone.localdate())
    context: dict[str, Any] = {
        **admin.site.each_context(request),
        "title": _("Prompt metrics per version"),
        "opts": PromptOverride._meta,
        "form": form,
    }
    if form.is_valid():
        filters = form.filters()
        metrics = prompt_metrics(filters=filters)
        agent_label = str(dict(AGENT_CHOICES)[filters.agent.value])
        reasons = shown_reasons(metrics)
        context |= {
            "metrics": metrics,
            "agent_label": agent_label,
            "rows": version_rows(metrics, reasons),
            "reasons": [str(_(HANDOFF_REASON_LABELS[reason])) for reason in reasons],
            "chart": handoff_chart(metrics, agent_label=agent_label) if metrics.versions else "",
            "chart_title": handoff_chart_title(metrics, agent_label=agent_label),
            "is_triage": filters.agent is AgentName.TRIAGEM,
            "release": release_comparison(filters.agent),
        }
    return TemplateResponse(request, "admin/governance/prompt_metrics.html", context)
