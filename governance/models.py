"""A replay run of a draft prompt override over recorded model calls, and its per-call results
(docs/architecture.md, Replay a draft). The run keeps the draft's text and its hash, so the
activation gate finds the latest replay of exactly the text being activated (docs/architecture.md,
The activation gate) even after the override was edited.

Prompt test cases (docs/architecture.md, Prompt test cases): a recorded call frozen with what an
editor expects of its answer, and the runs of an agent's cases against a text.

Simulated customers (docs/architecture.md, Simulated customers): a persona, and the runs that play
the personas' whole conversations against a text.
"""

from decimal import Decimal

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from simple_history.models import HistoricalRecords

from conversations.models import (
    AGENT_CHOICES,
    HANDOFF_REASON_CHOICES,
    STATE_CHOICES,
    Instance,
    LLMCall,
    Session,
)
from prompts_admin.models import PromptOverride, Release


class ReplayStatus(models.TextChoices):
    QUEUED = "queued", _("queued")
    RUNNING = "running", _("running")
    DONE = "done", _("done")
    CANCELLED = "cancelled", _("cancelled")
    # A cap (REPLAY_MAX_CALLS, REPLAY_MAX_COST_USD) stopped it; the results so far are kept.
    CAPPED = "capped", _("stopped by a cap")
    FAILED = "failed", _("failed")


FINISHED_STATUSES = (
    ReplayStatus.DONE,
    ReplayStatus.CANCELLED,
    ReplayStatus.CAPPED,
    ReplayStatus.FAILED,
)


class ContractOutcome(models.TextChoices):
    VALID = "valid", _("valid")
    REPAIRED = "repaired", _("repaired")
    FAILED = "failed", _("failed")


class ModelRun(models.Model):
    """What a run of a draft's model calls has in common, a replay's or a run of simulated
    customers': its status, its task, its token and cost totals, who started it and when.
    Abstract: each kind of run keeps its own table."""

    status = models.CharField(
        _("status"), max_length=16, choices=ReplayStatus.choices, default=ReplayStatus.QUEUED
    )
    detail = models.CharField(_("detail"), max_length=255, blank=True)
    task_id = models.CharField(_("task id"), max_length=64, blank=True)
    tokens_input = models.PositiveIntegerField(_("input tokens"), default=0)
    # The part of tokens_input read from the provider's prompt cache.
    cached_tokens = models.PositiveIntegerField(_("cached input tokens"), default=0)
    tokens_output = models.PositiveIntegerField(_("output tokens"), default=0)
    cost_usd = models.DecimalField(
        _("cost (USD)"), default=Decimal("0"), max_digits=12, decimal_places=6
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("started by"),
    )
    created_at = models.DateTimeField(_("created at"), default=timezone.now)
    started_at = models.DateTimeField(_("started at"), null=True, blank=True)
    finished_at = models.DateTimeField(_("finished at"), null=True, blank=True)

    class Meta:
        abstract = True
        ordering = ["-created_at", "-id"]

    @property
    def finished(self) -> bool:
        return self.status in FINISHED_STATUSES


class ReplayRun(ModelRun):
    """One replay of a draft override's text over a selection of recorded calls of its agent."""

    override = models.ForeignKey(
        PromptOverride,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="replay_runs",
        verbose_name=_("prompt override"),
    )
    agent = models.CharField(_("agent"), max_length=16, choices=AGENT_CHOICES)
    # The draft's text as replayed, and its `prompts_admin.models.prompt_content_hash`.
    content = models.TextField(_("replayed text"))
    content_hash = models.CharField(_("content hash"), max_length=64, db_index=True)
    model = models.CharField(_("model"), max_length=64, blank=True)
    # date_from, date_to (ISO dates), segment, handoff_reason, last_n: what was selected.
    filters = models.JSONField(_("filters"), default=dict, blank=True)
    cancel_requested = models.BooleanField(_("cancel requested"), default=False)
    # The start form's one-time token: a second submit of the same form finds this run.
    form_token = models.UUIDField(_("form token"), null=True, blank=True, unique=True)
    # When the run's task was last published and no worker has looked at it yet; None while the
    # run waits for a free run slot (`governance.replay.replay_queue_advance` publishes it then).
    dispatched_at = models.DateTimeField(_("dispatched at"), null=True, blank=True)
    # Totals, updated as results arrive (the admin shows the progress from them).
    calls_selected = models.PositiveIntegerField(_("calls selected"), default=0)
    calls_done = models.PositiveIntegerField(_("calls replayed"), default=0)
    code_changed = models.PositiveIntegerField(_("codes changed"), default=0)
    state_changed = models.PositiveIntegerField(_("state changes changed"), default=0)
    handoff_changed = models.PositiveIntegerField(_("handoffs changed"), default=0)
    contract_errors = models.PositiveIntegerField(_("contract errors"), default=0)
    repaired = models.PositiveIntegerField(_("repaired answers"), default=0)
    provider_errors = models.PositiveIntegerField(_("provider errors"), default=0)

    class Meta(ModelRun.Meta):
        verbose_name = _("replay run")
        verbose_name_plural = _("replay runs")
        indexes = [
            models.Index(fields=["content_hash", "-created_at"], name="replay_run_hash"),
        ]

    def __str__(self) -> str:
        return f"#{self.pk} {self.agent} ({self.status})"


class ReplayResult(models.Model):
    """One recorded call replayed: what was recorded against what the draft answered."""

    run = models.ForeignKey(
        ReplayRun, on_delete=models.CASCADE, related_name="results", verbose_name=_("replay run")
    )
    # SET_NULL: retention may delete the conversation; the comparison stays readable.
    llm_call = models.ForeignKey(
        LLMCall,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("recorded call"),
    )
    session = models.ForeignKey(
        Session,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("conversation"),
    )
    recorded_at = models.DateTimeField(_("recorded at"), null=True, blank=True)
    recorded_prompt_version = models.CharField(_("recorded prompt version"), max_length=32)
    recorded_code = models.SmallIntegerField(_("recorded code"), null=True, blank=True)
    replayed_code = models.SmallIntegerField(_("replayed code"), null=True, blank=True)
    # The session state after the answer ("" when it stays), recorded and replayed.
    recorded_state = models.CharField(_("recorded next state"), max_length=16, blank=True)
    replayed_state = models.CharField(_("replayed next state"), max_length=16, blank=True)
    # The handoff reason the answer leads to ("" for none).
    recorded_handoff = models.CharField(_("recorded handoff"), max_length=32, blank=True)
    replayed_handoff = models.CharField(_("replayed handoff"), max_length=32, blank=True)
    recorded_packages = models.JSONField(_("recorded packages requested"), default=list)
    replayed_packages = models.JSONField(_("replayed packages requested"), default=list)
    contract = models.CharField(
        _("contract"), max_length=16, choices=ContractOutcome.choices, blank=True
    )
    error = models.TextField(_("error"), blank=True)
    recorded_text = models.TextField(_("recorded message"), blank=True)
    replayed_text = models.TextField(_("replayed message"), blank=True)
    replayed_raw = models.TextField(_("replayed raw answer"), blank=True)
    code_changed = models.BooleanField(_("code changed"), default=False)
    state_changed = models.BooleanField(_("state change changed"), default=False)
    handoff_changed = models.BooleanField(_("handoff changed"), default=False)
    tokens_input = models.PositiveIntegerField(_("input tokens"), default=0)
    # The part of tokens_input read from the provider's prompt cache.
    cached_tokens = models.PositiveIntegerField(_("cached input tokens"), default=0)
    tokens_output = models.PositiveIntegerField(_("output tokens"), default=0)
    cost_usd = models.DecimalField(
        _("cost (USD)"), default=Decimal("0"), max_digits=12, decimal_places=6
    )
    latency_ms = models.PositiveIntegerField(_("latency (ms)"), default=0)
    created_at = models.DateTimeField(_("created at"), default=timezone.now)

    class Meta:
        ordering = ["run", "recorded_at", "id"]
        verbose_name = _("replay result")
        verbose_name_plural = _("replay results")
        constraints = [
            models.UniqueConstraint(fields=["run", "llm_call"], name="replay_result_once_per_call")
        ]

    def __str__(self) -> str:
        return f"{self.run_id}: {self.recorded_code} → {self.replayed_code}"


class ReplaySlotPool(models.TextChoices):
    # REPLAY_MAX_RUNNING runs at once, REPLAY_CONCURRENCY model calls in flight at once.
    RUN = "run", _("run")
    CALL = "call", _("model call")


class ReplaySlot(models.Model):
    """One of the installation's replay slots, held by a run until it gives it back or the
    lease expires (its holder died). The unique (pool, number) pair is the whole lock: taking
    slot N is inserting its row, which one process at most can do, on PostgreSQL and SQLite
    alike (`governance.slots`)."""

    pool = models.CharField(_("pool"), max_length=8, choices=ReplaySlotPool.choices)
    number = models.PositiveSmallIntegerField(_("number"))
    # The holder: a replay run or a simulated customers run (`PersonaRun`), exactly one.
    run = models.ForeignKey(
        ReplayRun,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("replay run"),
    )
    persona_run = models.ForeignKey(
        "PersonaRun",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("simulated customers run"),
    )
    expires_at = models.DateTimeField(_("expires at"))

    class Meta:
        verbose_name = _("replay slot")
        verbose_name_plural = _("replay slots")
        constraints = [
            models.UniqueConstraint(fields=["pool", "number"], name="replay_slot_once"),
            models.CheckConstraint(
                condition=models.Q(run__isnull=False, persona_run__isnull=True)
                | models.Q(run__isnull=True, persona_run__isnull=False),
                name="replay_slot_one_holder",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.pool} {self.number}: {self.run_id or self.persona_run_id}"


class HandoffExpectation(models.TextChoices):
    ANY = "any", _("either way")
    YES = "yes", _("yes")
    NO = "no", _("no")


class PromptTestCase(models.Model):
    """A recorded call frozen with what its answer must do (`governance.test_cases`).

    The copy is what the replay reads of the call (`governance.recorded.RecordedCall`): its
    context snapshot and its history as the call read it, masked when the editor who saved it
    may not read personal data. The call may be deleted later (retention): the case stays.
    """

    agent = models.CharField(_("agent"), max_length=16, choices=AGENT_CHOICES)
    title = models.CharField(_("title"), max_length=200)
    llm_call = models.ForeignKey(
        LLMCall,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("recorded call"),
    )
    # The instance's current phone and brand text are read at each run, as the replay does;
    # SET_NULL: without it the case runs with neither. (Not `instance`: simple-history's
    # versions use that name.)
    source_instance = models.ForeignKey(
        Instance,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("instance"),
    )
    # The ids the answer is read under (logs only) and the call's time (the prompt's clock).
    session_id_recorded = models.PositiveBigIntegerField(_("recorded conversation id"), default=0)
    recorded_at = models.DateTimeField(_("recorded at"))
    context_snapshot = models.JSONField(_("context snapshot"), default=dict)
    # `governance.test_cases.history_as_json`: the entries the call read, oldest first.
    history_entries = models.JSONField(_("conversation history"), default=list)
    masked = models.BooleanField(_("personal data masked"), default=False)
    # What the answer recorded, as the case was saved (shown to the editor, never compared).
    recorded_code = models.SmallIntegerField(_("recorded code"), null=True, blank=True)
    recorded_text = models.TextField(_("recorded message"), blank=True)
    # The expectations: an empty one is not checked.
    expected_code = models.SmallIntegerField(_("expected code"), null=True, blank=True)
    expected_state = models.CharField(
        _("expected next state"), max_length=16, choices=STATE_CHOICES, blank=True
    )
    handoff_expected = models.CharField(
        _("handoff expected"),
        max_length=8,
        choices=HandoffExpectation.choices,
        default=HandoffExpectation.ANY,
    )
    expected_handoff_reason = models.CharField(
        _("expected handoff reason"), max_length=32, choices=HANDOFF_REASON_CHOICES, blank=True
    )
    required_fields = models.JSONField(_("required fields"), default=list, blank=True)
    must_contain = models.JSONField(_("texts that must appear"), default=list, blank=True)
    must_not_contain = models.JSONField(_("texts that must not appear"), default=list, blank=True)
    expected_package = models.CharField(_("package requested"), max_length=64, blank=True)
    is_active = models.BooleanField(_("active"), default=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("created by"),
    )
    created_at = models.DateTimeField(_("created at"), default=timezone.now)
    updated_at = models.DateTimeField(_("updated at"), auto_now=True)
    history = HistoricalRecords()

    class Meta:
        ordering = ["agent", "id"]
        verbose_name = _("prompt test case")
        verbose_name_plural = _("prompt test cases")

    def __str__(self) -> str:
        return f"#{self.pk} {self.title}"


class PromptTestRun(models.Model):
    """One run of an agent's active test cases against a text; the activation gate reads the
    latest of exactly the text being activated (by hash), as it reads replays."""

    override = models.ForeignKey(
        PromptOverride,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="test_runs",
        verbose_name=_("prompt override"),
    )
    agent = models.CharField(_("agent"), max_length=16, choices=AGENT_CHOICES)
    content_hash = models.CharField(_("content hash"), max_length=64, db_index=True)
    # [id, updated_at] of each case run: a case added or edited later is not covered by it.
    case_versions = models.JSONField(_("cases run"), default=list)
    cases = models.PositiveIntegerField(_("cases"), default=0)
    passed = models.PositiveIntegerField(_("cases passed"), default=0)
    failed = models.PositiveIntegerField(_("cases failed"), default=0)
    # `governance.test_cases.CaseResult.as_json` of each case.
    results = models.JSONField(_("results"), default=list)
    cost_usd = models.DecimalField(
        _("cost (USD)"), default=Decimal("0"), max_digits=12, decimal_places=6
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("run by"),
    )
    created_at = models.DateTimeField(_("created at"), default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = _("prompt test run")
        verbose_name_plural = _("prompt test runs")

    def __str__(self) -> str:
        return f"#{self.pk} {self.agent}: {self.passed}/{self.cases}"


# --- Simulated customers (docs/architecture.md, Simulated customers) ----------------------------

# A persona's conversation is a few exchanges; past this a draft that loops would burn the cost cap.
PERSONA_MIN_TURNS = 1
PERSONA_MAX_TURNS_LIMIT = 30
PERSONA_DEFAULT_MAX_TURNS = 12


class PersonaGoal(models.TextChoices):
    LEAD = "lead", _("a confirmed request")
    HANDOFF = "handoff", _("a handoff to the team")


class Persona(models.Model):
    """A simulated customer (`simulator.personas`): who they are and what they want, in the
    editor's words, and how their conversation must end."""

    title = models.CharField(_("title"), max_length=200)
    description = models.TextField(
        _("who the customer is and what they want"),
        max_length=2000,
        help_text=_(
            "In Portuguese, as you would brief an actor: who they are, what they want, how they "
            "write, what they tell only when asked."
        ),
    )
    goal = models.CharField(
        _("expected outcome"), max_length=8, choices=PersonaGoal.choices, default=PersonaGoal.LEAD
    )
    # For a confirmed request: what the request must hold (empty: not checked).
    expected_segment = models.CharField(_("segment of the request"), max_length=64, blank=True)
    expected_service = models.CharField(_("service of the request"), max_length=64, blank=True)
    required_fields = models.JSONField(_("fields the request must have"), default=list, blank=True)
    # For a handoff: its reason.
    expected_handoff_reason = models.CharField(
        _("handoff reason"), max_length=32, choices=HANDOFF_REASON_CHOICES, blank=True
    )
    max_turns = models.PositiveSmallIntegerField(
        _("at most this many customer messages"),
        default=PERSONA_DEFAULT_MAX_TURNS,
        validators=[
            MinValueValidator(PERSONA_MIN_TURNS),
            MaxValueValidator(PERSONA_MAX_TURNS_LIMIT),
        ],
    )
    is_active = models.BooleanField(_("active"), default=True)
    created_at = models.DateTimeField(_("created at"), default=timezone.now)
    updated_at = models.DateTimeField(_("updated at"), auto_now=True)
    # The editor's change reason (`versioning.forms.ChangeReasonForm`) holds 255 characters.
    history = HistoricalRecords(history_change_reason_field=models.TextField(null=True))

    class Meta:
        ordering = ["title", "id"]
        verbose_name = _("simulated customer")
        verbose_name_plural = _("simulated customers")

    def __str__(self) -> str:
        return self.title

    def clean(self) -> None:
        if self.goal == PersonaGoal.HANDOFF and not self.expected_handoff_reason:
            raise ValidationError(
                {"expected_handoff_reason": _("Say which handoff reason is expected.")}
            )
        if self.goal == PersonaGoal.LEAD and self.expected_handoff_reason:
            raise ValidationError(
                {"expected_handoff_reason": _("A confirmed request has no handoff reason to set.")}
            )


class PersonaRun(ModelRun):
    """One run of simulated customers against a prompt personalizado (or the prompts in use
    when `override` is None)."""

    override = models.ForeignKey(
        PromptOverride,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="persona_runs",
        verbose_name=_("prompt override"),
    )
    # A run of a release's prompt versions (`simulate_personas --release`); null otherwise.
    release = models.ForeignKey(
        Release,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="persona_runs",
        verbose_name=_("release"),
    )
    agent = models.CharField(_("agent"), max_length=16, choices=AGENT_CHOICES, blank=True)
    # The versions each agent's conversation pins (`Session.prompt_versions`), fixed at the start.
    prompt_versions = models.JSONField(_("prompt versions"), default=dict)
    # The knowledge package versions they pin (`Session.package_versions`), fixed at the start
    # too, so that an edit made while the run plays reaches none of its conversations.
    package_versions = models.JSONField(_("knowledge package versions"), default=dict)
    # The personas chosen ([]: every active one at the start).
    persona_ids = models.JSONField(_("simulated customers chosen"), default=list, blank=True)
    personas_selected = models.PositiveIntegerField(_("simulated customers"), default=0)
    personas_done = models.PositiveIntegerField(_("simulated customers played"), default=0)
    reached = models.PositiveIntegerField(_("outcomes reached"), default=0)
    failed = models.PositiveIntegerField(_("outcomes missed"), default=0)

    class Meta(ModelRun.Meta):
        verbose_name = _("simulated customers run")
        verbose_name_plural = _("simulated customers runs")

    def __str__(self) -> str:
        return f"#{self.pk} ({self.status})"


class PersonaOutcome(models.TextChoices):
    LEAD = "lead", _("confirmed request")
    HANDOFF = "handoff", _("handoff")
    CLOSED = "closed", _("conversation closed")
    MAX_TURNS = "max_turns", _("message limit reached")
    CUSTOMER_ENDED = "customer_ended", _("the customer gave up")
    COST_CAP = "cost_cap", _("stopped at the cost limit")
    ERROR = "error", _("error")


class PersonaResult(models.Model):
    """One persona's conversation in a run: what it reached, at what cost, and its transcript."""

    run = models.ForeignKey(
        PersonaRun, on_delete=models.CASCADE, related_name="results", verbose_name=_("run")
    )
    persona = models.ForeignKey(
        Persona,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("simulated customer"),
    )
    title = models.CharField(_("title"), max_length=200)
    session = models.ForeignKey(
        Session,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("conversation"),
    )
    reached = models.BooleanField(_("outcome reached"), default=False)
    outcome = models.CharField(
        _("how it ended"), max_length=16, choices=PersonaOutcome.choices, blank=True
    )
    handoff_reason = models.CharField(
        _("handoff reason"), max_length=32, choices=HANDOFF_REASON_CHOICES, blank=True
    )
    # Why the outcome was missed, one pt-BR sentence each.
    differences = models.JSONField(_("differences"), default=list, blank=True)
    turns = models.PositiveSmallIntegerField(_("customer messages"), default=0)
    handoffs = models.PositiveSmallIntegerField(_("handoffs"), default=0)
    contract_errors = models.PositiveSmallIntegerField(_("contract errors"), default=0)
    tokens_input = models.PositiveIntegerField(_("input tokens"), default=0)
    cached_tokens = models.PositiveIntegerField(_("cached input tokens"), default=0)
    tokens_output = models.PositiveIntegerField(_("output tokens"), default=0)
    cost_usd = models.DecimalField(
        _("cost (USD)"), default=Decimal("0"), max_digits=12, decimal_places=6
    )
    # `simulator.personas.Bubble.as_json` of each message, in order.
    transcript = models.JSONField(_("transcript"), default=list)
    created_at = models.DateTimeField(_("created at"), default=timezone.now)

    class Meta:
        ordering = ["run", "id"]
        verbose_name = _("simulated customer result")
        verbose_name_plural = _("simulated customer results")

    def __str__(self) -> str:
        return f"{self.run_id}: {self.title}"
