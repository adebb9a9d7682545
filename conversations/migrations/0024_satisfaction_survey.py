"""The satisfaction survey of a conversation (docs/decisions/0051-satisfaction-survey.md), and
Support's permission to read the CSAT page (`conversations.view_satisfactionsurvey`; prompt
editors do not attend conversations and do not get it). As in `0010_staff_workflow`, the
permission is created here, so the group gets it on the first `migrate`."""

import django.db.models.deletion
import django.utils.timezone
from django.apps import apps as global_apps
from django.conf import settings
from django.contrib.auth.management import create_permissions
from django.db import migrations, models

SUPPORT = "Support"
SUPPORT_PERMISSIONS = (("satisfactionsurvey", "view_satisfactionsurvey"),)


def _permissions(apps, db):
    Permission = apps.get_model("auth", "Permission")
    return [
        permission
        for model, codename in SUPPORT_PERMISSIONS
        for permission in Permission.objects.using(db).filter(
            content_type__app_label="conversations", content_type__model=model, codename=codename
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


class Migration(migrations.Migration):

    dependencies = [
        ('conversations', '0023_session_customer_phone_key'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='SatisfactionSurvey',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('trigger', models.CharField(choices=[('staff_close', 'closed by staff'), ('lead_confirmed', 'confirmed lead')], max_length=16, verbose_name='asked after')),
                ('style', models.CharField(choices=[('buttons', 'three buttons (Ótimo, Regular, Ruim)'), ('list', 'a list from 1 to 5')], max_length=8, verbose_name='answers')),
                ('not_sent', models.CharField(blank=True, choices=[('window_closed', 'not sent: window closed')], max_length=16, verbose_name='not sent')),
                ('handoff_reason', models.CharField(blank=True, choices=[('model_requested', 'requested by the model'), ('qualified_lead', 'qualified lead'), ('llm_invalid_json', 'model answer in an invalid format'), ('llm_invalid_contract', 'model answer outside the contract'), ('llm_timeout', 'model timed out'), ('llm_rate_limited', 'model rate limited'), ('llm_provider_error', 'model provider error'), ('unknown_package', 'unknown knowledge package'), ('enrichment_limit', 'enrichment limit'), ('routing_loop', 'routing loop'), ('staff_takeover', 'taken over by staff'), ('strategic_company', 'strategic company'), ('media', 'media'), ('transcription_failed', 'the audio could not be transcribed')], max_length=32, verbose_name='handoff reason')),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now, verbose_name='created at')),
                ('asked_at', models.DateTimeField(blank=True, null=True, verbose_name='asked at')),
                ('score', models.PositiveSmallIntegerField(blank=True, null=True, verbose_name='score (1-5)')),
                ('answered_at', models.DateTimeField(blank=True, null=True, verbose_name='answered at')),
                ('closed_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL, verbose_name='closed by')),
                ('question', models.OneToOneField(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='satisfaction_question', to='conversations.message', verbose_name='question message')),
                ('session', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='satisfaction_survey', to='conversations.session', verbose_name='conversation')),
            ],
            options={
                'verbose_name': 'satisfaction survey',
                'verbose_name_plural': 'satisfaction surveys',
                'ordering': ['-created_at', '-id'],
                'indexes': [models.Index(fields=['created_at'], name='satisfaction_created')],
                'constraints': [models.CheckConstraint(condition=models.Q(('score__isnull', True), models.Q(('score__gte', 1), ('score__lte', 5)), _connector='OR'), name='satisfaction_score_1_to_5')],
            },
        ),
        migrations.RunPython(grant_to_support, revoke_from_support),
    ]
