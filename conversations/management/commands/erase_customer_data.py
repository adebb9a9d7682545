"""`python manage.py erase_customer_data --phone DIGITS [--no-input]`: anonymise everything held
about one customer (an LGPD erasure request), open conversations included; aggregates stay.
Logged with the operator."""

import getpass
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from conversations.retention import customer_data_erase, customer_sessions


class Command(BaseCommand):
    help = "Anonymise every conversation of the customer of a phone number."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--phone", required=True, help="E.164 digits, e.g. 5511987654321")
        parser.add_argument("--no-input", action="store_true", help="do not ask for confirmation")

    def handle(self, *args: Any, **options: Any) -> None:
        phone = options["phone"]
        found = len(customer_sessions(phone))
        if not found:
            raise CommandError(f"No conversation with the phone {phone}.")
        if not options["no_input"]:
            answer = input(f"Anonymise {found} conversation(s) of {phone}? Type 'yes': ")
            if answer.strip() != "yes":
                raise CommandError("Nothing erased.")
        erased = customer_data_erase(phone, now=timezone.now(), operator=getpass.getuser())
        self.stdout.write(f"Anonymised {erased} conversation(s).")
