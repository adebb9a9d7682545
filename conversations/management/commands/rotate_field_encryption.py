"""Re-encrypt the secrets stored in the database with the first key of FIELD_ENCRYPTION_KEYS.

    FIELD_ENCRYPTION_KEYS=<new>,<old> python manage.py rotate_field_encryption

Rotation: put the new key first (keeping the old one after it), restart, run this, then remove
the old key. Safe to run more than once. A value that no configured key decrypts is named and
left unchanged, and the command exits with an error.
"""

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from conversations.privacy.encryption import encrypted_fields_rotate


class Command(BaseCommand):
    help = "Re-encrypt stored secrets (access tokens) with the first FIELD_ENCRYPTION_KEYS key."

    def handle(self, *args: Any, **options: Any) -> None:
        report = encrypted_fields_rotate()
        self.stdout.write(
            f"Re-encrypted {report.rotated} value(s) with the first key of FIELD_ENCRYPTION_KEYS."
        )
        if report.undecryptable:
            raise CommandError(
                f"{len(report.undecryptable)} value(s) could not be decrypted with any configured "
                f"key and were left unchanged: {', '.join(report.undecryptable)}. Add back the "
                "key that encrypted them (after the first one), or store those values again."
            )
