"""The replay in the admin (docs/architecture.md, Replay a draft): start a replay of a draft, follow
it, cancel it, read it.

- ``replayrun/start/?override=<id>``: the filters, how many recorded calls they select, and the
  button that starts the run (``add_replayrun``; the form's one-time token makes a second submit
  land on the run the first started); the override's change page links here.
- ``replayrun/<id>/change/``: the run read-only — status, progress (replay_progress.js polls
  ``<id>/progress/`` every 2 s while it runs), totals, a Cancel button (POST,
  ``change_replayrun``), and one row per replayed call: recorded against replayed code, state,
  handoff and packages, the contract, and a diff of the customer texts. Staff without
  `conversations.view_personal_data` read the texts masked.
- the changelist, filtered by override from the override's page ("Simulações deste rascunho").

Views parse the request and call one use case (`governance.replay`); the task is enqueued after
the run's transaction commits.
"""

from dataclasses import dataclass
from typing import Any
from uuid import UUID, uuid4

from django.conf import settings
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.translation import gettext
from django.views.decorators.http import require_POST

from agents.masking import Masker
from compat.django_private import unquote
from conversations.models import HANDOFF_REASON_CHOICES, STATE_CHOICES
from conversations.privacy.personal_data import can_view_personal_data, session_masker
from governance.forms import ReplayStartForm
from governance.models import FINISHED_STATUSES, ReplayResult, ReplayRun
from governance.replay import (
    ReplayFilters,
    ReplayRefused,
    replay_calls_count,
    replay_run_cancel,
    replay_run_submit,
)
from governance.tasks import replay_run_enqueue
from prompts_admin.models import PromptOverride
from versioning.diff import DiffLine, line_diff

_HANDOFF_LABELS = dict(HANDOFF_REASON_CHOICES)
_STATE_LABELS = dict(STATE_CHOICES)


def run_progress(run: ReplayRun) -> dict[str, Any]:
    """What the run page's progress shows (and its JSON endpoint returns)."""
    return {
        "status": str(run.status),
        "status_label": str(run.get_status_display()),
        "finished": run.status in FINISHED_STATUSES,
        "cancel_requested": run.cancel_requested,
        "done": run.calls_done,
        "selected": run.calls_selected,
        "detail": run.detail,
        "code_changed": run.code_changed,
        "handoff_changed": run.handoff_changed,
        "contract_errors": run.contract_errors,
        "provider_errors": run.provider_errors,
        "cost_usd": f"{run.cost_usd:.6f}",
    }


@dataclass(frozen=True, slots=True)
class ResultRow:
    """One result as the run page shows it (texts masked when the viewer may not read them)."""

    result: ReplayResult
    recorded_state: str
    replayed_state: str
    recorded_handoff: str
    replayed_handoff: str
    recorded_text: str
    replayed_text: str
    diff: tuple[DiffLine, ...]


def _label(labels: dict[str, Any], value: str) -> str:
    return str(labels.get(value, value)) if value else "—"


def result_rows(results: QuerySet[ReplayResult], *, mask: bool) -> list[ResultRow]:
    """The run's results for the page: one query, whatever their number."""
    rows: list[ResultRow] = []
    maskers: dict[int, Masker] = {}
    for result in results.select_related("session__instance"):
        recorded, replayed = result.recorded_text, result.replayed_text
        if mask:
            masker = _masker(result, maskers)
            recorded, replayed = masker.text(recorded), masker.text(replayed)
        rows.append(
            ResultRow(
                result=result,
                recorded_state=_label(_STATE_LABELS, result.recorded_state),
                replayed_state=_label(_STATE_LABELS, result.replayed_state),
                recorded_handoff=_label(_HANDOFF_LABELS, result.recorded_handoff),
                replayed_handoff=_label(_HANDOFF_LABELS, result.replayed_handoff),
                recorded_text=recorded,
                replayed_text=replayed,
                diff=line_diff(recorded, replayed) if recorded != replayed else (),
            )
        )
    return rows


def _masker(result: ReplayResult, maskers: dict[int, Masker]) -> Masker:
    if result.session is None:
        # The conversation was deleted (retention): patterns only.
        return Masker()
    if result.session.pk not in maskers:
        maskers[result.session.pk] = session_masker(result.session)
    return maskers[result.session.pk]


@admin.register(ReplayRun)
class ReplayRunAdmin(admin.ModelAdmin[ReplayRun]):
    list_display = (
        "id",
        "override",
        "agent",
        "status",
        "progress",
        "code_changed",
        "handoff_changed",
        "contract_errors",
        "cost_usd",
        "created_at",
        "created_by",
    )
    list_filter = ("status", "agent", "override")
    list_select_related = ("override", "created_by")
    run_template = "admin/governance/replayrun/run.html"
    start_template = "admin/governance/replayrun/start.html"

    @admin.display(description=gettext("progress"))
    def progress(self, obj: ReplayRun) -> str:
        return f"{obj.calls_done}/{obj.calls_selected}"

    # Runs are started from an override (the start page), never added or edited as rows.
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: ReplayRun | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: ReplayRun | None = None) -> bool:
        return False

    def get_queryset(self, request: HttpRequest) -> QuerySet[ReplayRun]:
        return super().get_queryset(request).select_related("override", "created_by")

    def may_start(self, request: HttpRequest) -> bool:
        return bool(request.user.has_perm("governance.add_replayrun"))

    def may_cancel(self, request: HttpRequest) -> bool:
        return bool(request.user.has_perm("governance.change_replayrun"))

    def get_urls(self) -> list[URLPattern]:
        wrap = self.admin_site.admin_view
        name = "governance_replayrun"
        return [
            path("start/", wrap(self.start_view), name=f"{name}_start"),
            path("<path:object_id>/progress/", wrap(self.progress_view), name=f"{name}_progress"),
            path(
                "<path:object_id>/cancel/",
                wrap(require_POST(self.cancel_view)),
                name=f"{name}_cancel",
            ),
            *super().get_urls(),
        ]

    def _run(self, request: HttpRequest, object_id: str) -> ReplayRun:
        if not self.has_view_permission(request):
            raise PermissionDenied
        run = self.get_object(request, unquote(object_id))
        if run is None:
            raise Http404
        return run

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        run = self._run(request, object_id)
        if request.method != "GET":
            raise PermissionDenied
        opts = self.model._meta
        mask = not can_view_personal_data(request.user)
        context = {
            **self.admin_site.each_context(request),
            "title": gettext("Replay #%(id)s") % {"id": run.pk},
            "subtitle": None,
            "opts": opts,
            "app_label": opts.app_label,
            "original": run,
            "run": run,
            "progress": run_progress(run),
            "rows": result_rows(run.results.all(), mask=mask),
            "may_cancel": self.may_cancel(request) and run.status not in FINISHED_STATUSES,
            "masked": mask,
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(request, self.run_template, context)

    def progress_view(self, request: HttpRequest, object_id: str) -> JsonResponse:
        return JsonResponse(run_progress(self._run(request, object_id)))

    def cancel_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        run = self._run(request, object_id)
        if not self.may_cancel(request):
            raise PermissionDenied
        if replay_run_cancel(run=run):
            self.message_user(request, gettext("The replay stops before its next call."))
        else:
            self.message_user(request, gettext("The replay had already ended."), messages.WARNING)
        return HttpResponseRedirect(reverse("admin:governance_replayrun_change", args=[run.pk]))

    def start_view(self, request: HttpRequest) -> HttpResponse:
        if not self.may_start(request):
            raise PermissionDenied
        params = request.POST if request.method == "POST" else request.GET
        override = get_object_or_404(PromptOverride, pk=_int_or_404(params.get("override")))
        # GET with filters counts what they select; POST starts the run.
        form = ReplayStartForm(params if "count" in params or request.method == "POST" else None)
        matching: int | None = None
        if form.is_bound and form.is_valid():
            if request.method == "POST":
                started = self._start(request, override=override, form=form)
                if started is not None:
                    return started
            else:
                matching = replay_calls_count(agent=override.agent, filters=form.filters())
        elif not form.is_bound:
            matching = replay_calls_count(agent=override.agent, filters=ReplayFilters())
        opts = self.model._meta
        context = {
            **self.admin_site.each_context(request),
            "title": gettext("Replay a draft: %(override)s") % {"override": override},
            "subtitle": None,
            "opts": opts,
            "app_label": opts.app_label,
            "override": override,
            "form": form,
            "matching": matching,
            "max_calls": settings.REPLAY_MAX_CALLS,
            "max_cost": settings.REPLAY_MAX_COST_USD,
            "max_running": settings.REPLAY_MAX_RUNNING,
            "form_token": str(uuid4()),
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(request, self.start_template, context)

    def _start(
        self, request: HttpRequest, *, override: PromptOverride, form: ReplayStartForm
    ) -> HttpResponse | None:
        """The start button: one run per form (its one-time token), redirected to; None with
        an error message when it may not start (the page is shown again)."""
        try:
            token = UUID(request.POST.get("form_token", ""))
        except ValueError:
            self.message_user(
                request,
                gettext("This form has expired. Reload the page and try again."),
                messages.ERROR,
            )
            return None
        try:
            run, created = replay_run_submit(
                override=override, filters=form.filters(), user=request.user, form_token=token
            )
        except ReplayRefused as refusal:
            self.message_user(request, str(refusal), messages.ERROR)
            return None
        if created:
            replay_run_enqueue(run)
            self.message_user(request, gettext("Replay started."))
        else:
            self.message_user(
                request, gettext("This replay was started already."), messages.WARNING
            )
        return HttpResponseRedirect(reverse("admin:governance_replayrun_change", args=[run.pk]))


def _int_or_404(value: str | None) -> int:
    # ASCII digits only: isdigit() alone lets "²" through, which int() refuses.
    text = (value or "").strip()
    if not (text.isascii() and text.isdigit()):
        raise Http404
    return int(text)
