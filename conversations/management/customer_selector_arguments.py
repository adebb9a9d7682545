"""The `--phone` / `--user-id` arguments of the export and erase commands."""

from typing import Any

from django.core.management.base import CommandError, CommandParser

from conversations.privacy.customer_data import CustomerSelector, InvalidSelector, customer_selector


def add_selector_arguments(parser: CommandParser) -> None:
    who = parser.add_mutually_exclusive_group(required=True)
    who.add_argument("--phone", help="E.164 digits, e.g. 5511987654321")
    who.add_argument("--user-id", help="the customer's WhatsApp user id (BSUID)")


def selector_of(options: dict[str, Any]) -> CustomerSelector:
    """The selector of the parsed options; an empty or malformed one stops the command."""
    try:
        return customer_selector(phone=options["phone"] or "", user_id=options["user_id"] or "")
    except InvalidSelector as error:
        raise CommandError(error.message) from None
