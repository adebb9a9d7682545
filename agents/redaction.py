"""Mask personal data and credentials in free text before it is logged or stored.

`redact(text)` is the one scrubber for text we do not control: provider error messages (OpenAI,
Graph API) before they are stored on `LLMCall.error`, `Message.delivery_error_title` or a SYSTEM
event, other stored exception texts, and every value of every log record
(`config.logging.EventFormatter`). It replaces:

==========================================  ======================  ======================
what                                        e.g.                    becomes
==========================================  ======================  ======================
an OpenAI-style key (``sk-`` + 12 or more)  ``sk-proj-AbC…``        ``sk-[redacted]``
a Meta access token (``EAA`` + 20 or more)  ``EAAGm0PX4ZCps…``      ``EAA[redacted]``
a bearer credential (8 or more characters)  ``Bearer abc.def…``     ``Bearer [redacted]``
an e-mail address                           ``ana@empresa.com``     ``[email]``
a formatted CNPJ, or any 14 digits          ``11.222.333/0001-81``  ``[cnpj]``
a formatted CPF, or any other 11 digits     ``123.456.789-09``      ``[cpf]``
a phone number (see below)                  ``+55 11 98765-4321``   ``[phone]``
==========================================  ======================  ======================

(``Bearer`` in any case.) Numbers are found as candidates — groups of digits joined by one to
three separator characters (space, ``.``, ``-``, ``/``, parentheses), optionally led by ``+``
and/or an area code in parentheses (``(11)``) — that are *not glued* to a word, a dot, a slash
or a dash on the left, nor to a word character on the right, and do not continue as a decimal
(``1.234.567.890,00``). Identifiers such as ``wamid.HBgM…``, ``BR.1349…``, ``msg_551…``, UUIDs
or hex/base64 strings are therefore left alone, at the price that a phone glued to letters
(``tel5511987654321``) is not masked. A candidate is then classified by its digit count:

- the CPF or CNPJ punctuation (``ddd.ddd.ddd-dd``, ``dd.ddd.ddd/dddd-dd``) → ``[cpf]``/``[cnpj]``;
- 14 digits → ``[cnpj]`` (valid check digits or not: a mistyped CNPJ is still personal data);
- led by ``+`` with 10 to 13 digits → ``[phone]`` (E.164, any country);
- written with parentheses and 10 to 13 digits → ``[phone]``;
- 11 digits: a valid CPF → ``[cpf]``; else shaped like a Brazilian mobile (a real DDD, then 9
  and eight digits) → ``[phone]``; else ``[cpf]`` — every 11-digit run may be a CPF;
- 10, 12 or 13 digits shaped like a Brazilian number (optional 55, a real DDD, then a landline
  starting 2-5 or a mobile starting 9) → ``[phone]``;
- anything else (order numbers, dates, times, CEPs, amounts, 15-digit Meta ids) is kept.

Trade-off: a 10-, 12- or 13-digit number that happens to have the shape of a Brazilian phone
(a Unix time such as ``1832000000`` does: DDD 18, then a landline digit) is masked too, and
foreign numbers written without ``+`` are only masked when they have 11 or 14 digits. The
patterns are for *log and error text*, where a lost digit string costs little and a leaked
credential or CPF costs much.

`redact` is idempotent (the masks contain no digits and match no pattern). Pure module: no
Django import.
"""

import re

SECRET_MASK = "[redacted]"
EMAIL_MASK = "[email]"
CPF_MASK = "[cpf]"
CNPJ_MASK = "[cnpj]"
PHONE_MASK = "[phone]"

# Brazilian area codes (DDD) in use (Anatel): a number is phone-shaped only with one of these.
BRAZILIAN_AREA_CODES: frozenset[str] = frozenset(
    str(code)
    for code in (
        *range(11, 20), 21, 22, 24, 27, 28, 31, 32, 33, 34, 35, 37, 38, *range(41, 50),
        51, 53, 54, 55, *range(61, 70), 71, 73, 74, 75, 77, 79, *range(81, 90), *range(91, 100),
    )
)  # fmt: skip

# One alternation, scanned once; at a position the first alternative that matches wins, so
# credentials come before e-mails and e-mails before numbers (their digits are not numbers).
# Each alternative starts only where a run of its characters starts (the lookbehinds): tried
# from every position of a long run, a pattern would rescan the rest of the run (quadratic).
_SENSITIVE = re.compile(
    r"(?P<bearer>\b(?P<scheme>(?i:bearer))\s+[A-Za-z0-9\-._~+/]{8,}=*)"
    r"|(?P<openai_key>(?<![A-Za-z0-9])sk-[A-Za-z0-9_*\-]{12,})"
    r"|(?P<meta_token>(?<![A-Za-z0-9])EAA[A-Za-z0-9]{20,})"
    r"|(?P<email>(?<![A-Za-z0-9._%+\-])[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*"
    r"\.[A-Za-z]{2,}(?![A-Za-z0-9\-]))"
    r"|(?P<number>(?<![\w.+/\-])"  # not the tail of an id, a decimal or a path
    r"(?:\+\s?)?(?:\(\d{2,3}\)\s?)?\d+(?:[ .\-/()]{1,3}\d+)*"
    r"(?!\w|,\d))"  # not glued to a word, not the integer part of a decimal
)
# What every match needs somewhere in the text: most log values (words, short ids) have none.
_HINT = re.compile(r"[\d@]|sk-|EAA|(?i:bearer)")
_CPF_FORMAT = re.compile(r"\d{3}\.\d{3}\.\d{3}-\d{2}")
_CNPJ_FORMAT = re.compile(r"\d{2}\.\d{3}\.\d{3}/\d{4}-\d{2}")
_NON_DIGITS = re.compile(r"\D")


def is_valid_cpf(digits: str) -> bool:
    """The CPF check digits (modulo 11) of an 11-digit string; repeated digits are invalid."""
    if len(digits) != 11 or not (digits.isascii() and digits.isdigit()) or len(set(digits)) == 1:
        return False
    for position in (9, 10):
        total = sum(int(digits[i]) * (position + 1 - i) for i in range(position))
        if (total * 10) % 11 % 10 != int(digits[position]):
            return False
    return True


def is_brazilian_phone(digits: str) -> bool:
    """Digits shaped like a Brazilian number: optional 55, a DDD, a landline or a mobile."""
    if len(digits) in (12, 13) and digits.startswith("55"):
        digits = digits[2:]
    if digits[:2] not in BRAZILIAN_AREA_CODES:
        return False
    subscriber = digits[2:]
    if len(subscriber) == 9:
        return subscriber[0] == "9"
    return len(subscriber) == 8 and subscriber[0] in "2345"


def _number_mask(text: str) -> str:
    if len(text) < 10:  # fewer than 10 digits: nothing to mask (the common id, count, code)
        return text
    if _CNPJ_FORMAT.fullmatch(text):
        return CNPJ_MASK
    if _CPF_FORMAT.fullmatch(text):
        return CPF_MASK
    digits = _NON_DIGITS.sub("", text)
    count = len(digits)
    if count == 14:
        return CNPJ_MASK
    if (text.startswith("+") or "(" in text) and 10 <= count <= 13:
        return PHONE_MASK
    if count == 11:
        if not is_valid_cpf(digits) and is_brazilian_phone(digits):
            return PHONE_MASK
        return CPF_MASK
    if count in (10, 12, 13) and is_brazilian_phone(digits):
        return PHONE_MASK
    return text


def _mask(match: re.Match[str]) -> str:
    kind = match.lastgroup
    if kind == "bearer":
        return f"{match['scheme']} {SECRET_MASK}"
    if kind == "openai_key":
        return f"sk-{SECRET_MASK}"
    if kind == "meta_token":
        return f"EAA{SECRET_MASK}"
    if kind == "email":
        return EMAIL_MASK
    return _number_mask(match.group(0))


def redact(text: str) -> str:
    """`text` with credentials, e-mails, CPF/CNPJ and phone numbers masked (see the table)."""
    if _HINT.search(text) is None:
        return text
    return _SENSITIVE.sub(_mask, text)
