"""Indexes for the admin: recent webhook deliveries, and message-text search on PostgreSQL.

The admin searches message text with `content__icontains`, which PostgreSQL runs as
`UPPER(content::text) LIKE UPPER('%term%')`. A trigram GIN index on exactly that expression lets
it answer from the index instead of reading every message. `pg_trgm` is a trusted extension
(PostgreSQL 13+), so the database owner can create it. SQLite gets no such index; the search
still works there, by scanning.
"""

from django.db import migrations, models

TRGM_INDEX = "message_content_trgm"


def create_trigram_index(apps, schema_editor) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    schema_editor.execute(
        f"CREATE INDEX IF NOT EXISTS {TRGM_INDEX} ON conversations_message "
        "USING gin ((UPPER(content::text)) gin_trgm_ops)"
    )


def drop_trigram_index(apps, schema_editor) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(f"DROP INDEX IF EXISTS {TRGM_INDEX}")


class Migration(migrations.Migration):
    dependencies = [
        ("conversations", "0002_staff_groups"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="webhookdelivery",
            index=models.Index(fields=["-received_at", "-id"], name="webhook_recent"),
        ),
        migrations.RunPython(create_trigram_index, drop_trigram_index),
    ]
