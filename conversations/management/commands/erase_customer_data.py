"""`python manage.py erase_customer_data (--phone DIGITS | --user-id BSUID) [--no-input]`:
anonymise everything held about one customer (an LGPD erasure request), open conversations and
the webhook bodies naming them included; aggregates stay. Logged with the operator (the OS
user); from the admin, the staff member is recorded instead
(conversations.privacy.customer_data)."""

import getpass
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from conversations.management.customer_selector_arguments import (
    add_selector_arguments,
    selector_of,
)
from conversations.privacy.customer_data import customer_data_erase, customer_sessions


class Command(BaseCommand):
    help = "Anonymise every conversation of the customer of a phone number or WhatsApp user id."

    def add_arguments(self, parser: CommandParser) -> None:
        add_selector_arguments(parser)
        parser.add_argument("--no-input", action="store_true", help="do not ask for confirmation")

    def handle(self, *args: Any, **options: Any) -> None:
        selector = selector_of(options)
        who = selector.phone or selector.user_id
        found = len(customer_sessions(selector))
        if not found:
            raise CommandError(f"No conversation with {who}.")
        if not options["no_input"]:
            answer = input(f"Anonymise {found} conversation(s) of {who}? Type 'yes': ")
            if answer.strip() != "yes":
                raise CommandError("Nothing erased.")
        report = customer_data_erase(selector, now=timezone.now(), operator=getpass.getuser())
        self.stdout.write(
            f"Anonymised {report.sessions} conversation(s); removed the customer from "
            f"{report.webhook_deliveries} webhook body(ies)."
        )
