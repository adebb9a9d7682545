"""Simulated customers (docs/architecture.md, Simulated customers): the personas, their runs and
results, and a replay slot held by a persona run. Prompt editors add, edit and read personas,
start and read their runs; Support gets none of it. As in `0002_prompt_editor_permissions.py`, the
permissions are created here so the group gets them on the first `migrate`.
"""

import django.core.validators
import django.db.models.deletion
import django.utils.timezone
import simple_history.models
from decimal import Decimal
from django.apps import apps as global_apps
from django.conf import settings
from django.contrib.auth.management import create_permissions
from django.db import migrations, models

PROMPT_EDITORS = "Prompt editors"
PROMPT_EDITOR_PERMISSIONS = (
    ("persona", "add_persona"),
    ("persona", "change_persona"),
    ("persona", "view_persona"),
    ("personarun", "add_personarun"),
    ("personarun", "view_personarun"),
    ("personaresult", "view_personaresult"),
)


def _permissions(apps, db):
    Permission = apps.get_model("auth", "Permission")
    return [
        permission
        for model, codename in PROMPT_EDITOR_PERMISSIONS
        for permission in Permission.objects.using(db).filter(
            content_type__app_label="governance", content_type__model=model, codename=codename
        )
    ]


def grant_to_prompt_editors(apps, schema_editor) -> None:
    db = schema_editor.connection.alias
    create_permissions(global_apps.get_app_config("governance"), verbosity=0, using=db, apps=apps)
    Group = apps.get_model("auth", "Group")
    permissions = _permissions(apps, db)
    for group in Group.objects.using(db).filter(name=PROMPT_EDITORS):
        group.permissions.add(*permissions)


def revoke_from_prompt_editors(apps, schema_editor) -> None:
    db = schema_editor.connection.alias
    Group = apps.get_model("auth", "Group")
    permissions = _permissions(apps, db)
    for group in Group.objects.using(db).filter(name=PROMPT_EDITORS):
        group.permissions.remove(*permissions)


class Migration(migrations.Migration):
    dependencies = [
        ("conversations", "0025_llmcall_cached_tokens"),
        ("governance", "0007_prompt_test_case_permissions"),
        ("prompts_admin", "0004_rollout_percent"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="Persona",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("title", models.CharField(max_length=200, verbose_name="title")),
                (
                    "description",
                    models.TextField(
                        help_text="In Portuguese, as you would brief an actor: who they are, what they want, how they write, what they tell only when asked.",
                        max_length=2000,
                        verbose_name="who the customer is and what they want",
                    ),
                ),
                (
                    "goal",
                    models.CharField(
                        choices=[
                            ("lead", "a confirmed request"),
                            ("handoff", "a handoff to the team"),
                        ],
                        default="lead",
                        max_length=8,
                        verbose_name="expected outcome",
                    ),
                ),
                (
                    "expected_segment",
                    models.CharField(
                        blank=True, max_length=64, verbose_name="segment of the request"
                    ),
                ),
                (
                    "expected_service",
                    models.CharField(
                        blank=True, max_length=64, verbose_name="service of the request"
                    ),
                ),
                (
                    "required_fields",
                    models.JSONField(
                        blank=True, default=list, verbose_name="fields the request must have"
                    ),
                ),
                (
                    "expected_handoff_reason",
                    models.CharField(
                        blank=True,
                        choices=[
                            ("model_requested", "requested by the model"),
                            ("qualified_lead", "qualified lead"),
                            ("llm_invalid_json", "model answer in an invalid format"),
                            ("llm_invalid_contract", "model answer outside the contract"),
                            ("llm_timeout", "model timed out"),
                            ("llm_rate_limited", "model rate limited"),
                            ("llm_provider_error", "model provider error"),
                            ("unknown_package", "unknown knowledge package"),
                            ("enrichment_limit", "enrichment limit"),
                            ("routing_loop", "routing loop"),
                            ("staff_takeover", "taken over by staff"),
                            ("strategic_company", "strategic company"),
                            ("media", "media"),
                            ("transcription_failed", "the audio could not be transcribed"),
                        ],
                        max_length=32,
                        verbose_name="handoff reason",
                    ),
                ),
                (
                    "max_turns",
                    models.PositiveSmallIntegerField(
                        default=12,
                        validators=[
                            django.core.validators.MinValueValidator(1),
                            django.core.validators.MaxValueValidator(30),
                        ],
                        verbose_name="at most this many customer messages",
                    ),
                ),
                ("is_active", models.BooleanField(default=True, verbose_name="active")),
                (
                    "created_at",
                    models.DateTimeField(
                        default=django.utils.timezone.now, verbose_name="created at"
                    ),
                ),
                ("updated_at", models.DateTimeField(auto_now=True, verbose_name="updated at")),
            ],
            options={
                "verbose_name": "simulated customer",
                "verbose_name_plural": "simulated customers",
                "ordering": ["title", "id"],
            },
        ),
        migrations.AlterField(
            model_name="replayslot",
            name="run",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="governance.replayrun",
                verbose_name="replay run",
            ),
        ),
        migrations.CreateModel(
            name="HistoricalPersona",
            fields=[
                (
                    "id",
                    models.BigIntegerField(
                        auto_created=True, blank=True, db_index=True, verbose_name="ID"
                    ),
                ),
                ("title", models.CharField(max_length=200, verbose_name="title")),
                (
                    "description",
                    models.TextField(
                        help_text="In Portuguese, as you would brief an actor: who they are, what they want, how they write, what they tell only when asked.",
                        max_length=2000,
                        verbose_name="who the customer is and what they want",
                    ),
                ),
                (
                    "goal",
                    models.CharField(
                        choices=[
                            ("lead", "a confirmed request"),
                            ("handoff", "a handoff to the team"),
                        ],
                        default="lead",
                        max_length=8,
                        verbose_name="expected outcome",
                    ),
                ),
                (
                    "expected_segment",
                    models.CharField(
                        blank=True, max_length=64, verbose_name="segment of the request"
                    ),
                ),
                (
                    "expected_service",
                    models.CharField(
                        blank=True, max_length=64, verbose_name="service of the request"
                    ),
                ),
                (
                    "required_fields",
                    models.JSONField(
                        blank=True, default=list, verbose_name="fields the request must have"
                    ),
                ),
                (
                    "expected_handoff_reason",
                    models.CharField(
                        blank=True,
                        choices=[
                            ("model_requested", "requested by the model"),
                            ("qualified_lead", "qualified lead"),
                            ("llm_invalid_json", "model answer in an invalid format"),
                            ("llm_invalid_contract", "model answer outside the contract"),
                            ("llm_timeout", "model timed out"),
                            ("llm_rate_limited", "model rate limited"),
                            ("llm_provider_error", "model provider error"),
                            ("unknown_package", "unknown knowledge package"),
                            ("enrichment_limit", "enrichment limit"),
                            ("routing_loop", "routing loop"),
                            ("staff_takeover", "taken over by staff"),
                            ("strategic_company", "strategic company"),
                            ("media", "media"),
                            ("transcription_failed", "the audio could not be transcribed"),
                        ],
                        max_length=32,
                        verbose_name="handoff reason",
                    ),
                ),
                (
                    "max_turns",
                    models.PositiveSmallIntegerField(
                        default=12,
                        validators=[
                            django.core.validators.MinValueValidator(1),
                            django.core.validators.MaxValueValidator(30),
                        ],
                        verbose_name="at most this many customer messages",
                    ),
                ),
                ("is_active", models.BooleanField(default=True, verbose_name="active")),
                (
                    "created_at",
                    models.DateTimeField(
                        default=django.utils.timezone.now, verbose_name="created at"
                    ),
                ),
                (
                    "updated_at",
                    models.DateTimeField(blank=True, editable=False, verbose_name="updated at"),
                ),
                ("history_change_reason", models.TextField(null=True)),
                ("history_id", models.AutoField(primary_key=True, serialize=False)),
                ("history_date", models.DateTimeField(db_index=True)),
                (
                    "history_type",
                    models.CharField(
                        choices=[("+", "Created"), ("~", "Changed"), ("-", "Deleted")], max_length=1
                    ),
                ),
                (
                    "history_user",
                    models.ForeignKey(
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "verbose_name": "historical simulated customer",
                "verbose_name_plural": "historical simulated customers",
                "ordering": ("-history_date", "-history_id"),
                "get_latest_by": ("history_date", "history_id"),
            },
            bases=(simple_history.models.HistoricalChanges, models.Model),
        ),
        migrations.CreateModel(
            name="PersonaRun",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "agent",
                    models.CharField(
                        blank=True,
                        choices=[
                            ("triagem", "triage"),
                            ("qualificacao", "qualification"),
                            ("coleta", "collection"),
                            ("orchestrator", "orchestrator"),
                            ("summary", "summary"),
                            ("media", "media reading"),
                        ],
                        max_length=16,
                        verbose_name="agent",
                    ),
                ),
                ("prompt_versions", models.JSONField(default=dict, verbose_name="prompt versions")),
                (
                    "persona_ids",
                    models.JSONField(
                        blank=True, default=list, verbose_name="simulated customers chosen"
                    ),
                ),
                (
                    "status",
                    models.CharField(
                        choices=[
                            ("queued", "queued"),
                            ("running", "running"),
                            ("done", "done"),
                            ("cancelled", "cancelled"),
                            ("capped", "stopped by a cap"),
                            ("failed", "failed"),
                        ],
                        default="queued",
                        max_length=16,
                        verbose_name="status",
                    ),
                ),
                ("detail", models.CharField(blank=True, max_length=255, verbose_name="detail")),
                ("task_id", models.CharField(blank=True, max_length=64, verbose_name="task id")),
                (
                    "personas_selected",
                    models.PositiveIntegerField(default=0, verbose_name="simulated customers"),
                ),
                (
                    "personas_done",
                    models.PositiveIntegerField(
                        default=0, verbose_name="simulated customers played"
                    ),
                ),
                (
                    "reached",
                    models.PositiveIntegerField(default=0, verbose_name="outcomes reached"),
                ),
                ("failed", models.PositiveIntegerField(default=0, verbose_name="outcomes missed")),
                (
                    "tokens_input",
                    models.PositiveIntegerField(default=0, verbose_name="input tokens"),
                ),
                (
                    "cached_tokens",
                    models.PositiveIntegerField(default=0, verbose_name="cached input tokens"),
                ),
                (
                    "tokens_output",
                    models.PositiveIntegerField(default=0, verbose_name="output tokens"),
                ),
                (
                    "cost_usd",
                    models.DecimalField(
                        decimal_places=6,
                        default=Decimal("0"),
                        max_digits=12,
                        verbose_name="cost (USD)",
                    ),
                ),
                (
                    "created_at",
                    models.DateTimeField(
                        default=django.utils.timezone.now, verbose_name="created at"
                    ),
                ),
                (
                    "started_at",
                    models.DateTimeField(blank=True, null=True, verbose_name="started at"),
                ),
                (
                    "finished_at",
                    models.DateTimeField(blank=True, null=True, verbose_name="finished at"),
                ),
                (
                    "created_by",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                        verbose_name="started by",
                    ),
                ),
                (
                    "override",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="persona_runs",
                        to="prompts_admin.promptoverride",
                        verbose_name="prompt override",
                    ),
                ),
            ],
            options={
                "verbose_name": "simulated customers run",
                "verbose_name_plural": "simulated customers runs",
                "ordering": ["-created_at", "-id"],
            },
        ),
        migrations.CreateModel(
            name="PersonaResult",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("title", models.CharField(max_length=200, verbose_name="title")),
                ("reached", models.BooleanField(default=False, verbose_name="outcome reached")),
                (
                    "outcome",
                    models.CharField(
                        blank=True,
                        choices=[
                            ("lead", "confirmed request"),
                            ("handoff", "handoff"),
                            ("closed", "conversation closed"),
                            ("max_turns", "message limit reached"),
                            ("customer_ended", "the customer gave up"),
                            ("cost_cap", "stopped at the cost limit"),
                            ("error", "error"),
                        ],
                        max_length=16,
                        verbose_name="how it ended",
                    ),
                ),
                (
                    "handoff_reason",
                    models.CharField(
                        blank=True,
                        choices=[
                            ("model_requested", "requested by the model"),
                            ("qualified_lead", "qualified lead"),
                            ("llm_invalid_json", "model answer in an invalid format"),
                            ("llm_invalid_contract", "model answer outside the contract"),
                            ("llm_timeout", "model timed out"),
                            ("llm_rate_limited", "model rate limited"),
                            ("llm_provider_error", "model provider error"),
                            ("unknown_package", "unknown knowledge package"),
                            ("enrichment_limit", "enrichment limit"),
                            ("routing_loop", "routing loop"),
                            ("staff_takeover", "taken over by staff"),
                            ("strategic_company", "strategic company"),
                            ("media", "media"),
                            ("transcription_failed", "the audio could not be transcribed"),
                        ],
                        max_length=32,
                        verbose_name="handoff reason",
                    ),
                ),
                (
                    "differences",
                    models.JSONField(blank=True, default=list, verbose_name="differences"),
                ),
                (
                    "turns",
                    models.PositiveSmallIntegerField(default=0, verbose_name="customer messages"),
                ),
                ("handoffs", models.PositiveSmallIntegerField(default=0, verbose_name="handoffs")),
                (
                    "contract_errors",
                    models.PositiveSmallIntegerField(default=0, verbose_name="contract errors"),
                ),
                (
                    "tokens_input",
                    models.PositiveIntegerField(default=0, verbose_name="input tokens"),
                ),
                (
                    "cached_tokens",
                    models.PositiveIntegerField(default=0, verbose_name="cached input tokens"),
                ),
                (
                    "tokens_output",
                    models.PositiveIntegerField(default=0, verbose_name="output tokens"),
                ),
                (
                    "cost_usd",
                    models.DecimalField(
                        decimal_places=6,
                        default=Decimal("0"),
                        max_digits=12,
                        verbose_name="cost (USD)",
                    ),
                ),
                ("transcript", models.JSONField(default=list, verbose_name="transcript")),
                (
                    "created_at",
                    models.DateTimeField(
                        default=django.utils.timezone.now, verbose_name="created at"
                    ),
                ),
                (
                    "persona",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to="governance.persona",
                        verbose_name="simulated customer",
                    ),
                ),
                (
                    "session",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to="conversations.session",
                        verbose_name="conversation",
                    ),
                ),
                (
                    "run",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="results",
                        to="governance.personarun",
                        verbose_name="run",
                    ),
                ),
            ],
            options={
                "verbose_name": "simulated customer result",
                "verbose_name_plural": "simulated customer results",
                "ordering": ["run", "id"],
            },
        ),
        migrations.AddField(
            model_name="replayslot",
            name="persona_run",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="governance.personarun",
                verbose_name="simulated customers run",
            ),
        ),
        migrations.AddConstraint(
            model_name="replayslot",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    models.Q(("persona_run__isnull", True), ("run__isnull", False)),
                    models.Q(("persona_run__isnull", False), ("run__isnull", True)),
                    _connector="OR",
                ),
                name="replay_slot_one_holder",
            ),
        ),
        migrations.RunPython(grant_to_prompt_editors, revoke_from_prompt_editors),
    ]
