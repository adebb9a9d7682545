"""Simulated customers in the admin (docs/architecture.md, Simulated customers).

- the personas: edited with history and a change reason (`versioning.admin.VersionedAdmin`); the
  list's "Simular clientes" button opens the start page.
- ``personarun/start/[?override=<id> | ?release=<id>]`` (``add_personarun``): which personas to
  play, against the prompt personalizado (the override's page links here), a release's prompt
  and package versions (the release's page links here) or the prompts in use; the button
  stores a queued run and enqueues its task on the replays queue, once per form (its one-time
  token: a second submit lands on the run the first started).
- ``personarun/<id>/change/``: the run read-only on the runs' shared page
  (`governance.run_admin.RunAdmin`), its progress polled as a replay's (replay_progress.js on
  ``<id>/progress/``), one row per persona linking to its result.
- ``personaresult/<id>/change/``: the conversation as bubbles, customer and bot, with the bot's
  codes; masked for staff without `conversations.view_personal_data`.

Views parse the request and call one use case (`simulator.personas`).
"""

from dataclasses import replace
from typing import Any

from django import forms
from django.conf import settings
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.db import connection
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import get_object_or_404
from django.utils.safestring import SafeString
from django.utils.translation import gettext, gettext_lazy

from agents.masking import Masker
from compat.django_private import unquote
from conversations.labels import agent_label
from conversations.privacy.personal_data import can_view_personal_data, session_masker
from governance.forms import LinesField
from governance.models import PERSONA_MIN_TURNS, Persona, PersonaResult, PersonaRun
from governance.run_admin import (
    ReadOnlyRowsAdmin,
    RunAdmin,
    admin_page,
    int_or_404,
    new_form_token,
    progress_fields,
)
from prompts_admin.models import PromptOverride, Release
from simulator.personas import Bubble, PersonaRunRefused, persona_run_submit
from simulator.tasks import persona_run_enqueue
from support.admin.sessions import breakable_code
from versioning.admin import VersionedAdmin
from versioning.forms import ChangeReasonForm

START_RUN = "governance.add_personarun"


class PersonaForm(ChangeReasonForm[Persona]):
    required_fields = LinesField(
        label=gettext_lazy("Fields the request must have"),
        required=False,
        help_text=gettext_lazy(
            "One per line, as the request names them: cadastro.email, cadastro.documento, "
            "qualification_data.quantidade_amostras; each must be present and not empty."
        ),
    )
    # A positive field's form field starts at 0, so -1 would be told "at least 0", and 0 then
    # "at least 1": the limit the model keeps, from the start.
    max_turns = Persona._meta.get_field("max_turns").formfield(min_value=PERSONA_MIN_TURNS)

    class Meta:
        model = Persona
        fields = [
            "title",
            "description",
            "goal",
            "expected_segment",
            "expected_service",
            "required_fields",
            "expected_handoff_reason",
            "max_turns",
            "is_active",
        ]
        widgets = {"description": forms.Textarea(attrs={"rows": 5, "cols": 80})}
        help_texts = {
            "expected_segment": gettext_lazy("A segment code (AMBIENTAL); empty: not checked."),
            "expected_service": gettext_lazy("A service code; empty: not checked."),
            "expected_handoff_reason": gettext_lazy("Only when a handoff is expected."),
        }


@admin.register(Persona)
class PersonaAdmin(VersionedAdmin[Persona]):
    form = PersonaForm
    list_display = ("title", "goal", "service_code", "turn_limit", "is_active", "updated_at")
    list_filter = ("goal", "is_active")
    search_fields = ("title", "description")
    change_list_template = "admin/governance/persona/change_list.html"

    # A catalog code has no space to wrap at: without this it widens the list past the page.
    @admin.display(description=gettext_lazy("service of the request"), ordering="expected_service")
    def service_code(self, obj: Persona) -> SafeString:
        return breakable_code(obj.expected_service)

    # The field's own name is a sentence, too wide for a column.
    @admin.display(description=gettext_lazy("message limit"), ordering="max_turns")
    def turn_limit(self, obj: Persona) -> int:
        return obj.max_turns


class PersonaChoiceField(forms.ModelMultipleChoiceField[Persona]):
    """The personas chosen, where an id past any row's is not one of the choices: SQLite cannot
    bind such an integer in the lookup (an OverflowError, a 500), where PostgreSQL finds none."""

    def clean(self, value: Any) -> Any:
        pk = Persona._meta.pk
        assert pk is not None
        _smallest, largest = connection.ops.integer_field_range(pk.get_internal_type())
        for item in value if isinstance(value, list | tuple) else ():
            text = str(item).strip()
            if text.isascii() and text.isdigit() and int(text) > largest:
                raise forms.ValidationError(
                    self.error_messages["invalid_choice"],
                    code="invalid_choice",
                    params={"value": item},
                )
        return super().clean(value)


class PersonaStartForm(forms.Form):
    personas = PersonaChoiceField(
        label=gettext_lazy("Simulated customers"),
        queryset=Persona.objects.none(),
        widget=forms.CheckboxSelectMultiple,
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["personas"]
        assert isinstance(field, forms.ModelMultipleChoiceField)
        field.queryset = Persona.objects.order_by("-is_active", "title", "id")


@admin.register(PersonaRun)
class PersonaRunAdmin(RunAdmin[PersonaRun]):
    list_display = (
        "id",
        "override",
        "status",
        "progress",
        "reached",
        "failed",
        "cost_usd",
        "created_at",
        "created_by",
    )
    list_filter = ("status", "override")
    list_select_related = ("override", "created_by")
    run_template = "admin/governance/personarun/run.html"
    start_template = "admin/governance/personarun/start.html"

    @admin.display(description=gettext_lazy("progress"))
    def progress(self, obj: PersonaRun) -> str:
        return f"{obj.personas_done}/{obj.personas_selected}"

    def run_progress(self, run: PersonaRun) -> dict[str, Any]:
        return {
            **progress_fields(run, done=run.personas_done, selected=run.personas_selected),
            "reached": run.reached,
            "failed": run.failed,
        }

    def get_queryset(self, request: HttpRequest) -> QuerySet[PersonaRun]:
        return super().get_queryset(request).select_related("override", "release", "created_by")

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        run = self.viewed_run(request, object_id)
        return self.run_page(
            request,
            run,
            title=gettext("Simulated customers #%(id)s") % {"id": run.pk},
            target=target_label(run.override, run.release),
            results=run.results.order_by("id"),
        )

    def start_view(self, request: HttpRequest) -> HttpResponse:
        if not request.user.has_perm(START_RUN):
            raise PermissionDenied
        params = request.POST if request.method == "POST" else request.GET
        override = release = None
        if params.get("override") and params.get("release"):
            return HttpResponseBadRequest(gettext("Choose a draft or a release, not both."))
        if params.get("override"):
            override = get_object_or_404(PromptOverride, pk=int_or_404(params.get("override")))
        if params.get("release"):
            release = get_object_or_404(Release, pk=int_or_404(params.get("release")))
        if request.method == "POST":
            form = PersonaStartForm(request.POST)
            if form.is_valid():
                started = self._start(request, override=override, release=release, form=form)
                if started is not None:
                    return started
        else:
            active = list(Persona.objects.filter(is_active=True).values_list("pk", flat=True))
            form = PersonaStartForm(initial={"personas": active})
        return admin_page(
            self,
            request,
            self.start_template,
            title=gettext("Simulate customers"),
            override=override,
            release=release,
            target=target_label(override, release),
            form=form,
            max_cost=settings.REPLAY_MAX_COST_USD,
            max_running=settings.REPLAY_MAX_RUNNING,
            persona_model=settings.OPENAI_MODEL_PERSONA,
            form_token=new_form_token(),
        )

    def _start(
        self,
        request: HttpRequest,
        *,
        override: PromptOverride | None,
        release: Release | None,
        form: PersonaStartForm,
    ) -> HttpResponse | None:
        return self.start_submitted(
            request,
            lambda token: persona_run_submit(
                override=override,
                persona_ids=[p.pk for p in form.cleaned_data["personas"]],
                user=request.user,
                form_token=token,
                release=release,
            ),
            refused=PersonaRunRefused,
            enqueue=persona_run_enqueue,
            started=gettext("Simulated customers started."),
            again=gettext("These simulated customers were started already."),
        )


def target_label(override: PromptOverride | None, release: Release | None = None) -> str:
    """What the run plays against, in the editor's words (decision 0056)."""
    if release is not None:
        return gettext("the prompt and knowledge versions of release %(release)s") % {
            "release": release
        }
    if override is None:
        return gettext(
            "the prompts in use (each agent's active prompt personalizado or its prompt padrão)"
        )
    return gettext(
        "prompt personalizado #%(id)s of the %(agent)s agent, pinned for every conversation"
    ) % {
        "id": override.pk,
        "agent": override.get_agent_display(),
    }


def shown_transcript(result: PersonaResult, *, mask: bool) -> list[Bubble]:
    """The result's bubbles as the viewer may read them, each bot message with its agent's
    name."""
    bubbles = [Bubble.from_json(row) for row in result.transcript]
    masker = None
    if mask:
        masker = session_masker(result.session) if result.session is not None else Masker()
    return [
        replace(
            b,
            text=masker.text(b.text) if masker is not None else b.text,
            agent=agent_label(b.agent) if b.agent else "",
        )
        for b in bubbles
    ]


@admin.register(PersonaResult)
class PersonaResultAdmin(ReadOnlyRowsAdmin[PersonaResult]):
    list_display = ("id", "run", "title", "reached", "outcome", "turns", "cost_usd")
    list_filter = ("reached", "outcome")
    list_select_related = ("run",)
    transcript_template = "admin/governance/personaresult/transcript.html"

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        if not self.has_view_permission(request) or request.method != "GET":
            raise PermissionDenied
        result = get_object_or_404(
            PersonaResult.objects.select_related("run", "session__instance"),
            pk=int_or_404(unquote(object_id)),
        )
        mask = not can_view_personal_data(request.user)
        return admin_page(
            self,
            request,
            self.transcript_template,
            title=result.title,
            original=result,
            result=result,
            bubbles=shown_transcript(result, mask=mask),
            masked=mask,
        )
