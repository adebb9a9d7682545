from django.conf import settings
from django.db import migrations, models

from agents.phones import customer_phone_key

BATCH = 1_000


def fill_phone_keys(apps, schema_editor) -> None:
    """Every session with a phone gets its key (a Brazilian mobile's with the ninth digit)."""
    Session = apps.get_model("conversations", "Session")
    sessions = Session.objects.exclude(customer_phone="").only("id", "customer_phone")
    batch = []
    for session in sessions.iterator(chunk_size=BATCH):
        session.customer_phone_key = customer_phone_key(session.customer_phone)
        batch.append(session)
        if len(batch) == BATCH:
            Session.objects.bulk_update(batch, ["customer_phone_key"])
            batch = []
    if batch:
        Session.objects.bulk_update(batch, ["customer_phone_key"])


class Migration(migrations.Migration):

    dependencies = [
        ('conversations', '0022_media_reading_reasons'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name='session',
            name='customer_phone_key',
            field=models.CharField(blank=True, editable=False, max_length=20, verbose_name='customer phone key'),
        ),
        migrations.RemoveIndex(
            model_name='session',
            name='session_phone',
        ),
        migrations.AddIndex(
            model_name='session',
            index=models.Index(fields=['instance', 'customer_phone_key', '-created_at'], name='session_phone_key'),
        ),
        # After the schema changes: PostgreSQL refuses them on a table with pending trigger events.
        migrations.RunPython(fill_phone_keys, migrations.RunPython.noop, elidable=True),
    ]
