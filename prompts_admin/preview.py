"""Admin tools for prompt overrides: the final-prompt preview and "start from the built-in prompt".

- `prompt_preview` builds exactly what an agent call would send — the instructions (the override
  rendered with the agent's variables, the catalog and the fixed rules appended), the history
  and the context item after it — for a real session or a synthetic sample, through the
  production invoker's `prepare` (no model call, nothing recorded), with the share of the
  instructions the provider's prompt cache can reuse and the variables that break it. A session
  in another stage is shown as if it were at the agent's first stage.
  Staff without `conversations.view_personal_data` see that session's personal data masked: the
  prompt is built from the masked session and its history is masked (`agents.masking`).
- `start_from_builtin_initial` prefills the add form with an agent's built-in template verbatim
  (`add/?from_builtin=<agent>`); nothing is stored until the editor saves.
- `PromptOverrideToolsMixin` adds both to the PromptOverride admin (URLs, views, the prefill),
  and the preview of the text in the form, unsaved.

The sessions come from the conversations app, which imports this one: it registers a
`PreviewSessionSource` when ready (`preview_session_source_register`), and this module never
imports it.
"""

from dataclasses import dataclass, replace
from typing import Any, Protocol

from django.contrib import admin
from django.core.exceptions import ImproperlyConfigured, PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import URLPattern, path
from django.utils.text import capfirst
from django.utils.translation import gettext
from django.views.decorators.http import require_POST

from agents.codes import states_of
from agents.context import InstanceInfo, SessionContext
from agents.invoker import AgentInvoker, PreparedCall
from agents.labels import STATE_LABELS
from agents.masking import Masker
from agents.prompts import builtin_template
from agents.sources import OverrideTemplate
from agents.states import PROMPT_AGENTS, AgentName, SessionState
from compat.django_private import unquote
from knowledge_base.models import Intent, Segment, Service
from prompts_admin.forms import override_problems, problem_error
from prompts_admin.labels import prompt_version_label
from prompts_admin.models import AGENT_CHOICES, PromptOverride
from prompts_admin.selectors import override_ids_of

SAMPLE_SESSION_ID = 0
RECENT_SESSIONS = 30
PREVIEW_VERSION = "preview"


@dataclass(frozen=True, slots=True)
class PreviewSession:
    """A real session as the agents see it, and the masker of its personal data (only when the
    viewer may not see it)."""

    context: SessionContext
    masker: Masker | None


class PreviewSessionSource(Protocol):
    """What the preview reads of the conversations: provided by the conversations app."""

    def may_pick_session(self, user: Any) -> bool:
        """Whether `user` may preview with a real session (session data is customer data)."""
        ...

    def may_view_personal_data(self, user: Any) -> bool: ...

    def sample_instance(self) -> InstanceInfo | None:
        """The instance the synthetic sample speaks for, if there is an active one."""
        ...

    def session(self, session_id: int, *, mask_personal_data: bool) -> PreviewSession | None:
        """The session, or None when there is no such session."""
        ...

    def recent_sessions(self, limit: int, *, mask_personal_data: bool) -> list[tuple[int, str]]:
        """(id, label) of the most recently active sessions, for the preview's session select."""
        ...

    def invoker(self) -> AgentInvoker:
        """The production invoker; the preview only calls its `prepare` (no model call)."""
        ...


_session_source: PreviewSessionSource | None = None


def preview_session_source_register(source: PreviewSessionSource) -> None:
    """Called once by the conversations app when it is ready."""
    global _session_source
    _session_source = source


def preview_session_source() -> PreviewSessionSource:
    if _session_source is None:
        raise ImproperlyConfigured(
            "The prompt preview reads sessions through the conversations app, which registers "
            "its source when ready: is it in INSTALLED_APPS?"
        )
    return _session_source


FROM_BUILTIN_PARAM = "from_builtin"


def start_from_builtin_initial(agent_value: str) -> dict[str, Any]:
    """The add form's initial data for "Start from the built-in prompt": `agent`'s built-in
    template verbatim, inactive, with a note saying where it came from; empty for anything but a
    prompt agent. Only initial data: nothing is stored until the editor saves (storing at
    each click would leave an inactive copy per click, which editors cannot delete)."""
    if agent_value not in {agent.value for agent in PROMPT_AGENTS}:
        return {}
    agent = AgentName(agent_value)
    return {
        "agent": agent.value,
        "content": builtin_template(agent),
        "is_active": False,
        "note": gettext("Copy of the built-in prompt"),
    }


def sample_session(agent: AgentName, instance: InstanceInfo | None) -> SessionContext:
    """A synthetic session of `instance` at the agent's first stage, filled from the active
    catalog."""
    fields: dict[str, Any] = {
        "session_id": SAMPLE_SESSION_ID,
        "state": states_of(agent)[0],
        "instance": instance if instance is not None else InstanceInfo(name="Instância de exemplo"),
        "customer_phone": "5511912345678",
        "customer_name": "Cliente Exemplo",
    }
    if agent is not AgentName.TRIAGEM:
        service = (
            Service.objects.filter(is_active=True, segment__is_active=True)
            .select_related("segment")
            .order_by("segment__code", "code")
            .first()
        )
        segment = service.segment.code if service is not None else ""
        if not segment:
            segment = (
                Segment.objects.filter(is_active=True)
                .order_by("code")
                .values_list("code", flat=True)
                .first()
                or ""
            )
        intent = (
            Intent.objects.filter(is_active=True).order_by("code").values_list("code", flat=True)
        ).first() or ""
        fields.update(segment=segment, intent=intent)
        if agent is AgentName.COLETA and service is not None:
            fields["service"] = service.code
    return SessionContext(**fields)


def masked_session_context(context: SessionContext, masker: Masker) -> SessionContext:
    """The session as the prompt sees it, its personal data masked."""
    return replace(
        context,
        customer_name=masker.field("customer_name", context.customer_name),
        customer_phone=masker.field("customer_phone", context.customer_phone),
        technical_data=masker.value(dict(context.technical_data)),
        technical_extras=masker.value(dict(context.technical_extras)),
        registration_data=masker.value(dict(context.registration_data)),
        registration_extras=masker.value(dict(context.registration_extras)),
    )


def masked_prepared_call(prepared: PreparedCall, masker: Masker) -> PreparedCall:
    """The history masked by known values and patterns; the instructions and the context item
    (built from the masked session) by known values only, so the company data they quote stays
    readable."""
    return replace(
        prepared,
        instructions=masker.known_only().text(prepared.instructions),
        context=masker.known_only().text(prepared.context),
        messages=tuple(replace(m, content=masker.text(m.content)) for m in prepared.messages),
        context_snapshot=masker.value(prepared.context_snapshot),
    )


@dataclass(frozen=True, slots=True)
class PromptPreview:
    prepared: PreparedCall
    session: SessionContext
    # The chosen session was at another stage and is shown at the agent's first stage.
    stage_changed: bool


def preview_version_label(version: str) -> str:
    """The previewed prompt's version as an editor reads it: "rascunho" for a text previewed
    as it is (saved or not), "prompt padrão", "prompt personalizado #3 (versão 12)"."""
    if version == PREVIEW_VERSION:
        return gettext("draft")
    return prompt_version_label(version, override_ids_of([version]))


def stage_label(state: str) -> str:
    """A session state's label ("Triagem"), never its stored value ("TRIAGE")."""
    if state in SessionState._value2member_map_:
        return gettext(STATE_LABELS[SessionState(state)])
    return state


def prompt_preview(
    *,
    agent: AgentName,
    content: str | None,
    session_id: int | None,
    sessions: PreviewSessionSource,
    invoker: AgentInvoker,
    mask_personal_data: bool = False,
) -> PromptPreview:
    """What `agent` would be sent for a session (or the sample) with `content` as its template;
    `content=None` previews the agent's effective prompt (active override or built-in).
    `mask_personal_data` masks the real session's personal data (the sample has none)."""
    stage_changed = False
    masker: Masker | None = None
    if session_id is None:
        context = sample_session(agent, sessions.sample_instance())
    else:
        session = sessions.session(session_id, mask_personal_data=mask_personal_data)
        if session is None:
            raise Http404
        # The preview shows the agent's prompt and the packages as they are now (or the text
        # given), not the versions the session pinned at its first turn.
        context = replace(session.context, prompt_versions={}, package_versions={})
        masker = session.masker
        if masker is not None:
            context = masked_session_context(context, masker)
        if context.state not in states_of(agent):
            context = replace(context, state=states_of(agent)[0])
            stage_changed = True
    override = None if content is None else OverrideTemplate(content, PREVIEW_VERSION)
    prepared = invoker.prepare(session=context, agent=agent, override=override, measure_cache=True)
    if masker is not None:
        prepared = masked_prepared_call(prepared, masker)
    return PromptPreview(prepared=prepared, session=context, stage_changed=stage_changed)


class PromptOverrideToolsMixin(admin.ModelAdmin[PromptOverride]):
    """Preview pages, the start-from-built-in button and action for the PromptOverride admin.

    It goes first in the admin's bases (`PromptOverrideAdmin(PromptOverrideToolsMixin,
    VersionedAdmin[PromptOverride])`): its `super()` is then the versioned admin.
    """

    change_list_template = "admin/prompts_admin/promptoverride/change_list.html"
    change_form_template = "admin/prompts_admin/promptoverride/change_form.html"
    preview_template = "admin/prompts_admin/promptoverride/preview.html"

    def get_urls(self) -> list[URLPattern]:
        opts = self.model._meta
        name = f"{opts.app_label}_{opts.model_name}"
        wrap = self.admin_site.admin_view
        tools = [
            path(
                "preview/",
                wrap(require_POST(self.unsaved_preview_view)),
                name=f"{name}_preview_unsaved",
            ),
            path(
                "preview/<str:agent>/",
                wrap(self.agent_preview_view),
                name=f"{name}_preview_agent",
            ),
            path(
                "<path:object_id>/preview/",
                wrap(self.preview_view),
                name=f"{name}_preview",
            ),
        ]
        # Before the admin's `<path:object_id>/` catch-all.
        return [*tools, *super().get_urls()]

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        context = {"prompt_agents": AGENT_CHOICES, **(extra_context or {})}
        return super().changelist_view(request, extra_context=context)

    def render_change_form(
        self,
        request: HttpRequest,
        context: dict[str, Any],
        add: bool = False,
        change: bool = False,
        form_url: str = "",
        obj: PromptOverride | None = None,
    ) -> HttpResponse:
        """After a refused save the form's instance holds the posted values (the form copied
        them before validating): the header and title show the override as it is stored, so
        a refused deactivation does not read "(inativo)", nor a refused activation "(ativo)"."""
        if change and obj is not None and obj.pk is not None and request.method == "POST":
            stored = self.model._default_manager.filter(pk=obj.pk).first()
            if stored is not None:
                context = context | {"original": stored, "subtitle": str(stored)}
        return super().render_change_form(request, context, add, change, form_url, obj)

    def get_changeform_initial_data(self, request: HttpRequest) -> dict[str, Any]:
        """`add/?from_builtin=<agent>` opens the add form with that agent's built-in prompt."""
        initial = super().get_changeform_initial_data(request)
        return initial | start_from_builtin_initial(request.GET.get(FROM_BUILTIN_PARAM, ""))

    def preview_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        obj = self.get_object(request, unquote(object_id))
        if obj is None:
            raise Http404
        if not self.has_view_or_change_permission(request, obj):
            raise PermissionDenied
        return self._render_preview(request, AgentName(obj.agent), obj.content, obj)

    def agent_preview_view(self, request: HttpRequest, agent: str) -> HttpResponse:
        if not self.has_view_or_change_permission(request):
            raise PermissionDenied
        return self._render_preview(request, _agent_or_404(agent), None, None)

    def unsaved_preview_view(self, request: HttpRequest) -> HttpResponse:
        """The preview of the text as it is in the add or change form, not saved: the form's
        "Preview the text in the form" button posts the whole form here. Nothing is stored.

        Only for those who may write an override (add or change): previewing any text is an
        editor's tool. A text the form would refuse is not previewed (the call would fall back
        to the built-in prompt); its problems are listed instead, as the form words them.
        """
        if not (self.has_add_permission(request) or self.has_change_permission(request)):
            raise PermissionDenied
        agent = _agent_or_404(request.POST.get("agent", ""))
        content = request.POST.get("content", "")
        problems = [
            message
            for problem in override_problems(agent, content)
            for message in problem_error(problem, agent).messages
        ]
        if not content.strip():
            problems = [gettext("The text is empty: there is nothing to preview.")]
        return self._render_preview(request, agent, content, None, unsaved=True, problems=problems)

    def _render_preview(
        self,
        request: HttpRequest,
        agent: AgentName,
        content: str | None,
        obj: PromptOverride | None,
        *,
        unsaved: bool = False,
        problems: list[str] | None = None,
    ) -> HttpResponse:
        sessions = preview_session_source()
        # Session data is customer data: only staff who may read conversations pick one, and
        # see its personal data only with the permission for it.
        can_pick = sessions.may_pick_session(request.user)
        mask = not sessions.may_view_personal_data(request.user)
        # The unsaved preview is a POST (the text is too long for a URL); its session picker
        # posts the text again with the chosen session.
        params = request.POST if unsaved else request.GET
        session_id = _int_or_none(params.get("session")) if can_pick else None
        # The preview never calls the model; the client is built but not used.
        preview = (
            None
            if problems
            else prompt_preview(
                agent=agent,
                content=content,
                session_id=session_id,
                sessions=sessions,
                invoker=sessions.invoker(),
                mask_personal_data=mask,
            )
        )
        opts = self.model._meta
        agent_label = capfirst(dict(AGENT_CHOICES)[agent.value])
        context = {
            **self.admin_site.each_context(request),
            "title": gettext("Final prompt preview: %(agent)s") % {"agent": agent_label},
            "subtitle": None,
            "opts": opts,
            "app_label": opts.app_label,
            "original": obj,
            "agent_label": agent_label,
            "preview": preview,
            "prepared": None if preview is None else preview.prepared,
            "version_label": (
                "" if preview is None else preview_version_label(preview.prepared.prompt_version)
            ),
            "stage_label": "" if preview is None else stage_label(preview.session.state),
            # As an editor writes them in the text: "{{ now }}, {{ customer_name }}".
            "cache_breakers": ", ".join(
                f"{{{{ {name} }}}}"
                for name in (
                    preview.prepared.cache_share.breakers
                    if preview is not None and preview.prepared.cache_share is not None
                    else ()
                )
            ),
            "unsaved": unsaved,
            "unsaved_agent": agent.value if unsaved else "",
            "unsaved_content": content if unsaved else "",
            "problems": problems or [],
            "sessions": (
                sessions.recent_sessions(RECENT_SESSIONS, mask_personal_data=mask)
                if can_pick
                else []
            ),
            "can_pick_session": can_pick,
            "selected_session": session_id,
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(request, self.preview_template, context)


def _agent_or_404(value: str) -> AgentName:
    if value not in {agent.value for agent in PROMPT_AGENTS}:
        raise Http404
    return AgentName(value)


def _int_or_none(value: str | None) -> int | None:
    # ASCII digits only: isdigit() alone lets "²" through, which int() refuses.
    text = (value or "").strip()
    if not (text.isascii() and text.isdigit()):
        return None
    return int(text)
