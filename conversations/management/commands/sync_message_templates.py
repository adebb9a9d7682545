"""Read the approved WhatsApp message templates of each active instance's WhatsApp Business
Account from Meta (`conversations.message_templates.message_templates_sync`).

    python manage.py sync_message_templates                 # every active instance
    python manage.py sync_message_templates --instance Lab  # one instance, by its name

Safe to run at any time: templates Meta no longer approves are deactivated, never deleted.
Exits with status 1 when an account could not be read (its templates were left as they were).
"""

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone
from django.utils.translation import ngettext

from conversations.message_templates import TemplateSyncRefused, message_templates_sync


class Command(BaseCommand):
    help = "Sync the approved WhatsApp message templates from Meta (WhatsApp Business Accounts)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--instance", default="", help="only the instance with this name")

    def handle(self, *args: Any, instance: str, **options: Any) -> None:
        try:
            report = message_templates_sync(now=timezone.now(), instance_name=instance)
        except TemplateSyncRefused as refused:
            raise CommandError(refused.message) from None
        for message in report.messages():
            if message.level == "error":
                self.stderr.write(message.text)
            else:
                self.stdout.write(message.text)
        if report.failed:
            count = len(report.failed)
            raise CommandError(
                ngettext(
                    "%(n)d WhatsApp Business Account could not be read.",
                    "%(n)d WhatsApp Business Accounts could not be read.",
                    count,
                )
                % {"n": count}
            )
