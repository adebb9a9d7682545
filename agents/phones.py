"""The one phone parser: a number as people write it → E.164.

Every place that reads a phone typed by a person uses `parse_phone`: the ``telefone`` the model
collects (`agents.fields.normalise_phone`), the strategic companies' phone lines (their admin
validator and the list the rule matches against, `prompts_admin`). Brazil is the region when no
country code is given. WhatsApp's own ids (``wa_id``) are E.164 digits already and are only
checked for shape by the webhook's parser. Pure module: no Django import.

A Brazilian mobile number reaches the webhook with or without its ninth digit (``5511987654321``
and ``551187654321`` are one customer: WhatsApp accounts made before the digit was added keep
the old form). `customer_phone_key` is the form sessions are matched by, the ninth digit added;
`phone_forms` both forms, for looking a customer up wherever a phone was written.
"""

from functools import lru_cache

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


BRAZIL_PREFIX = "55"
# 55 + area code (2) + the 8 digits a mobile had before the ninth: 12 digits, the first of the
# subscriber's 6 to 9 (2 to 5 were and are landlines, which never got the ninth digit).
_BR_WITHOUT_NINTH = 12
_OLD_MOBILE_FIRST = frozenset("6789")
NINTH_DIGIT = "9"


@lru_cache(maxsize=65_536)
def customer_phone_key(digits: str) -> str:
    """The phone a customer is matched by: a Brazilian mobile without its ninth digit gets it
    (when the result is a mobile number of the Brazilian plan), anything else as it is. Cached:
    the webhook asks for each message's sender."""
    if (
        len(digits) == _BR_WITHOUT_NINTH
        and digits.startswith(BRAZIL_PREFIX)
        and digits[4] in _OLD_MOBILE_FIRST
    ):
        with_ninth = digits[:4] + NINTH_DIGIT + digits[4:]
        number = phonenumbers.parse(f"+{with_ninth}")
        if phonenumbers.number_type(number) == phonenumbers.PhoneNumberType.MOBILE:
            return with_ninth
    return digits


def phone_forms(digits: str) -> frozenset[str]:
    """Every form of the customer's phone WhatsApp may use: `digits`, with the ninth digit and
    without it for a Brazilian mobile; just `digits` for any other."""
    if not digits:
        return frozenset()
    key = customer_phone_key(digits)
    forms = {digits, key}
    without = key[:4] + key[5:]
    if key[4:5] == NINTH_DIGIT and customer_phone_key(without) == key:
        forms.add(without)
    return frozenset(forms)
