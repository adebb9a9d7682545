"""What the admin pages of a run share, a replay's and a run of simulated customers'
(`governance.admin.ReplayRunAdmin`, `simulator.personas_admin.PersonaRunAdmin`).

- `RunAdmin`: runs are started from their start page, never added, edited or deleted as rows
  (`ReadOnlyRowsAdmin`, their results' admins too);
  ``<id>/change/`` is the run's page (`run_page`) and ``<id>/progress/`` its progress as JSON,
  which replay_progress.js polls while the run is not finished (the keys of `progress_fields`).
- the start form's one-time token (`new_form_token` in the page, `RunAdmin.start_submitted`
  for the POST): a second submit of the same form finds the run the first started
  (`governance.replay.submit_once`) instead of starting another.
- `admin_page`: the context every page of these admins starts from; `int_or_404` reads an id.
"""

from collections.abc import Callable
from typing import Any, TypeVar
from uuid import UUID, uuid4

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import Model
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.translation import gettext

from compat.django_private import unquote
from governance.models import ModelRun

ModelT = TypeVar("ModelT", bound=Model)
RunT = TypeVar("RunT", bound=ModelRun)


def progress_fields(run: ModelRun, *, done: int, selected: int) -> dict[str, Any]:
    """The progress keys replay_progress.js reads, whatever the kind of run."""
    return {
        "status": str(run.status),
        "status_label": str(run.get_status_display()),
        "finished": run.finished,
        "done": done,
        "selected": selected,
        "detail": run.detail,
        "cost_usd": f"{run.cost_usd:.6f}",
    }


def admin_page(
    model_admin: "admin.ModelAdmin[Any]",
    request: HttpRequest,
    template: str,
    *,
    title: str,
    **context: Any,
) -> TemplateResponse:
    """A page of `model_admin` outside Django's own views, with the admin's header and menu."""
    opts = model_admin.model._meta
    request.current_app = model_admin.admin_site.name
    return TemplateResponse(
        request,
        template,
        {
            **model_admin.admin_site.each_context(request),
            "title": title,
            "subtitle": None,
            "opts": opts,
            "app_label": opts.app_label,
            **context,
        },
    )


def int_or_404(value: str | None) -> int:
    """An id from the URL or the query string; 404 unless it is a whole number."""
    # ASCII digits only: isdigit() alone lets "²" through, which int() refuses.
    text = (value or "").strip()
    if not (text.isascii() and text.isdigit()):
        raise Http404
    return int(text)


def new_form_token() -> str:
    """The token a start page renders in its form (a hidden ``form_token``)."""
    return str(uuid4())


def posted_form_token(model_admin: "admin.ModelAdmin[Any]", request: HttpRequest) -> UUID | None:
    """The submitted form's token; None, with an error message, when it is missing or not a
    token (a page from before the token, a tampered form)."""
    try:
        return UUID(request.POST.get("form_token", ""))
    except ValueError:
        model_admin.message_user(
            request,
            gettext("This form has expired. Reload the page and try again."),
            messages.ERROR,
        )
        return None


class ReadOnlyRowsAdmin(admin.ModelAdmin[ModelT]):
    """Rows their run writes: never added, edited or deleted in the admin."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: ModelT | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: ModelT | None = None) -> bool:
        return False


class RunAdmin(ReadOnlyRowsAdmin[RunT]):
    """A kind of run in the admin: read-only rows, the run's page and its progress."""

    run_template: str
    start_template: str

    def run_progress(self, run: RunT) -> dict[str, Any]:
        """The run's `progress_fields` and what else its page's script shows."""
        raise NotImplementedError

    def extra_urls(self) -> list[URLPattern]:
        """The kind's own views besides start and progress."""
        return []

    def start_view(self, request: HttpRequest) -> HttpResponse:
        raise NotImplementedError

    def get_urls(self) -> list[URLPattern]:
        wrap = self.admin_site.admin_view
        opts = self.model._meta
        name = f"{opts.app_label}_{opts.model_name}"
        return [
            path("start/", wrap(self.start_view), name=f"{name}_start"),
            path("<path:object_id>/progress/", wrap(self.progress_view), name=f"{name}_progress"),
            *self.extra_urls(),
            *super().get_urls(),
        ]

    def viewed_run(self, request: HttpRequest, object_id: str) -> RunT:
        """The run `object_id` names, for a viewer who may see runs of this kind."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        run = self.get_object(request, unquote(object_id))
        if run is None:
            raise Http404
        return run

    def progress_view(self, request: HttpRequest, object_id: str) -> JsonResponse:
        return JsonResponse(self.run_progress(self.viewed_run(request, object_id)))

    def start_submitted(
        self,
        request: HttpRequest,
        submit: Callable[[UUID], tuple[RunT, bool]],
        *,
        refused: type[Exception],
        enqueue: Callable[[RunT], None],
        started: str,
        again: str,
    ) -> HttpResponse | None:
        """The start button: `submit` with the form's one-time token starts a run (enqueued,
        `started` said) or finds the one this form started (`again` said), redirected to; None
        with an error message when it may not start (`refused`; the page is shown again)."""
        token = posted_form_token(self, request)
        if token is None:
            return None
        try:
            run, created = submit(token)
        except refused as refusal:
            self.message_user(request, str(refusal), messages.ERROR)
            return None
        if created:
            enqueue(run)
            self.message_user(request, started)
        else:
            self.message_user(request, again, messages.WARNING)
        opts = self.opts
        return HttpResponseRedirect(
            reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[run.pk])
        )

    def run_page(
        self, request: HttpRequest, run: RunT, *, title: str, **context: Any
    ) -> TemplateResponse:
        """The run's page (GET only: it changes nothing), with its progress
        (admin/governance/run_base.html)."""
        if request.method != "GET":
            raise PermissionDenied
        name = f"admin:{self.opts.app_label}_{self.opts.model_name}"
        return admin_page(
            self,
            request,
            self.run_template,
            title=title,
            original=run,
            run=run,
            progress=self.run_progress(run),
            progress_url=reverse(f"{name}_progress", args=[run.pk]),
            changelist_url=reverse(f"{name}_changelist"),
            **context,
        )
