"""`python manage.py export_customer_data --phone DIGITS`: everything held about one customer,
as JSON on stdout (an LGPD access request); logged with the operator."""

import getpass
import json
import logging
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from conversations.retention import customer_data_export

logger = logging.getLogger("conversations.retention")


class Command(BaseCommand):
    help = "Print everything held about the customer of a phone number, as JSON."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--phone", required=True, help="E.164 digits, e.g. 5511987654321")

    def handle(self, *args: Any, **options: Any) -> None:
        export = customer_data_export(options["phone"])
        logger.info(
            "customer_data_exported",
            extra={"operator": getpass.getuser(), "sessions": len(export["sessions"])},
        )
        self.stdout.write(json.dumps(export, ensure_ascii=False, indent=2))
