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

Prompt test cases (`governance.test_cases`): a model call's page (the conversations app's
`LLMCallAdmin`, registered again here with a link it cannot know of: this app is above it) links
to ``prompttestcase/from-call/<call id>/``, a form prefilled from the call's recorded answer
(``add_prompttestcase``); the case's own page edits its expectations. Test runs are read-only.

Views parse the request and call one use case (`governance.replay`); the task is enqueued after
the run's transaction commits.
"""

from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html
from django.utils.translation import gettext, gettext_lazy
from django.views.decorators.http import require_POST

from agents.masking import Masker, known_values
from agents.states import AgentName
from compat.django_private import unquote
from conversations.admin import LLMCallAdmin
from conversations.models import (
    HANDOFF_REASON_CHOICES,
    STATE_CHOICES,
    Direction,
    LLMCall,
    LLMCallPurpose,
    Message,
)
from conversations.privacy.personal_data import can_view_personal_data, session_masker
from governance.forms import EXPECTATION_FIELDS, PromptTestCaseForm, ReplayStartForm
from governance.models import (
    HandoffExpectation,
    PromptTestCase,
    PromptTestRun,
    ReplayResult,
    ReplayRun,
)
from governance.recorded import SnapshotError
from governance.replay import (
    ReplayDeps,
    ReplayFilters,
    ReplayRefused,
    replay_calls_count,
    replay_run_cancel,
    replay_run_submit,
)
from governance.run_admin import (
    RunAdmin,
    admin_page,
    int_or_404,
    new_form_token,
    progress_fields,
)
from governance.tasks import prompt_tests_enqueue, replay_run_enqueue
from governance.test_cases import (
    active_cases_count,
    call_prefill,
    case_masker,
    prompt_test_case_create,
)
from prompts_admin.models import PromptOverride
from versioning.diff import DiffLine, line_diff

_HANDOFF_LABELS = dict(HANDOFF_REASON_CHOICES)
_STATE_LABELS = dict(STATE_CHOICES)


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
class ReplayRunAdmin(RunAdmin[ReplayRun]):
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

    def run_progress(self, run: ReplayRun) -> dict[str, Any]:
        return {
            **progress_fields(run, done=run.calls_done, selected=run.calls_selected),
            "cancel_requested": run.cancel_requested,
            "code_changed": run.code_changed,
            "handoff_changed": run.handoff_changed,
            "contract_errors": run.contract_errors,
            "provider_errors": run.provider_errors,
        }

    def get_queryset(self, request: HttpRequest) -> QuerySet[ReplayRun]:
        return super().get_queryset(request).select_related("override", "created_by")

    def may_start(self, request: HttpRequest) -> bool:
        return bool(request.user.has_perm("governance.add_replayrun"))

    def may_cancel(self, request: HttpRequest) -> bool:
        return bool(request.user.has_perm("governance.change_replayrun"))

    def extra_urls(self) -> list[URLPattern]:
        return [
            path(
                "<path:object_id>/cancel/",
                self.admin_site.admin_view(require_POST(self.cancel_view)),
                name="governance_replayrun_cancel",
            ),
        ]

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        run = self.viewed_run(request, object_id)
        mask = not can_view_personal_data(request.user)
        return self.run_page(
            request,
            run,
            title=gettext("Replay #%(id)s") % {"id": run.pk},
            rows=result_rows(run.results.all(), mask=mask),
            may_cancel=self.may_cancel(request) and not run.finished,
            masked=mask,
        )

    def cancel_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        run = self.viewed_run(request, object_id)
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
        override = get_object_or_404(PromptOverride, pk=int_or_404(params.get("override")))
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
        return admin_page(
            self,
            request,
            self.start_template,
            title=gettext("Replay a draft: %(override)s") % {"override": override},
            override=override,
            form=form,
            matching=matching,
            max_calls=settings.REPLAY_MAX_CALLS,
            max_cost=settings.REPLAY_MAX_COST_USD,
            max_running=settings.REPLAY_MAX_RUNNING,
            form_token=new_form_token(),
        )

    def _start(
        self, request: HttpRequest, *, override: PromptOverride, form: ReplayStartForm
    ) -> HttpResponse | None:
        return self.start_submitted(
            request,
            lambda token: replay_run_submit(
                override=override, filters=form.filters(), user=request.user, form_token=token
            ),
            refused=ReplayRefused,
            enqueue=replay_run_enqueue,
            started=gettext("Replay started."),
            again=gettext("This replay was started already."),
        )


# --- Prompt test cases --------------------------------------------------------------------------

CASE_AGENTS = frozenset(
    {AgentName.TRIAGEM.value, AgentName.QUALIFICACAO.value, AgentName.COLETA.value}
)
ADD_CASE = "governance.add_prompttestcase"
# Where a case's page keeps the recorded reply as its viewer may read it.
SHOWN_REPLY = "_shown_recorded_text"


def case_saveable(call: LLMCall) -> bool:
    """Whether a call can become a test case: an agent's answer with its context recorded."""
    return (
        call.purpose == LLMCallPurpose.AGENT
        and call.agent in CASE_AGENTS
        and call.context_snapshot is not None
    )


def message_case_call(message_id: int) -> int | None:
    """The id of the agent call a bot message's turn was answered by (the turn's last agent
    call with its context recorded), or None: a staff or fixed text, a message of no turn."""
    turn = (
        Message.objects.filter(pk=message_id, direction=Direction.OUTBOUND, staff_user__isnull=True)
        .exclude(turn_id=None)
        .values("session_id", "turn_id")
        .first()
    )
    if turn is None:
        return None
    return (
        LLMCall.objects.filter(
            session_id=turn["session_id"],
            turn_id=turn["turn_id"],
            purpose=LLMCallPurpose.AGENT,
            agent__in=CASE_AGENTS,
            context_snapshot__isnull=False,
        )
        .order_by("-id")
        .values_list("pk", flat=True)
        .first()
    )


def case_display_masker(case: PromptTestCase) -> Masker:
    """The masker of a case's texts for a viewer who may not read personal data: the known
    values its snapshot holds, and the patterns."""
    snapshot = case.context_snapshot or {}
    data = [d for d in (snapshot.get("registration_data"),) if isinstance(d, dict)]
    return Masker(
        known_values(
            customer_name=str(snapshot.get("customer_name") or ""),
            customer_phone=str(snapshot.get("customer_phone") or ""),
            data=data,
        )
    )


@admin.register(PromptTestCase)
class PromptTestCaseAdmin(admin.ModelAdmin[PromptTestCase]):
    form = PromptTestCaseForm
    list_display = (
        "id",
        "title",
        "agent",
        "expected_code",
        "handoff_expected",
        "is_active",
        "created_by",
        "created_at",
    )
    list_filter = ("agent", "is_active")
    list_select_related = ("created_by",)
    search_fields = ("title",)
    readonly_fields = (
        "agent",
        "call_link",
        "recorded_at",
        "recorded_code",
        "recorded_reply",
        "masked",
    )
    fieldsets = (
        (gettext_lazy("Recorded call"), {"fields": readonly_fields}),
        (
            gettext_lazy("Expectations"),
            {"fields": EXPECTATION_FIELDS},
        ),
    )
    from_call_template = "admin/governance/prompttestcase/from_call.html"

    # A case is saved from a model call's page (`from_call_view`), never added blank.
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    @admin.display(description=gettext_lazy("recorded call"))
    def call_link(self, obj: PromptTestCase) -> str:
        if obj.llm_call_id is None:
            return gettext("deleted")
        url = reverse("admin:conversations_llmcall_change", args=[obj.llm_call_id])
        return format_html('<a href="{}">#{}</a>', url, obj.llm_call_id)

    @admin.display(description=gettext_lazy("recorded message"))
    def recorded_reply(self, obj: PromptTestCase) -> str:
        return str(obj.__dict__.get(SHOWN_REPLY, obj.recorded_text))

    def get_object(
        self, request: HttpRequest, object_id: str, from_field: str | None = None
    ) -> PromptTestCase | None:
        """The case, its recorded reply masked for a viewer who may not read personal data
        when it was saved unmasked (kept beside the field: the row is saved by the form)."""
        case = super().get_object(request, object_id, from_field)
        if case is not None and not case.masked and not can_view_personal_data(request.user):
            case.__dict__[SHOWN_REPLY] = case_display_masker(case).text(case.recorded_text)
        return case

    def get_urls(self) -> list[URLPattern]:
        wrap = self.admin_site.admin_view
        return [
            path(
                "from-call/<int:call_id>/",
                wrap(self.from_call_view),
                name="governance_prompttestcase_from_call",
            ),
            path(
                "from-message/<int:message_id>/",
                wrap(self.from_message_view),
                name="governance_prompttestcase_from_message",
            ),
            *super().get_urls(),
        ]

    def from_message_view(self, request: HttpRequest, message_id: int) -> HttpResponse:
        """ "Guardar como caso de teste" from a bot's bubble in the conversation: the form of the
        agent call that wrote the bubble's turn (the turn's last agent answer: an earlier one was
        routed on to another agent)."""
        if not request.user.has_perm(ADD_CASE) or not request.user.has_perm(
            "conversations.view_llmcall"
        ):
            raise PermissionDenied
        call_id = message_case_call(message_id)
        if call_id is None:
            raise Http404(
                gettext(
                    "This message was not written by an agent answer with its context recorded."
                )
            )
        return HttpResponseRedirect(
            reverse("admin:governance_prompttestcase_from_call", args=[call_id])
        )

    def from_call_view(self, request: HttpRequest, call_id: int) -> HttpResponse:
        """ "Guardar como caso de teste": the expectations prefilled from the call's recorded
        answer; saving freezes the call (masked for an editor without personal data)."""
        # The page shows the call's reply: its reader must be one who may read the call.
        if not request.user.has_perm(ADD_CASE) or not request.user.has_perm(
            "conversations.view_llmcall"
        ):
            raise PermissionDenied
        call = get_object_or_404(LLMCall.objects.select_related("session__instance"), pk=call_id)
        if not case_saveable(call):
            raise Http404(gettext("This call is not an agent answer with its context recorded."))
        masker = case_masker(call, request.user)
        deps = ReplayDeps.from_settings()
        try:
            prefill = call_prefill(call, deps=deps, masker=masker)
        except SnapshotError as exc:
            raise Http404(str(exc)) from None
        if request.method == "POST":
            form = PromptTestCaseForm(request.POST)
            if form.is_valid():
                case = prompt_test_case_create(
                    call=call,
                    user=request.user,
                    title=form.cleaned_data["title"],
                    expectations=form.expectations(),
                    deps=deps,
                )
                self.message_user(
                    request,
                    gettext("Test case #%(case)s saved.") % {"case": case.pk},
                    messages.SUCCESS,
                )
                return HttpResponseRedirect(
                    reverse("admin:governance_prompttestcase_change", args=[case.pk])
                )
        else:
            form = PromptTestCaseForm(
                initial={
                    "title": gettext("Call #%(call)s") % {"call": call.pk},
                    "expected_code": prefill.code,
                    "expected_state": prefill.state,
                    "handoff_expected": (
                        HandoffExpectation.YES if prefill.handoff else HandoffExpectation.NO
                    ),
                    "expected_handoff_reason": prefill.handoff,
                    "expected_package": prefill.packages[0] if prefill.packages else "",
                    "is_active": True,
                }
            )
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": gettext("Save as a test case"),
            "call": call,
            "form": form,
            "recorded_text": prefill.text,
            "masked": masker is not None,
        }
        return TemplateResponse(request, self.from_call_template, context)


@admin.register(PromptTestRun)
class PromptTestRunAdmin(admin.ModelAdmin[PromptTestRun]):
    """Runs are read-only; ``run/?override=<id>`` (``add_prompttestrun``) starts one in the
    background for an override's text, linked from the override's page."""

    list_display = (
        "id",
        "override",
        "agent",
        "cases",
        "passed",
        "failed",
        "cost_usd",
        "created_by",
        "created_at",
    )
    list_filter = ("agent", "override")
    list_select_related = ("override", "created_by")
    fields = (
        "override",
        "agent",
        "content_hash",
        "cases",
        "passed",
        "failed",
        "cost_usd",
        "failures",
        "created_by",
        "created_at",
    )
    readonly_fields = fields
    run_template = "admin/governance/prompttestrun/run.html"

    @admin.display(description=gettext_lazy("failed cases"))
    def failures(self, obj: PromptTestRun) -> str:
        lines = [
            f"#{r.get('case')} {r.get('title')}: {'; '.join(r.get('differences') or ())}"
            for r in obj.results
            if not r.get("passed")
        ]
        return "\n".join(lines) or "—"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: PromptTestRun | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: PromptTestRun | None = None) -> bool:
        return False

    def get_urls(self) -> list[URLPattern]:
        wrap = self.admin_site.admin_view
        return [
            path("run/", wrap(self.run_view), name="governance_prompttestrun_run"),
            *super().get_urls(),
        ]

    def run_view(self, request: HttpRequest) -> HttpResponse:
        """GET: how many active cases the override's agent has; POST: run them."""
        if not request.user.has_perm("governance.add_prompttestrun"):
            raise PermissionDenied
        override = get_object_or_404(PromptOverride, pk=int_or_404(request.GET.get("override")))
        if request.method == "POST":
            prompt_tests_enqueue(override_id=override.pk, user_id=request.user.pk)
            self.message_user(
                request,
                gettext(
                    "The test cases are running against this text; the run appears here when "
                    "it ends."
                ),
                messages.SUCCESS,
            )
            changelist = reverse("admin:governance_prompttestrun_changelist")
            return HttpResponseRedirect(f"{changelist}?override__id__exact={override.pk}")
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": gettext("Run the test cases"),
            "override": override,
            "active_cases": active_cases_count(override.agent),
        }
        return TemplateResponse(request, self.run_template, context)


admin.site.unregister(LLMCall)


@admin.register(LLMCall)
class GovernedLLMCallAdmin(LLMCallAdmin):
    """The model call's page with "Save as a test case" (for an agent answer, to an editor who
    may add cases)."""

    change_form_template = "admin/governance/llmcall_change_form.html"

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        extra = dict(extra_context or {})
        if request.user.has_perm(ADD_CASE):
            call = (
                LLMCall.objects.filter(pk=int_or_404(unquote(object_id)))
                .only("purpose", "agent", "context_snapshot")
                .first()
            )
            if call is not None and case_saveable(call):
                extra["save_case_url"] = reverse(
                    "admin:governance_prompttestcase_from_call", args=[call.pk]
                )
        return super().change_view(request, object_id, form_url, extra)


import governance.releases_admin  # noqa: E402, F401 (registers the releases' admin)
