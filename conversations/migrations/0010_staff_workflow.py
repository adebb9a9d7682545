"""Staff workflow (docs/architecture.md, Support workflow internals): assignment, the state a handoff left, the last staff reply, message
templates, CRM delivery bookkeeping, and the permissions to attend conversations and export leads.

- `conversations.attend_session` (take over, assign, reply, send a template, give back, close) and
  `conversations.export_lead` go to Support, with view access to the templates; prompt editors
  get none of them (superusers have every permission).
- Leads marked `delivered` by the old vocabulary read `sent`.
"""

from django.apps import apps as global_apps
from django.contrib.auth.management import create_permissions

import django.core.validators
import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


SUPPORT = "Support"
SUPPORT_PERMISSIONS = (
    ("session", "attend_session"),
    ("lead", "export_lead"),
    ("messagetemplate", "view_messagetemplate"),
)


def _permissions(apps, db):
    Permission = apps.get_model("auth", "Permission")
    return [
        permission
        for model, codename in SUPPORT_PERMISSIONS
        for permission in Permission.objects.using(db).filter(
            content_type__app_label="conversations",
            content_type__model=model,
            codename=codename,
        )
    ]


def grant_to_support(apps, schema_editor) -> None:
    db = schema_editor.connection.alias
    create_permissions(
        global_apps.get_app_config("conversations"), verbosity=0, using=db, apps=apps
    )
    Group = apps.get_model("auth", "Group")
    permissions = _permissions(apps, db)
    for group in Group.objects.using(db).filter(name=SUPPORT):
        group.permissions.add(*permissions)


def revoke_from_support(apps, schema_editor) -> None:
    db = schema_editor.connection.alias
    Group = apps.get_model("auth", "Group")
    permissions = _permissions(apps, db)
    for group in Group.objects.using(db).filter(name=SUPPORT):
        group.permissions.remove(*permissions)


def rename_delivered_to_sent(apps, schema_editor) -> None:
    Lead = apps.get_model("conversations", "Lead")
    Lead.objects.using(schema_editor.connection.alias).filter(crm_status="delivered").update(
        crm_status="sent"
    )


def rename_sent_to_delivered(apps, schema_editor) -> None:
    Lead = apps.get_model("conversations", "Lead")
    Lead.objects.using(schema_editor.connection.alias).filter(crm_status="sent").update(
        crm_status="delivered"
    )


class Migration(migrations.Migration):
    dependencies = [
        ("conversations", "0009_provider_circuit_send_retries"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AlterModelOptions(
            name="lead",
            options={
                "ordering": ["-created_at", "-id"],
                "permissions": [("export_lead", "Can export leads")],
                "verbose_name": "lead",
                "verbose_name_plural": "leads",
            },
        ),
        migrations.AlterModelOptions(
            name="session",
            options={
                "ordering": ["-last_message_at", "-id"],
                "permissions": [
                    ("view_personal_data", "Can view customers' personal data"),
                    ("attend_session", "Can attend conversations"),
                ],
                "verbose_name": "conversation",
                "verbose_name_plural": "conversations",
            },
        ),
        migrations.AddField(
            model_name="lead",
            name="crm_attempts",
            field=models.PositiveSmallIntegerField(default=0, verbose_name="CRM delivery attempts"),
        ),
        migrations.AddField(
            model_name="lead",
            name="crm_sent_at",
            field=models.DateTimeField(blank=True, null=True, verbose_name="sent to the CRM at"),
        ),
        migrations.AddField(
            model_name="session",
            name="assigned_to",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="assigned_sessions",
                to=settings.AUTH_USER_MODEL,
                verbose_name="assigned to",
            ),
        ),
        migrations.AddField(
            model_name="session",
            name="last_staff_reply_at",
            field=models.DateTimeField(blank=True, null=True, verbose_name="last staff reply"),
        ),
        migrations.AddField(
            model_name="session",
            name="state_before_handoff",
            field=models.CharField(
                blank=True,
                choices=[
                    ("TRIAGE", "Triage"),
                    ("QUALIFYING", "Qualifying"),
                    ("DATA_COLLECT", "Data collection"),
                    ("CONFIRM", "Confirmation"),
                    ("HUMAN", "With a human"),
                    ("CLOSED", "Closed"),
                ],
                max_length=16,
                verbose_name="state before the handoff",
            ),
        ),
        migrations.AlterField(
            model_name="lead",
            name="crm_status",
            field=models.CharField(
                choices=[
                    ("not_configured", "not configured"),
                    ("pending", "pending"),
                    ("sent", "sent"),
                    ("failed", "failed"),
                ],
                default="pending",
                max_length=16,
                verbose_name="CRM status",
            ),
        ),
        migrations.CreateModel(
            name="MessageTemplate",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "name",
                    models.CharField(
                        max_length=512,
                        validators=[
                            django.core.validators.RegexValidator(
                                "^[a-z0-9_]+$",
                                "Use the template's name as registered at Meta: lowercase, digits and _.",
                            )
                        ],
                        verbose_name="template name",
                    ),
                ),
                (
                    "language",
                    models.CharField(default="pt_BR", max_length=16, verbose_name="language"),
                ),
                (
                    "body",
                    models.TextField(
                        blank=True,
                        help_text="The approved text with {{1}}, {{2}}, … where the parameters go (shown to staff).",
                        verbose_name="body",
                    ),
                ),
                (
                    "parameters",
                    models.JSONField(
                        blank=True,
                        default=list,
                        help_text='The label of each body parameter, in order, e.g. ["Nome", "Data"].',
                        verbose_name="parameters",
                    ),
                ),
                ("is_active", models.BooleanField(default=True, verbose_name="active")),
                (
                    "created_at",
                    models.DateTimeField(
                        default=django.utils.timezone.now, verbose_name="created at"
                    ),
                ),
            ],
            options={
                "verbose_name": "message template",
                "verbose_name_plural": "message templates",
                "ordering": ["name", "language"],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("name", "language"), name="template_name_language"
                    )
                ],
            },
        ),
        migrations.RunPython(rename_delivered_to_sent, rename_sent_to_delivered),
        migrations.RunPython(grant_to_support, revoke_from_support),
    ]
