"""A customer's export and erasure requests from the admin: the permission
`conversations.erase_customer_data` (no group gets it; superusers have every permission), and the
admin log's entries about conversations named by the conversation's id ("Conversa #12") instead
of the customer's name, which every staff member read in "Ações recentes"."""

from django.conf import settings
from django.db import migrations
from django.db.models import CharField, Value
from django.db.models.functions import Concat
from django.utils import translation


def _session_entries(apps, db):
    ContentType = apps.get_model("contenttypes", "ContentType")
    LogEntry = apps.get_model("admin", "LogEntry")
    content_type = (
        ContentType.objects.using(db).filter(app_label="conversations", model="session").first()
    )
    if content_type is None:
        return LogEntry.objects.none()
    return LogEntry.objects.using(db).filter(content_type=content_type)


def name_sessions_by_id(apps, schema_editor) -> None:
    # The text `Session.__str__` writes, in the site's language.
    with translation.override(settings.LANGUAGE_CODE):
        before, _id, after = translation.gettext("Conversation #%(id)s").partition("%(id)s")
    _session_entries(apps, schema_editor.connection.alias).update(
        object_repr=Concat(Value(before), "object_id", Value(after), output_field=CharField())
    )


class Migration(migrations.Migration):
    dependencies = [
        ("conversations", "0015_simulated_turn"),
        ("admin", "0003_logentry_add_action_flag_choices"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [
        migrations.AlterModelOptions(
            name="session",
            options={
                "ordering": ["-last_message_at", "-id"],
                "permissions": [
                    ("view_personal_data", "Can view customers' personal data"),
                    ("attend_session", "Can attend conversations"),
                    ("erase_customer_data", "Can export and erase a customer's personal data"),
                ],
                "verbose_name": "conversation",
                "verbose_name_plural": "conversations",
            },
        ),
        # The names are gone for good: reversing leaves the ids.
        migrations.RunPython(name_sessions_by_id, migrations.RunPython.noop),
    ]
