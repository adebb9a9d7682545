import hashlib
from collections.abc import Collection
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxLengthValidator, MaxValueValidator, MinValueValidator
from django.db import models
from django.utils.text import capfirst
from django.utils.translation import gettext_lazy as _
from simple_history.models import HistoricalRecords
from validate_docbr import CNPJ

from agents.labels import AGENT_LABELS, choices
from agents.phones import phone_digits
from agents.rollout import ROLLOUT_MAX_PERCENT, ROLLOUT_MIN_PERCENT
from agents.states import PROMPT_AGENTS
from agents.templating import PROMPT_TEMPLATE_MAX_CHARS

# The prompt agents' labels: the one label table (agents.labels), translated when shown.
AGENT_CHOICES = choices(AGENT_LABELS, translate=_, members=PROMPT_AGENTS)
MAX_PROMPT_CHARS = PROMPT_TEMPLATE_MAX_CHARS
MAX_FIXED_TEXT_CHARS = 1_000
MAX_NOTES_CHARS = 2_000
MAX_PHONE_LINES_CHARS = 2_000
WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")

DEFAULT_HANDOFF_MESSAGE_OPEN = (
    "Vou transferir seu atendimento para um especialista da nossa equipe. "
    "Ele vai continuar a conversa por aqui mesmo."
)
DEFAULT_HANDOFF_MESSAGE_CLOSED = (
    "Vou transferir seu atendimento para um especialista da nossa equipe. "
    "No momento estamos fora do horário de atendimento; a equipe vai continuar a conversa "
    "por aqui assim que retomarmos o expediente."
)
DEFAULT_UNSUPPORTED_MEDIA_MESSAGE = (
    "Por enquanto consigo ler apenas mensagens de texto. Pode me escrever o que precisa, por favor?"
)
DEFAULT_INVALID_FORMAT_MESSAGE = (
    "Tive um problema para processar sua mensagem. "
    "Vou transferir seu atendimento para um especialista da nossa equipe."
)
DEFAULT_SATISFACTION_QUESTION = "Como você avalia o atendimento?"
# WhatsApp's limit for an interactive message's body (whatsapp.interactive.MAX_BODY_CHARS).
MAX_SATISFACTION_QUESTION_CHARS = 1_024
DEFAULT_BUSINESS_HOURS: dict[str, list[list[str]]] = {
    "mon": [["08:00", "18:00"]],
    "tue": [["08:00", "18:00"]],
    "wed": [["08:00", "18:00"]],
    "thu": [["08:00", "18:00"]],
    "fri": [["08:00", "17:00"]],
    "sat": [],
    "sun": [],
}


class SatisfactionStyle(models.TextChoices):
    """How the satisfaction question offers its answers (conversations.satisfaction)."""

    BUTTONS = "buttons", _("three buttons (Ótimo, Regular, Ruim)")
    LIST = "list", _("a list from 1 to 5")


def prompt_content_hash(content: str) -> str:
    """The hash the activation gate matches replays by: sha256 of the text with
    line endings normalised, since a browser submits a textarea with CRLF."""
    normalised = content.replace("\r\n", "\n").replace("\r", "\n")
    return hashlib.sha256(normalised.encode("utf-8")).hexdigest()


def _default_business_hours() -> dict[str, list[list[str]]]:
    return {day: [list(span) for span in spans] for day, spans in DEFAULT_BUSINESS_HOURS.items()}


def _default_agent_name() -> str:
    return settings.AGENT_NAME


class PromptOverride(models.Model):
    """An admin-edited system prompt template for one agent; replaces the built-in text."""

    agent = models.CharField(_("agent"), max_length=32, choices=AGENT_CHOICES)
    content = models.TextField(_("content"), validators=[MaxLengthValidator(MAX_PROMPT_CHARS)])
    is_active = models.BooleanField(
        _("active"),
        default=False,
        help_text=_("At most one active override per agent. The fixed guards are always appended."),
    )
    note = models.CharField(_("change note"), max_length=255, blank=True)
    # The candidate version (docs/decisions/0057): an inactive override that the new
    # conversations whose bucket is below it pin instead of the active one. Null: not rolling out.
    rollout_percent = models.PositiveSmallIntegerField(
        _("share of new conversations"),
        null=True,
        blank=True,
        validators=[MinValueValidator(ROLLOUT_MIN_PERCENT), MaxValueValidator(ROLLOUT_MAX_PERCENT)],
        help_text=_(
            "Gradual release: this inactive text is used by this percentage of the new "
            "conversations (1 to 99); the others keep the active version. 100 makes it the active "
            "version (through the activation checks); empty stops the release."
        ),
    )
    # A candidate paused because it did worse than the active version (agents.rollout
    # `candidate_worse`): it keeps its share and stays visible, but no new conversation pins it.
    rollout_paused_at = models.DateTimeField(
        _("gradual release paused at"), null=True, blank=True, editable=False
    )
    rollout_pause_reason = models.TextField(_("pause reason"), blank=True, editable=False)
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)
    updated_at = models.DateTimeField(_("updated at"), auto_now=True)
    # A text: the activation gate's reason (prompts_admin.activation) is the editor's 255
    # characters after its own prefix, past simple-history's default of 100.
    history = HistoricalRecords(history_change_reason_field=models.TextField(null=True))
    # Read by simple-history when the next save writes a version (`history_change_reason`).
    _change_reason: str
    # Set by the admin form for a candidate released to 100%, whose save first deactivates the
    # agent's active override (prompts_admin.rollout): the one-active constraint is left to the
    # database then, which checks it after that deactivation.
    replaces_active: bool = False

    class Meta:
        ordering = ["agent", "-is_active", "-updated_at"]
        verbose_name = _("prompt override")
        verbose_name_plural = _("prompt overrides")
        constraints = [
            models.UniqueConstraint(
                fields=["agent"],
                condition=models.Q(is_active=True),
                name="prompt_override_one_active_per_agent",
                violation_error_message=_("There is already an active override for this agent."),
            ),
            models.UniqueConstraint(
                fields=["agent"],
                condition=models.Q(rollout_percent__isnull=False),
                name="prompt_override_one_rollout_per_agent",
                violation_error_message=_(
                    "Another override of this agent is already being released gradually."
                ),
            ),
            # The active override is the current version; the candidate is another one.
            models.CheckConstraint(
                condition=models.Q(rollout_percent__isnull=True)
                | models.Q(
                    is_active=False,
                    rollout_percent__gte=ROLLOUT_MIN_PERCENT,
                    rollout_percent__lte=ROLLOUT_MAX_PERCENT,
                ),
                name="prompt_override_rollout_inactive_1_to_99",
                violation_error_message=_(
                    "Only an inactive override is released gradually, to 1 to 99%% of the new "
                    "conversations."
                ),
            ),
        ]

    def __str__(self) -> str:
        # The agent's label ("Qualificação"), not its stored value ("qualificacao").
        status = _("active") if self.is_active else _("inactive")
        return f"{capfirst(self.get_agent_display())} ({status}) #{self.pk or '-'}"

    def validate_constraints(self, exclude: Collection[str] | None = None) -> None:
        if self.replaces_active:
            # The constraints on the agent are the per-agent ones: one active, one candidate
            # (this save empties its own share, so it is no longer a candidate).
            exclude = {*(exclude or ()), "agent"}
        super().validate_constraints(exclude)


def validate_business_hours(value: Any) -> None:
    if not isinstance(value, dict):
        raise ValidationError(_("Business hours must be an object keyed by weekday."))
    unknown = set(value) - set(WEEKDAYS)
    if unknown:
        raise ValidationError(
            _("Unknown days: %(days)s. Use %(valid)s."),
            params={"days": ", ".join(sorted(unknown)), "valid": ", ".join(WEEKDAYS)},
        )
    for day, spans in value.items():
        if not isinstance(spans, list):
            raise ValidationError(_("%(day)s: use a list of time spans."), params={"day": day})
        for span in spans:
            if (
                not isinstance(span, list)
                or len(span) != 2
                or not all(isinstance(t, str) and _is_hhmm(t) for t in span)
                or span[0] >= span[1]
            ):
                raise ValidationError(
                    _('%(day)s: invalid time span %(span)s; use ["08:00", "18:00"].'),
                    params={"day": day, "span": span},
                )


def _is_hhmm(text: str) -> bool:
    digits = text[:2] + text[3:]
    if len(text) != 5 or text[2] != ":" or not (digits.isascii() and digits.isdigit()):
        return False
    return int(text[:2]) < 24 and int(text[3:]) < 60


class RuntimeConfig(models.Model):
    """The single row of runtime settings that admins edit (identity, hours, fixed texts)."""

    SINGLETON_PK = 1

    agent_name = models.CharField(_("assistant name"), max_length=60, default=_default_agent_name)
    company_name = models.CharField(
        _("company name"), max_length=120, default="Laboratório Exemplo"
    )
    business_hours = models.JSONField(
        _("business hours"),
        default=_default_business_hours,
        validators=[validate_business_hours],
        help_text=_(
            'Brasília time per weekday: {"mon": [["08:00", "18:00"]], ..., "sun": []}. '
            "National holidays are closed automatically."
        ),
    )
    handoff_message_open = models.TextField(
        _("handoff message (business hours)"),
        default=DEFAULT_HANDOFF_MESSAGE_OPEN,
        validators=[MaxLengthValidator(MAX_FIXED_TEXT_CHARS)],
    )
    handoff_message_closed = models.TextField(
        _("handoff message (outside business hours)"),
        default=DEFAULT_HANDOFF_MESSAGE_CLOSED,
        validators=[MaxLengthValidator(MAX_FIXED_TEXT_CHARS)],
    )
    unsupported_media_message = models.TextField(
        _("unsupported media message"),
        default=DEFAULT_UNSUPPORTED_MEDIA_MESSAGE,
        validators=[MaxLengthValidator(MAX_FIXED_TEXT_CHARS)],
    )
    invalid_format_message = models.TextField(
        _("invalid format message"),
        default=DEFAULT_INVALID_FORMAT_MESSAGE,
        validators=[MaxLengthValidator(MAX_FIXED_TEXT_CHARS)],
    )
    # The satisfaction question (conversations.satisfaction): off until the lab chooses to ask.
    satisfaction_after_close = models.BooleanField(
        _("ask for satisfaction when staff close a conversation"), default=False
    )
    satisfaction_after_lead = models.BooleanField(
        _("ask for satisfaction after a confirmed lead"), default=False
    )
    satisfaction_question = models.TextField(
        _("satisfaction question"),
        default=DEFAULT_SATISFACTION_QUESTION,
        blank=True,
        validators=[MaxLengthValidator(MAX_SATISFACTION_QUESTION_CHARS)],
        help_text=_(
            "Sent once per conversation, only inside WhatsApp's 24-hour window, "
            "never to a simulated conversation."
        ),
    )
    satisfaction_style = models.CharField(
        _("satisfaction answers"),
        max_length=8,
        choices=SatisfactionStyle.choices,
        default=SatisfactionStyle.BUTTONS,
    )
    updated_at = models.DateTimeField(_("updated at"), auto_now=True)
    history = HistoricalRecords()

    class Meta:
        verbose_name = _("runtime configuration")
        verbose_name_plural = _("runtime configuration")
        constraints = [
            models.CheckConstraint(condition=models.Q(pk=1), name="runtime_config_single_row")
        ]

    def __str__(self) -> str:
        return str(_("Runtime configuration"))

    def save(self, *args: Any, **kwargs: Any) -> None:
        self.pk = self.SINGLETON_PK
        super().save(*args, **kwargs)

    @classmethod
    def load(cls) -> "RuntimeConfig":
        """The configuration row, created with the defaults on first use."""
        config, _created = cls.objects.get_or_create(pk=cls.SINGLETON_PK)
        return config


def validate_cnpj(value: str) -> None:
    if value and not CNPJ().validate(value):
        raise ValidationError(_("Invalid CNPJ (the check digits do not match)."))


def validate_phone_lines(value: str) -> None:
    """Every non-empty line must be a valid phone number (Brazil when no country code is given)."""
    lines = (line.strip() for line in value.splitlines())
    invalid = [text for text in lines if text and phone_digits(text) is None]
    if invalid:
        raise ValidationError(
            _("Invalid phone numbers: %(numbers)s. Write one per line, e.g. +55 11 91234-5678."),
            params={"numbers": ", ".join(invalid)},
        )


class ReleaseStatus(models.TextChoices):
    DRAFT = "draft", _("draft")
    # Waiting for another editor's approval (PROMPT_APPROVAL_REQUIRED).
    PROPOSED = "proposed", _("awaiting approval")
    APPROVED = "approved", _("approved")
    PUBLISHED = "published", _("published")
    # Was published; a later release (or a rollback) replaced it.
    SUPERSEDED = "superseded", _("replaced")


# A release can be changed, proposed, approved or published only in these statuses.
RELEASE_EDITABLE_STATUSES = (ReleaseStatus.DRAFT,)


class Release(models.Model):
    """One version of each agent's prompt and of each knowledge package, published together
    (docs/decisions/0060): publishing activates all of it in one transaction.

    `prompts` is {agent value: history id of the override version, or null for the built-in
    prompt}; `packages` is {package id: history id of the package version}. Both are frozen once
    the release leaves the draft.
    """

    name = models.CharField(_("name"), max_length=120)
    note = models.TextField(
        _("what changes and why"), blank=True, validators=[MaxLengthValidator(MAX_NOTES_CHARS)]
    )
    prompts = models.JSONField(_("prompt versions"), default=dict, blank=True)
    packages = models.JSONField(_("knowledge package versions"), default=dict, blank=True)
    status = models.CharField(
        _("status"), max_length=16, choices=ReleaseStatus.choices, default=ReleaseStatus.DRAFT
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("proposed by"),
    )
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)
    approved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("approved by"),
    )
    approved_at = models.DateTimeField(_("approved at"), null=True, blank=True)
    # The approver's reason for a prompt the activation gate would not let through, which the
    # publication's history rows record.
    approval_reason = models.TextField(_("approval reason"), blank=True, editable=False)
    published_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("published by"),
    )
    published_at = models.DateTimeField(_("published at"), null=True, blank=True)
    history = HistoricalRecords(history_change_reason_field=models.TextField(null=True))
    _change_reason: str

    class Meta:
        ordering = ["-created_at", "-pk"]
        verbose_name = _("release")
        verbose_name_plural = _("releases")
        permissions = [("approve_release", _("Can approve another editor's release"))]
        constraints = [
            models.UniqueConstraint(
                fields=["status"],
                condition=models.Q(status="published"),
                name="release_one_published",
                violation_error_message=_("Another release is already published."),
            )
        ]

    def __str__(self) -> str:
        return f"#{self.pk or '-'} {self.name}"


class StrategicCompany(models.Model):
    """A customer company whose contacts always go straight to a human."""

    name = models.CharField(_("name"), max_length=160)
    cnpj = models.CharField(
        _("CNPJ"), max_length=18, blank=True, validators=[validate_cnpj], db_index=True
    )
    phone_numbers = models.TextField(
        _("phone numbers"),
        blank=True,
        validators=[MaxLengthValidator(MAX_PHONE_LINES_CHARS), validate_phone_lines],
        help_text=_(
            "One phone number per line, with country and area code (e.g. +55 11 91234-5678)."
        ),
    )
    notes = models.TextField(
        _("notes"), blank=True, validators=[MaxLengthValidator(MAX_NOTES_CHARS)]
    )
    is_active = models.BooleanField(_("active"), default=True)
    history = HistoricalRecords()

    class Meta:
        ordering = ["name"]
        verbose_name = _("strategic company")
        verbose_name_plural = _("strategic companies")

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        self.cnpj = "".join(ch for ch in self.cnpj if ch.isdigit())
