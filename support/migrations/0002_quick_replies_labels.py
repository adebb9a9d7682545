"""Quick replies and labels (support.models), and what Support may do with them.

Support gets every model permission of quick replies (each person manages their own: the admin
keeps colleagues' personal replies and the shared ones out of their hands,
`support.admin.quick_replies`) and adds, changes and views labels (the team's own vocabulary;
deleting one, which takes it off every conversation, stays with superusers).
`support.manage_shared_quickreply`, writing the texts the whole team sends in the company's name,
goes to no group: a superuser grants it to whoever keeps them. Prompt editors get none of it:
they do not attend conversations. As in `conversations/migrations/0002_staff_groups.py`, the
permissions are created here, so the group gets them on the first `migrate`.
"""

import django.core.validators
import django.db.models.deletion
import django.db.models.functions.text
import django.utils.timezone
import simple_history.models
from django.apps import apps as global_apps
from django.conf import settings
from django.contrib.auth.management import create_permissions
from django.db import migrations, models

SUPPORT = "Support"
SUPPORT_PERMISSIONS = (
    ("quickreply", "add_quickreply"),
    ("quickreply", "change_quickreply"),
    ("quickreply", "delete_quickreply"),
    ("quickreply", "view_quickreply"),
    ("label", "add_label"),
    ("label", "change_label"),
    ("label", "view_label"),
)


def _permissions(apps, db):
    Permission = apps.get_model("auth", "Permission")
    return [
        permission
        for model, codename in SUPPORT_PERMISSIONS
        for permission in Permission.objects.using(db).filter(
            content_type__app_label="support", content_type__model=model, codename=codename
        )
    ]


def grant_to_support(apps, schema_editor) -> None:
    db = schema_editor.connection.alias
    create_permissions(global_apps.get_app_config("support"), verbosity=0, using=db, apps=apps)
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
        ('conversations', '0018_session_viewer'),
        ('support', '0001_internal_note'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='HistoricalLabel',
            fields=[
                ('id', models.BigIntegerField(auto_created=True, blank=True, db_index=True, verbose_name='ID')),
                ('name', models.CharField(max_length=40, verbose_name='name')),
                ('colour', models.CharField(choices=[('grey', 'grey'), ('red', 'red'), ('orange', 'orange'), ('yellow', 'yellow'), ('green', 'green'), ('teal', 'teal'), ('blue', 'blue'), ('purple', 'purple'), ('pink', 'pink')], default='grey', max_length=16, verbose_name='colour')),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now, verbose_name='created at')),
                ('history_id', models.AutoField(primary_key=True, serialize=False)),
                ('history_date', models.DateTimeField(db_index=True)),
                ('history_change_reason', models.CharField(max_length=100, null=True)),
                ('history_type', models.CharField(choices=[('+', 'Created'), ('~', 'Changed'), ('-', 'Deleted')], max_length=1)),
                ('history_user', models.ForeignKey(null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'verbose_name': 'historical label',
                'verbose_name_plural': 'historical labels',
                'ordering': ('-history_date', '-history_id'),
                'get_latest_by': ('history_date', 'history_id'),
            },
            bases=(simple_history.models.HistoricalChanges, models.Model),
        ),
        migrations.CreateModel(
            name='HistoricalQuickReply',
            fields=[
                ('id', models.BigIntegerField(auto_created=True, blank=True, db_index=True, verbose_name='ID')),
                ('shortcut', models.CharField(help_text='Typed after "/" in the reply box: letters, digits and hyphens.', max_length=30, validators=[django.core.validators.RegexValidator('^[a-z0-9]+(-[a-z0-9]+)*$', 'Use only letters without accents, digits and hyphens between them, e.g. boas-vindas or prazo-2.')], verbose_name='shortcut')),
                ('title', models.CharField(max_length=80, verbose_name='title')),
                ('text', models.TextField(help_text="{{primeiro_nome}} becomes the customer's first name and {{atendente}} yours; the text can still be edited before it is sent.", validators=[django.core.validators.MaxLengthValidator(4096)], verbose_name='text')),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now, verbose_name='created at')),
                ('updated_at', models.DateTimeField(blank=True, editable=False, verbose_name='updated at')),
                ('history_id', models.AutoField(primary_key=True, serialize=False)),
                ('history_date', models.DateTimeField(db_index=True)),
                ('history_change_reason', models.CharField(max_length=100, null=True)),
                ('history_type', models.CharField(choices=[('+', 'Created'), ('~', 'Changed'), ('-', 'Deleted')], max_length=1)),
                ('history_user', models.ForeignKey(null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('owner', models.ForeignKey(blank=True, db_constraint=False, null=True, on_delete=django.db.models.deletion.DO_NOTHING, related_name='+', to=settings.AUTH_USER_MODEL, verbose_name='personal to')),
            ],
            options={
                'verbose_name': 'historical quick reply',
                'verbose_name_plural': 'historical quick replies',
                'ordering': ('-history_date', '-history_id'),
                'get_latest_by': ('history_date', 'history_id'),
            },
            bases=(simple_history.models.HistoricalChanges, models.Model),
        ),
        migrations.CreateModel(
            name='Label',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.CharField(max_length=40, verbose_name='name')),
                ('colour', models.CharField(choices=[('grey', 'grey'), ('red', 'red'), ('orange', 'orange'), ('yellow', 'yellow'), ('green', 'green'), ('teal', 'teal'), ('blue', 'blue'), ('purple', 'purple'), ('pink', 'pink')], default='grey', max_length=16, verbose_name='colour')),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now, verbose_name='created at')),
            ],
            options={
                'verbose_name': 'label',
                'verbose_name_plural': 'labels',
                'ordering': ['name', 'id'],
                'constraints': [models.UniqueConstraint(django.db.models.functions.text.Lower('name'), name='label_name_case_insensitive', violation_error_message='A label with this name exists already.')],
            },
        ),
        migrations.CreateModel(
            name='QuickReply',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('shortcut', models.CharField(help_text='Typed after "/" in the reply box: letters, digits and hyphens.', max_length=30, validators=[django.core.validators.RegexValidator('^[a-z0-9]+(-[a-z0-9]+)*$', 'Use only letters without accents, digits and hyphens between them, e.g. boas-vindas or prazo-2.')], verbose_name='shortcut')),
                ('title', models.CharField(max_length=80, verbose_name='title')),
                ('text', models.TextField(help_text="{{primeiro_nome}} becomes the customer's first name and {{atendente}} yours; the text can still be edited before it is sent.", validators=[django.core.validators.MaxLengthValidator(4096)], verbose_name='text')),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now, verbose_name='created at')),
                ('updated_at', models.DateTimeField(auto_now=True, verbose_name='updated at')),
                ('owner', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='quick_replies', to=settings.AUTH_USER_MODEL, verbose_name='personal to')),
            ],
            options={
                'verbose_name': 'quick reply',
                'verbose_name_plural': 'quick replies',
                'ordering': ['shortcut', 'id'],
                'permissions': [('manage_shared_quickreply', 'Can manage shared quick replies')],
                'constraints': [models.UniqueConstraint(condition=models.Q(('owner__isnull', False)), fields=('owner', 'shortcut'), name='quick_reply_personal_shortcut'), models.UniqueConstraint(condition=models.Q(('owner__isnull', True)), fields=('shortcut',), name='quick_reply_shared_shortcut')],
            },
        ),
        migrations.CreateModel(
            name='SessionLabel',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('added_at', models.DateTimeField(default=django.utils.timezone.now, verbose_name='added at')),
                ('added_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL, verbose_name='added by')),
                ('label', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='sessions', to='support.label', verbose_name='label')),
                ('session', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='labels', to='conversations.session', verbose_name='conversation')),
            ],
            options={
                'verbose_name': 'conversation label',
                'verbose_name_plural': 'conversation labels',
                'constraints': [models.UniqueConstraint(fields=('session', 'label'), name='session_label_once')],
            },
        ),
        migrations.RunPython(grant_to_support, revoke_from_support),
    ]
