"""Admin of the versioned resources: prompt overrides, runtime configuration, strategic companies.

Each is a `versioning.admin.VersionedAdmin` (history, diff, read-only versions); the override
admin adds the prompt tools of `prompts_admin.preview`.
"""

from datetime import datetime
from typing import Any

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.db import transaction
from django.http import HttpRequest, QueryDict
from django.utils import timezone
from django.utils.html import format_html
from django.utils.translation import gettext_lazy as _

from agents.rollout import ROLLOUT_MIN_PERCENT
from prompts_admin.activation import (
    ActivationCheck,
    CasesSummary,
    ReplaySummary,
    StoredOverride,
    activation_change_reason,
    activation_check,
    cases_html,
    changes_what_customers_get,
    evidence_html,
    gate_message,
    is_activation,
    is_release,
    latest_cases,
    latest_replay,
)
from prompts_admin.forms import (
    HOURS_FIELD_PREFIX,
    WEEKDAY_LABELS,
    PromptTemplateForm,
    RuntimeConfigForm,
    holidays_description,
)
from prompts_admin.models import (
    AGENT_CHOICES,
    PromptOverride,
    RuntimeConfig,
    StrategicCompany,
    prompt_content_hash,
)
from prompts_admin.preview import PromptOverrideToolsMixin
from prompts_admin.rollout import (
    ROLLOUT_PROMOTE_PERCENT,
    rollout_change_reason,
    rollout_previous_deactivate,
)
from versioning.admin import MONOSPACE_TEXTAREA, VersionedAdmin
from versioning.forms import ChangeReasonForm

AGENT_VALUES = {value for value, _label in AGENT_CHOICES}


class PromptOverrideForm(PromptTemplateForm, ChangeReasonForm[PromptOverride]):
    """The override form; `PromptTemplateForm` validates the template for the chosen agent.

    A save that would leave an agent on the built-in prompt (the override is its active one and
    is deactivated, or moved to another agent) is refused once with a message saying so; the
    `confirm_builtin` box, hidden until then, lets the editor save it anyway.

    The activation gate (`prompts_admin.activation`) works the same way: an activation with no
    replay of its text, or over a threshold, or whose agent's test cases do not pass with it,
    is refused once; `confirm_activation`, hidden until then, with the change reason
    (`versioning.forms.ChangeReasonForm`, required then) lets the editor activate it anyway,
    and the reason goes to the override's history after what the gate found. Every admin path
    that saves an override (add, change, simple-history's revert) uses this form.
    """

    confirm_builtin = forms.BooleanField(
        label=_("Leave the agent on the built-in prompt"),
        required=False,
        widget=forms.HiddenInput,
    )
    confirm_activation = forms.BooleanField(
        label=_("Activate anyway"),
        required=False,
        widget=forms.HiddenInput,
    )
    # 100 is accepted here, not stored: it makes the candidate the active version.
    rollout_percent = forms.IntegerField(
        label=_("Share of new conversations"),
        required=False,
        min_value=ROLLOUT_MIN_PERCENT,
        max_value=ROLLOUT_PROMOTE_PERCENT,
        help_text=PromptOverride._meta.get_field("rollout_percent").help_text,
    )

    # The pause the page showed (`pause_seen_value`; empty: none). A save resumes a paused release
    # only from a page that showed that pause, not from one opened before the release paused.
    rollout_pause_seen = forms.CharField(required=False, widget=forms.HiddenInput)

    class Meta:
        model = PromptOverride
        fields = ["agent", "content", "is_active", "note", "rollout_percent"]
        widgets = {"content": forms.Textarea(attrs=MONOSPACE_TEXTAREA.attrs | {"rows": 30})}

    # What the gate found for this save (None: the save activates nothing); set by `clean`.
    activation: ActivationCheck | None = None
    # Whether this save releases the candidate to 100%: it becomes the agent's active override,
    # and the one active before is deactivated (`rollout_previous_deactivate`).
    promotes: bool = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["rollout_pause_seen"].initial = pause_seen_value(
            self.instance.rollout_paused_at
        )
        self.replays: dict[tuple[str, str], ReplaySummary | None] = {}
        self.cases: dict[tuple[str, str], CasesSummary] = {}
        # The editor sees the evidence of the text in the form before ticking "active".
        is_active = self.fields.get("is_active")
        agent, content = self.selected_agent(), self.form_content()
        if is_active is not None and agent in AGENT_VALUES and content:
            cases = self.latest_cases(agent, content)
            is_active.help_text = format_html(
                "{}<br>{}{}",
                is_active.help_text,
                evidence_html(self.latest_replay(agent, content)),
                format_html("<br>{}", cases_html(cases)) if cases.active else "",
            )

    def form_content(self) -> str:
        """The text the form holds: as posted, else as prefilled or stored."""
        if self.is_bound:
            return str(self.data.get(self.add_prefix("content")) or "")
        return str(self.initial.get("content") or self.instance.content or "")

    def latest_replay(self, agent: str, content: str) -> ReplaySummary | None:
        """`prompts_admin.activation.latest_replay`, once per text for this form."""
        key = (agent, prompt_content_hash(content))
        if key not in self.replays:
            self.replays[key] = latest_replay(agent=agent, content=content)
        return self.replays[key]

    def latest_cases(self, agent: str, content: str) -> CasesSummary:
        """`prompts_admin.activation.latest_cases`, once per text for this form."""
        key = (agent, prompt_content_hash(content))
        if key not in self.cases:
            self.cases[key] = latest_cases(agent=agent, content=content)
        return self.cases[key]

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        stored = self.stored_override()
        self.clean_rollout(cleaned, stored)
        agent, content, active = (
            cleaned.get("agent"),
            cleaned.get("content"),
            bool(cleaned.get("is_active")),
        )
        if (
            settings.PROMPT_APPROVAL_REQUIRED
            and isinstance(agent, str)
            and isinstance(content, str)
            and changes_what_customers_get(
                stored=stored,
                agent=agent,
                content=content,
                active=active,
                percent=cleaned.get("rollout_percent"),
            )
        ):
            # The approval would be empty if an editor could put a text live from here.
            self.add_error(
                None,
                ValidationError(
                    _(
                        "Approval is required (PROMPT_APPROVAL_REQUIRED): a prompt reaches "
                        "customers only through an approved release. Save this text inactive, "
                        "then prepare a release with it."
                    ),
                    code="approval_required",
                ),
            )
            return cleaned
        if (
            stored is not None
            and stored.is_active
            and (not active or agent != stored.agent)
            and not cleaned.get("confirm_builtin")
        ):
            # Shown from now on, so the editor can tick it and save again.
            self.fields["confirm_builtin"].widget = forms.CheckboxInput()
            self.add_error(
                "confirm_builtin",
                ValidationError(
                    _(
                        "Saving this leaves the %(agent)s agent on the built-in prompt: this is "
                        "its active override. Tick “Leave the agent on the built-in prompt” and "
                        "save again to confirm."
                    ),
                    code="leaves_builtin",
                    params={"agent": dict(AGENT_CHOICES)[stored.agent]},
                ),
            )
        # A text the form refuses is not weighed: the save is refused anyway.
        if isinstance(agent, str) and isinstance(content, str) and not self.has_error("content"):
            activates = is_activation(stored=stored, agent=agent, content=content, active=active)
            # A gradual release puts the text in front of customers too: the same gate.
            releases = is_release(
                stored=stored, agent=agent, content=content, percent=cleaned.get("rollout_percent")
            )
            if activates or releases:
                check = activation_check(
                    self.latest_replay(agent, content), self.latest_cases(agent, content)
                )
                if activates:
                    self.activation = check
                if check.needs_confirmation:
                    self.gate(cleaned, check)
        return cleaned

    def clean_rollout(self, cleaned: dict[str, Any], stored: StoredOverride | None) -> None:
        """A share of 100 activates the candidate (the gate then weighs it as any activation);
        an active override is the current version, never a candidate."""
        percent = cleaned.get("rollout_percent")
        stored_pause = pause_seen_value(None if stored is None else stored.rollout_paused_at)
        if stored_pause and cleaned.get("rollout_pause_seen") != stored_pause:
            # The page is shown again with the pause (its reason below the share): saved from
            # there, it resumes or ends the release.
            data = QueryDict(mutable=True)
            data.update(self.data)
            data[self.add_prefix("rollout_pause_seen")] = stored_pause
            self.data = data
            self.add_error(
                "rollout_percent",
                ValidationError(
                    _(
                        "This release paused itself while the page was open (the reason is "
                        "below): save again to resume it, or empty the share to end it."
                    ),
                    code="paused_meanwhile",
                ),
            )
            return
        if percent == ROLLOUT_PROMOTE_PERCENT:
            if stored is None or stored.rollout_percent is None:
                self.add_error(
                    "rollout_percent",
                    ValidationError(
                        _(
                            "Release it first to part of the new conversations (1 to 99), or "
                            "tick “active” to make it the active version now."
                        ),
                        code="promote_not_rolling_out",
                    ),
                )
                return
            cleaned["rollout_percent"] = None
            cleaned["is_active"] = True
            self.promotes = True
            # The agent's active override is deactivated in the same save (`save_model`).
            self.instance.replaces_active = True
        elif percent is not None and cleaned.get("is_active"):
            self.add_error(
                "rollout_percent",
                ValidationError(
                    _(
                        "An active override is already the current version of every new "
                        "conversation: empty the share, or untick “active”."
                    ),
                    code="rollout_of_active",
                ),
            )

    def gate(self, cleaned: dict[str, Any], check: ActivationCheck) -> None:
        """Refuses an activation that needs a confirmation until it has one with a reason."""
        # Shown from now on, so the editor can tick the box, write the reason and save again.
        self.fields["confirm_activation"].widget = forms.CheckboxInput()
        if not cleaned.get("confirm_activation"):
            self.add_error(
                "confirm_activation",
                ValidationError(gate_message(check), code="activation_unconfirmed"),
            )
        elif not self.has_error("change_reason") and not self.typed_change_reason():
            self.add_error(
                "change_reason",
                ValidationError(
                    _("Write why you activate this text anyway: it goes to the history."),
                    code="activation_reason_required",
                ),
            )

    def stored_override(self) -> StoredOverride | None:
        """The override as stored, before this save (None when new). On the revert page the
        form's instance is the old version, so it is read from the database, not the instance."""
        if self.instance.pk is None:
            return None
        rows = PromptOverride.objects.filter(pk=self.instance.pk)
        if transaction.get_connection().in_atomic_block:
            # The admin's save is one transaction: locked until it commits, the row takes the
            # automatic pause (`governance.rollout_pause`, which locks it too) before this read,
            # to be weighed here, or after this save, never between them to be overwritten.
            rows = rows.select_for_update()
        row = rows.values_list(
            "agent", "content", "is_active", "rollout_percent", "rollout_paused_at"
        ).first()
        return None if row is None else StoredOverride(*row)

    def change_reason_text(self) -> str:
        """An activation records what the gate found before the editor's reason; a start,
        change or stop of a gradual release says so before it."""
        if self.activation is not None:
            return activation_change_reason(self.activation, self.typed_change_reason())
        stored = self.stored_override()
        return rollout_change_reason(
            before=None if stored is None else stored.rollout_percent,
            after=self.cleaned_data.get("rollout_percent"),
            reason=self.typed_change_reason(),
        )


def pause_seen_value(paused_at: datetime | None) -> str:
    """The form's record of a pause: its moment to the microsecond (empty: not paused)."""
    return "" if paused_at is None else paused_at.isoformat()


# simple-history's name for the version (revert) page of an override.
REVERT_URL_NAME = "prompts_admin_promptoverride_simple_history"


@admin.register(PromptOverride)
class PromptOverrideAdmin(PromptOverrideToolsMixin, VersionedAdmin[PromptOverride]):
    form = PromptOverrideForm
    # The confirmations (hidden until a save needs one) come before the change reason, which the
    # activation gate asks for once "Ativar mesmo assim" is ticked.
    fieldsets = (
        (None, {"fields": ("agent", "content", "is_active", "note")}),
        (
            _("Gradual release"),
            {
                "fields": (
                    "rollout_percent",
                    "rollout_paused_at",
                    "rollout_pause_reason",
                    "rollout_pause_seen",
                ),
                "description": _(
                    "Try this inactive text on part of the new conversations before making it "
                    "the active version. Each conversation keeps the version it started with. "
                    "A release paused automatically resumes when you save this page with a "
                    "share, and ends when you save it with the share empty."
                ),
            },
        ),
        (None, {"fields": ("confirm_builtin", "confirm_activation", "change_reason")}),
    )
    readonly_fields = ("rollout_paused_at", "rollout_pause_reason")
    list_display = (
        "__str__",
        "agent",
        "is_active",
        "rollout_percent",
        "rollout_paused_at",
        "note",
        "updated_at",
    )
    list_filter = ("agent", "is_active")
    search_fields = ("note", "content")

    def get_form(
        self,
        request: HttpRequest,
        obj: PromptOverride | None = None,
        change: bool = False,
        **kwargs: Any,
    ) -> type[forms.ModelForm[PromptOverride]]:
        """On the revert page (simple-history's version form), the "active" box starts as the
        override is now, not as it was in that version: reverting the text of the active
        override must not deactivate it, nor reverting a draft activate it, unless the editor
        ticks the box. So do the share and the pause."""
        match = request.resolver_match
        if obj is not None and match is not None and match.url_name == REVERT_URL_NAME:
            current = (
                PromptOverride.objects.filter(pk=obj.pk)
                .values_list(
                    "is_active", "rollout_percent", "rollout_paused_at", "rollout_pause_reason"
                )
                .first()
            )
            if current is not None:
                (
                    obj.is_active,
                    obj.rollout_percent,
                    obj.rollout_paused_at,
                    obj.rollout_pause_reason,
                ) = current
        return super().get_form(request, obj, change, **kwargs)

    def save_model(
        self, request: HttpRequest, obj: PromptOverride, form: Any, change: bool
    ) -> None:
        """After an activation, says which replay and test case run it went with (or that it
        had none). A release to 100% first deactivates the agent's active override."""
        if getattr(form, "promotes", False):
            rollout_previous_deactivate(override=obj)
        # The editor has seen the automatic pause: this save resumes the release (or stops it).
        obj.rollout_paused_at, obj.rollout_pause_reason = None, ""
        super().save_model(request, obj, form, change)
        check: ActivationCheck | None = getattr(form, "activation", None)
        if check is not None:
            level = messages.WARNING if check.needs_confirmation else messages.INFO
            self.message_user(request, evidence_html(check.evidence), level)
            if check.cases is not None and check.cases.active:
                level = messages.WARNING if check.cases_failing else messages.INFO
                self.message_user(request, cases_html(check.cases), level)


@admin.register(RuntimeConfig)
class RuntimeConfigAdmin(VersionedAdmin[RuntimeConfig]):
    """The single configuration row: it can be edited, never added twice or deleted."""

    form = RuntimeConfigForm
    list_display = ("__str__", "agent_name", "company_name", "updated_at")
    fieldsets = (
        (None, {"fields": ("agent_name", "company_name")}),
        (
            _("Business hours (Brasília time)"),
            {"fields": tuple(HOURS_FIELD_PREFIX + day for day in WEEKDAY_LABELS)},
        ),
        (
            _("Fixed messages"),
            {
                "fields": (
                    "handoff_message_open",
                    "handoff_message_closed",
                    "unsupported_media_message",
                    "invalid_format_message",
                )
            },
        ),
        (
            _("Satisfaction survey"),
            {
                "fields": (
                    "satisfaction_after_close",
                    "satisfaction_after_lead",
                    "satisfaction_question",
                    "satisfaction_style",
                )
            },
        ),
    )

    def get_fieldsets(self, request: HttpRequest, obj: RuntimeConfig | None = None) -> Any:
        """The business-hours section lists this year's national holidays (closed all day)."""
        fieldsets = super().get_fieldsets(request, obj)
        year = timezone.localdate().year
        return [
            (name, options | {"description": holidays_description(year)})
            if HOURS_FIELD_PREFIX + "mon" in options.get("fields", ())
            else (name, options)
            for name, options in fieldsets
        ]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return super().has_add_permission(request) and not RuntimeConfig.objects.exists()

    def has_delete_permission(self, request: HttpRequest, obj: RuntimeConfig | None = None) -> bool:
        return False


@admin.register(StrategicCompany)
class StrategicCompanyAdmin(VersionedAdmin[StrategicCompany]):
    list_display = ("name", "cnpj", "is_active")
    list_filter = ("is_active",)
    search_fields = ("name", "cnpj", "phone_numbers")
