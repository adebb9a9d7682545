"""The one phone parser: a number as people write it → E.164.

Every place that reads a phone typed by a person uses `parse_phone`: the ``telefone`` the model
collects (`agents.fields.normalise_phone`), the strategic companies' phone lines (their admin
validator and the list the rule matches against, `prompts_admin`). Brazil is the region when no
country code is given. WhatsApp's own ids (``wa_id``) are E.164 digits already and are only
checked for shape by the webhook's parser. Pure module: no Django import.
"""

import phonenumbers

DEFAULT_REGION = "BR"


class PhoneError(ValueError):
    """`text` is not a phone number: `parsed` is False when it does not even look like one,
    True when it does but no such number exists in the numbering plan."""

    def __init__(self, text: str, *, parsed: bool) -> None:
        super().__init__(text)
        self.parsed = parsed


def parse_phone(text: str) -> str:
    """`text` as E.164 (``+5511912345678``); raises `PhoneError`."""
    try:
        number = phonenumbers.parse(text.strip(), DEFAULT_REGION)
    except phonenumbers.NumberParseException as exc:
        raise PhoneError(text, parsed=False) from exc
    if not phonenumbers.is_valid_number(number):
        raise PhoneError(text, parsed=True)
    return phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.E164)


def phone_digits(text: str) -> str | None:
    """`text` as E.164 digits without the ``+`` (as sessions store phones), None when invalid."""
    try:
        return parse_phone(text).lstrip("+")
    except PhoneError:
        return None


def format_phone(digits: str) -> str:
    """E.164 digits (``5511912345678``) as people read them (``+55 11 91234-5678``); anything
    that is not a valid number — a masked one (``*************``) — as ``+`` and the value."""
    try:
        number = phonenumbers.parse(f"+{digits}")
    except phonenumbers.NumberParseException:
        return f"+{digits}"
    if not phonenumbers.is_valid_number(number):
        return f"+{digits}"
    return phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.INTERNATIONAL)
