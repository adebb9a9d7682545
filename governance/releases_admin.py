"""The releases' admin (docs/decisions/0060; use cases in `prompts_admin.releases`).

- The add form is prefilled with what is live now: each agent's active override at its latest
  version (or the built-in prompt) and every active package at its latest version; the editor
  picks another version where the release changes something.
- A release's page shows what publishing it would change against what is live — each changed
  prompt's diff with its latest replay and its test suite (the activation gate's evidence), each
  changed package's diff, and the latest persona run of exactly its prompt versions — and the
  buttons of the step it is at: send for approval, approve (another user with the approval
  permission), publish, and on the published release, back to the previous release. With
  PROMPT_APPROVAL_REQUIRED that page is the approver's.
- A release leaves the draft frozen: its page is read-only from then on.
"""

from collections.abc import Callable
from typing import Any

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.urls import URLPattern, path, reverse
from django.utils.formats import date_format
from django.utils.translation import gettext
from django.views.decorators.http import require_POST

from agents.states import PROMPT_AGENTS, AgentName
from governance.models import PersonaRun, ReplayStatus
from governance.run_admin import int_or_404
from knowledge_base.models import KBPackage
from prompts_admin.activation import cases_html, evidence_html
from prompts_admin.models import PromptOverride, Release, ReleaseStatus
from prompts_admin.releases import (
    APPROVE_PERMISSION,
    ReleaseRefused,
    agent_label,
    release_approval_outdated,
    release_approve,
    release_authored_by,
    release_changes,
    release_live_versions,
    release_prompt_versions,
    release_propose,
    release_publish,
    release_rollback,
    release_versions_valid,
)
from versioning.admin import VersionedAdmin
from versioning.diff import line_diff
from versioning.history import historical_model, latest_version

# The versions of a package offered in the form, newest first.
PACKAGE_VERSIONS_OFFERED = 10
BUILTIN_CHOICE = ""
PACKAGE_UNCHANGED = ""
READ_ONLY_FIELDS = (
    "name",
    "note",
    "status",
    "created_by",
    "created_at",
    "approved_by",
    "approved_at",
    "approval_reason",
    "published_by",
    "published_at",
)


def prompt_field(agent: str) -> str:
    return f"prompt_{agent}"


def package_field(package_id: str) -> str:
    return f"package_{package_id}"


def prompt_choices() -> dict[str, list[tuple[str, str]]]:
    """Per agent: the built-in prompt, then each of its overrides at its latest version (one
    query)."""
    choices: dict[str, list[tuple[str, str]]] = {
        agent.value: [(BUILTIN_CHOICE, gettext("Default prompt (not customised)"))]
        for agent in PROMPT_AGENTS
    }
    rows = (
        PromptOverride.objects.filter(agent__in=list(choices))
        .annotate(version=latest_version(PromptOverride))
        .order_by("agent", "-is_active", "-updated_at")
        .values_list("agent", "pk", "is_active", "note", "version")
    )
    for agent, pk, is_active, note, version in rows:
        if version is None:
            continue
        status = gettext("active") if is_active else gettext("inactive")
        label = f"#{pk} ({status}) — {note}" if note else f"#{pk} ({status})"
        choices[agent].append((str(version), f"{label} · {gettext('version')} {version}"))
    return choices


def package_choices() -> dict[str, list[tuple[str, str]]]:
    """Per package: leave it as it is, then its `PACKAGE_VERSIONS_OFFERED` latest versions
    (one query)."""
    choices: dict[str, list[tuple[str, str]]] = {}
    rows = (
        historical_model(KBPackage)
        .objects.order_by("package_id", "-history_id")
        .values_list("package_id", "history_id", "history_date", "history_change_reason")
        .iterator()
    )
    for package_id, history_id, when, reason in rows:
        offered = choices.setdefault(
            package_id, [(PACKAGE_UNCHANGED, gettext("Leave as it is (not in this release)"))]
        )
        if len(offered) > PACKAGE_VERSIONS_OFFERED:
            continue
        label = f"{gettext('version')} {history_id} — {date_format(when, 'SHORT_DATETIME_FORMAT')}"
        offered.append((str(history_id), f"{label} — {reason}" if reason else label))
    return choices


class ReleaseForm(forms.ModelForm[Release]):
    """A release's name, note and versions: one choice per agent and per package, added by
    `release_form_class`."""

    class Meta:
        model = Release
        fields = ["name", "note"]
        widgets = {"note": forms.Textarea(attrs={"rows": 3, "class": "vLargeTextField"})}

    def prompts_and_packages(self) -> tuple[dict[str, int | None], dict[str, int]]:
        prompts: dict[str, int | None] = {}
        packages: dict[str, int] = {}
        for name, value in self.cleaned_data.items():
            if name.startswith("prompt_"):
                prompts[name.removeprefix("prompt_")] = int(value) if value else None
            elif name.startswith("package_") and value:
                packages[name.removeprefix("package_")] = int(value)
        return prompts, packages

    def clean(self) -> dict[str, Any]:
        super().clean()
        prompts, packages = self.prompts_and_packages()
        for problem in release_versions_valid(prompts, packages):
            self.add_error(None, problem)
        return self.cleaned_data

    def save(self, commit: bool = True) -> Release:
        self.instance.prompts, self.instance.packages = self.prompts_and_packages()
        return super().save(commit)


def release_form_class(release: Release | None) -> type[ReleaseForm]:
    """`ReleaseForm` with a choice per agent and per package, set to `release`'s versions (what
    is live now, for a new release); a version it names that is no longer offered is kept as
    a choice."""
    if release is not None:
        prompts, packages = release.prompts, release.packages
    else:
        live = release_live_versions()
        prompts, packages = live.prompts, live.packages
    declared: dict[str, Any] = {}
    for agent, choices in prompt_choices().items():
        initial = prompts.get(agent)
        value = str(initial) if initial is not None else BUILTIN_CHOICE
        if value not in {v for v, _label in choices}:
            choices.append((value, f"{gettext('version')} {value}"))
        declared[prompt_field(agent)] = forms.ChoiceField(
            label=agent_label(AgentName(agent)),
            choices=choices,
            initial=value,
            required=False,
        )
    for package_id, choices in package_choices().items():
        initial = packages.get(package_id)
        value = str(initial) if initial is not None else PACKAGE_UNCHANGED
        if value not in {v for v, _label in choices}:
            choices.append((value, f"{gettext('version')} {value}"))
        declared[package_field(package_id)] = forms.ChoiceField(
            label=package_id, choices=choices, initial=value, required=False
        )
    return type("ReleaseVersionsForm", (ReleaseForm,), declared)


def persona_report(release: Release) -> PersonaRun | None:
    """The latest finished persona run of exactly the release's prompt versions (its knowledge
    may differ: `played_other_knowledge`)."""
    versions = release_prompt_versions(release)
    run: PersonaRun | None = (
        PersonaRun.objects.filter(
            prompt_versions=versions,
            status__in=[ReplayStatus.DONE, ReplayStatus.CAPPED, ReplayStatus.CANCELLED],
        )
        .order_by("-created_at", "-pk")
        .first()
    )
    return run


def played_other_knowledge(run: PersonaRun, release: Release) -> bool:
    """Whether `run` gave a package the release names another version than the release's."""
    return any(run.package_versions.get(pid) != int(h) for pid, h in release.packages.items())


@admin.register(Release)
class ReleaseAdmin(VersionedAdmin[Release]):
    form = ReleaseForm
    change_form_template = "admin/prompts_admin/release/change_form.html"
    list_display = ("__str__", "status", "created_by", "approved_by", "published_at")
    list_filter = ("status",)
    search_fields = ("name", "note")

    def get_form(
        self, request: HttpRequest, obj: Release | None = None, change: bool = False, **kwargs: Any
    ) -> Any:
        if self._editable(obj):
            kwargs["form"] = self._form_class(request, obj)
        return super().get_form(request, obj, change, **kwargs)

    @staticmethod
    def _form_class(request: HttpRequest, obj: Release | None) -> type[ReleaseForm]:
        """`release_form_class(obj)`, built once per request (its fieldsets and its form)."""
        built: dict[int | None, type[ReleaseForm]] = request.__dict__.setdefault(
            "_release_forms", {}
        )
        key = obj.pk if obj is not None else None
        if key not in built:
            built[key] = release_form_class(obj)
        return built[key]

    def get_fieldsets(self, request: HttpRequest, obj: Release | None = None) -> Any:
        if not self._editable(obj):
            return [(None, {"fields": READ_ONLY_FIELDS})]
        names = list(self._form_class(request, obj).base_fields)
        packages = [n for n in names if n.startswith("package_")]
        return [
            (None, {"fields": ["name", "note"]}),
            (gettext("Prompts"), {"fields": [n for n in names if n.startswith("prompt_")]}),
            (
                gettext("Knowledge packages"),
                {
                    "fields": packages,
                    "description": gettext(
                        "The version of each package this release publishes; a package left "
                        "as it is keeps what it has."
                    )
                    if packages
                    else gettext("There is no knowledge package yet."),
                },
            ),
        ]

    def get_readonly_fields(self, request: HttpRequest, obj: Release | None = None) -> Any:
        return READ_ONLY_FIELDS if not self._editable(obj) else ()

    def has_change_permission(self, request: HttpRequest, obj: Release | None = None) -> bool:
        # Frozen once it leaves the draft: its page is read-only, its steps are buttons.
        if obj is not None and not self._editable(obj):
            return False
        return super().has_change_permission(request, obj)

    def revert_disabled(self, request: HttpRequest, obj: Release | None = None) -> bool:
        # A release moves only by its steps: writing an old version back would unfreeze its
        # versions or give it a status its steps did not (approved, published).
        return True

    def has_delete_permission(self, request: HttpRequest, obj: Release | None = None) -> bool:
        # A published or replaced release is where a rollback goes: it stays.
        if obj is not None and obj.status not in (ReleaseStatus.DRAFT, ReleaseStatus.PROPOSED):
            return False
        return super().has_delete_permission(request, obj)

    @staticmethod
    def _editable(obj: Release | None) -> bool:
        return obj is None or obj.status == ReleaseStatus.DRAFT

    def save_model(self, request: HttpRequest, obj: Release, form: Any, change: bool) -> None:
        if not change:
            obj.created_by = request.user  # type: ignore[assignment]
        elif not Release.objects.select_for_update().filter(pk=obj.pk, status=obj.status).exists():
            # Sent for approval, published or deleted since this request read it (the change
            # view is one transaction): writing it back would undo that step.
            raise PermissionDenied
        super().save_model(request, obj, form, change)

    def get_urls(self) -> list[URLPattern]:
        def step(view: Callable[..., HttpResponse]) -> Any:
            return self.admin_site.admin_view(require_POST(view))

        name = "prompts_admin_release"
        return [
            path("<int:pk>/propose/", step(self.propose_view), name=f"{name}_propose"),
            path("<int:pk>/approve/", step(self.approve_view), name=f"{name}_approve"),
            path("<int:pk>/publish/", step(self.publish_view), name=f"{name}_publish"),
            path("rollback/", step(self.rollback_view), name=f"{name}_rollback"),
            *super().get_urls(),
        ]

    def get_queryset(self, request: HttpRequest) -> Any:
        return super().get_queryset(request).select_related("created_by", "approved_by")

    def render_change_form(
        self,
        request: HttpRequest,
        context: dict[str, Any],
        add: bool = False,
        change: bool = False,
        form_url: str = "",
        obj: Release | None = None,
    ) -> Any:
        if obj is not None:
            context.update(self.release_context(request, obj))
        return super().render_change_form(request, context, add, change, form_url, obj)

    def release_context(self, request: HttpRequest, release: Release) -> dict[str, Any]:
        changes = release_changes(release)
        user = request.user
        may_change = user.has_perm("prompts_admin.change_release")
        approval = settings.PROMPT_APPROVAL_REQUIRED
        status = release.status
        authored = status == ReleaseStatus.PROPOSED and release_authored_by(release, user)
        persona_run = persona_report(release)
        outdated = release_approval_outdated(release)
        return {
            "release": release,
            "changes": changes,
            "prompt_changes": [
                {
                    "change": change,
                    "diff": line_diff(change.before, change.after),
                    "evidence": (
                        evidence_html(change.check.evidence) if change.check is not None else ""
                    ),
                    "cases": (
                        cases_html(change.check.cases)
                        if change.check is not None and change.check.cases is not None
                        else ""
                    ),
                }
                for change in changes.prompts
            ],
            "package_changes": [
                {"change": change, "diff": line_diff(change.before, change.after)}
                for change in changes.packages
            ],
            "persona_run": persona_run,
            "persona_other_knowledge": (
                persona_run is not None and played_other_knowledge(persona_run, release)
            ),
            "approval_required": approval,
            "can_propose": may_change and approval and status == ReleaseStatus.DRAFT,
            "can_approve": (
                user.has_perm(APPROVE_PERMISSION)
                and status == ReleaseStatus.PROPOSED
                and not authored
            ),
            "own_proposal": status == ReleaseStatus.PROPOSED and authored,
            "approval_outdated": outdated,
            "can_publish": may_change
            and (
                (status == ReleaseStatus.APPROVED and not outdated)
                or (status == ReleaseStatus.DRAFT and not approval)
            ),
            "can_rollback": may_change
            and status == ReleaseStatus.PUBLISHED
            and Release.objects.filter(status=ReleaseStatus.SUPERSEDED).exists(),
        }

    def _step(
        self,
        request: HttpRequest,
        pk: int,
        permission: str,
        run: Callable[[Release, str], str],
    ) -> HttpResponse:
        if not request.user.has_perm(permission):
            raise PermissionDenied
        release = get_object_or_404(Release, pk=pk)
        try:
            done = run(release, str(request.POST.get("reason", "")).strip())
        except ReleaseRefused as refused:
            messages.error(request, str(refused))
        else:
            messages.success(request, done)
        return HttpResponseRedirect(reverse("admin:prompts_admin_release_change", args=[pk]))

    def propose_view(self, request: HttpRequest, pk: int) -> HttpResponse:
        def run(release: Release, _reason: str) -> str:
            release_propose(release, user=request.user)
            return gettext("Sent for approval: another editor with approval rights approves it.")

        return self._step(request, pk, "prompts_admin.change_release", run)

    def approve_view(self, request: HttpRequest, pk: int) -> HttpResponse:
        def run(release: Release, reason: str) -> str:
            release_approve(release, user=request.user, reason=reason)
            return gettext("Release approved: it can be published now.")

        return self._step(request, pk, APPROVE_PERMISSION, run)

    def publish_view(self, request: HttpRequest, pk: int) -> HttpResponse:
        def run(release: Release, reason: str) -> str:
            release_publish(release, user=request.user, reason=reason)
            return gettext("Release published: new conversations use it.")

        return self._step(request, pk, "prompts_admin.change_release", run)

    def rollback_view(self, request: HttpRequest) -> HttpResponse:
        if not request.user.has_perm("prompts_admin.change_release"):
            raise PermissionDenied
        current_id = int_or_404(request.POST.get("release"))
        try:
            back = release_rollback(
                user=request.user,
                current_id=current_id,
                reason=str(request.POST.get("reason", "")).strip(),
            )
        except ReleaseRefused as refused:
            messages.error(request, str(refused))
            return HttpResponseRedirect(
                reverse("admin:prompts_admin_release_change", args=[current_id])
            )
        messages.success(
            request,
            gettext("Back to release %(release)s: new conversations use it.") % {"release": back},
        )
        return HttpResponseRedirect(reverse("admin:prompts_admin_release_change", args=[back.pk]))
