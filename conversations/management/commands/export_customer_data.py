"""`python manage.py export_customer_data (--phone DIGITS | --user-id BSUID)`: everything held
about one customer, as JSON on stdout (an LGPD access request); logged with the operator."""

import getpass
import json
import logging
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from conversations.management.customer_selector_arguments import (
    add_selector_arguments,
    selector_of,
)
from conversations.privacy.customer_data import customer_data_export

logger = logging.getLogger("conversations.privacy.retention")


class Command(BaseCommand):
    help = "Print everything held about the customer of a phone number or user id, as JSON."

    def add_arguments(self, parser: CommandParser) -> None:
        add_selector_arguments(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        export = customer_data_export(selector_of(options))
        logger.info(
            "customer_data_exported",
            extra={"operator": getpass.getuser(), "sessions": len(export["sessions"])},
        )
        self.stdout.write(json.dumps(export, ensure_ascii=False, indent=2))
