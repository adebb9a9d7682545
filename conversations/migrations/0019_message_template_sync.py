from typing import Any

from django.db import migrations, models

import conversations.models


def count_parameters(apps: Any, schema_editor: Any) -> None:
    # Rows registered by hand: one parameter per label (the admin form checked them against
    # the body's {{n}}).
    MessageTemplate = apps.get_model("conversations", "MessageTemplate")
    for template in MessageTemplate.objects.all():
        template.parameter_count = len(template.parameters or [])
        template.save(update_fields=["parameter_count"])


class Migration(migrations.Migration):
    dependencies = [
        ("conversations", "0018_session_viewer"),
    ]

    operations = [
        migrations.AddField(
            model_name="instance",
            name="waba_id",
            field=models.CharField(
                blank=True,
                help_text="The WABA ID shown by Meta; the approved WhatsApp message templates are read from it.",
                max_length=32,
                validators=[conversations.models.WABA_ID_VALIDATOR],
                verbose_name="WhatsApp Business Account ID",
            ),
        ),
        migrations.RemoveConstraint(
            model_name="messagetemplate",
            name="template_name_language",
        ),
        migrations.AddField(
            model_name="messagetemplate",
            name="waba_id",
            field=models.CharField(
                blank=True,
                help_text="Empty: registered by hand, not synced from WhatsApp.",
                max_length=32,
                verbose_name="WhatsApp Business Account ID",
            ),
        ),
        migrations.AddField(
            model_name="messagetemplate",
            name="category",
            field=models.CharField(
                blank=True,
                choices=[
                    ("MARKETING", "marketing"),
                    ("UTILITY", "utility"),
                    ("AUTHENTICATION", "authentication"),
                ],
                max_length=32,
                verbose_name="category",
            ),
        ),
        migrations.AddField(
            model_name="messagetemplate",
            name="components",
            field=models.JSONField(
                blank=True,
                default=list,
                help_text="The template's header, body, footer and buttons as Meta sent them.",
                verbose_name="components",
            ),
        ),
        migrations.AddField(
            model_name="messagetemplate",
            name="parameter_count",
            field=models.PositiveSmallIntegerField(
                default=0, verbose_name="number of parameters"
            ),
        ),
        migrations.AddField(
            model_name="messagetemplate",
            name="meta_template_id",
            field=models.CharField(blank=True, max_length=64, verbose_name="Meta's template ID"),
        ),
        migrations.AddField(
            model_name="messagetemplate",
            name="meta_status",
            field=models.CharField(blank=True, max_length=32, verbose_name="status at Meta"),
        ),
        migrations.AddField(
            model_name="messagetemplate",
            name="synced_at",
            field=models.DateTimeField(blank=True, null=True, verbose_name="last synced at"),
        ),
        migrations.AddConstraint(
            model_name="messagetemplate",
            constraint=models.UniqueConstraint(
                fields=("waba_id", "name", "language"), name="template_waba_name_language"
            ),
        ),
        migrations.AlterModelOptions(
            name="messagetemplate",
            options={
                "ordering": ["name", "language"],
                "permissions": [
                    ("sync_messagetemplate", "Can sync the message templates from WhatsApp")
                ],
                "verbose_name": "message template",
                "verbose_name_plural": "message templates",
            },
        ),
        migrations.RunPython(count_parameters, migrations.RunPython.noop),
    ]
