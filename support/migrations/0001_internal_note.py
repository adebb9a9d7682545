import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('conversations', '0018_session_viewer'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='InternalNote',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('text', models.TextField(verbose_name='text')),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now, verbose_name='created at')),
                ('author', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL, verbose_name='author')),
                ('session', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='internal_notes', to='conversations.session', verbose_name='conversation')),
            ],
            options={
                'verbose_name': 'internal note',
                'verbose_name_plural': 'internal notes',
            },
        ),
        migrations.CreateModel(
            name='NoteMention',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('emailed_at', models.DateTimeField(blank=True, null=True, verbose_name='e-mailed at')),
                ('seen_at', models.DateTimeField(blank=True, null=True, verbose_name='seen at')),
                ('note', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='mentions', to='support.internalnote', verbose_name='internal note')),
                ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to=settings.AUTH_USER_MODEL, verbose_name='staff member')),
            ],
            options={
                'verbose_name': 'note mention',
                'verbose_name_plural': 'note mentions',
            },
        ),
        migrations.AddField(
            model_name='internalnote',
            name='mentioned_users',
            field=models.ManyToManyField(related_name='+', through='support.NoteMention', to=settings.AUTH_USER_MODEL, verbose_name='mentioned staff members'),
        ),
        migrations.AddIndex(
            model_name='internalnote',
            index=models.Index(fields=['session', 'id'], name='internal_note_session_order'),
        ),
        migrations.AddConstraint(
            model_name='notemention',
            constraint=models.UniqueConstraint(fields=('note', 'user'), name='note_mention_once'),
        ),
        migrations.AddIndex(
            model_name='notemention',
            index=models.Index(condition=models.Q(('seen_at__isnull', True)), fields=['user'], name='note_mention_pending'),
        ),
    ]
