"""Masking of personal data for display (LGPD): names, phones, CPF/CNPJ and e-mails.

Staff who may read conversations but not who said them (the prompt editors) see every admin page
with these masked. Two layers, applied to any text:

- the session's **known values** — its customer's name (whole and word by word), phone, user id,
  document and the personal values of its registration data — matched case- and accent-
  insensitively on word boundaries, so a name typed in a message or repeated by the model is
  masked too, whatever pattern it has;
- **patterns** — any e-mail, CNPJ, CPF or phone-like number, whoever it belongs to.

Masks keep the shape and drop the content: a digit becomes ``*`` (punctuation kept:
``***.***.***-**``), an e-mail ``***@***``, a name keeps the first letter of each word
(``M*** S***``), an identifier becomes ``***``. The number patterns err on the side of hiding:
any run of 8 to 15 digits that may be a phone is masked (a Unix timestamp too); dates, times,
money and postal codes are not.

This is for what a person reads on a page. Log redaction is another module's job. Pure module:
no Django import.
"""

import re
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

Kind = Literal["name", "number", "email", "identifier"]

MASK = "***"
EMAIL_MASK = "***@***"

# Keys whose values are personal data wherever they appear in JSON (registration data, context
# snapshots, summaries, leads, model answers, webhook bodies) and how each is masked.
PERSONAL_KEYS: Mapping[str, Kind] = {
    "nome": "name",
    "nome_completo": "name",
    "responsavel": "name",
    "contato": "name",
    "solicitante": "name",
    "empresa": "name",
    "customer_name": "name",
    "razao_social": "name",
    "email": "email",
    "e-mail": "email",
    "customer_email": "email",
    "documento": "number",
    "cpf": "number",
    "cnpj": "number",
    "customer_document": "number",
    "telefone": "number",
    "celular": "number",
    "phone": "number",
    "customer_phone": "number",
    "wa_id": "number",
    "recipient_id": "number",
    "customer_user_id": "identifier",
    "user_id": "identifier",
}

# Company names are masked as names where a key says so, but found in texts only whole: "Água
# Limpa Ltda" must not hide every "água" of a water lab's conversations.
COMPANY_KEYS = frozenset({"empresa", "razao_social"})
# Name words this short or this common are not matched on their own (the whole name still is).
_MIN_NAME_WORD = 3
_NAME_PARTICLES = frozenset({"da", "das", "de", "do", "dos", "del", "della", "van", "von"})
# Shorter identifiers would match inside ordinary text.
_MIN_IDENTIFIER = 4
_MIN_KNOWN_DIGITS = 8

_EMAIL_RE = re.compile(r"[\w.+'-]+@[\w-]+(?:\.[\w-]+)+")
_CNPJ_RE = re.compile(r"(?<!\d)\d{2}[.\s]?\d{3}[.\s]?\d{3}[/\s]?\d{4}[-\s]?\d{2}(?!\d)")
_CPF_RE = re.compile(r"(?<!\d)\d{3}[.\s]?\d{3}[.\s]?\d{3}[-.\s]?\d{2}(?!\d)")
_PHONE_RE = re.compile(
    # +55 (11) 91234-5678, 11 91234 5678, 91234-5678, 3234-5678, 5511912345678 ...
    r"(?<![\w+])(?:\+?\d{1,3}[\s.-]?)?(?:\(?\d{2}\)?[\s.-]?)?\d{4,5}[\s.-]?\d{4}(?!\w)"
    # ... and any other E.164 number, digits only.
    r"|(?<![\w+])\+?\d{10,15}(?!\w)"
)
_DIGIT_RE = re.compile(r"\d")
_LETTERS_RE = re.compile(r"[^\W\d_]+")
# A word and the mask already after it: masking a masked name changes nothing.
_MASKABLE_WORD_RE = re.compile(r"[^\W\d_]+\**")
# Between the digits of a known number as people type it: "+55 (11) 91234-5678".
_NUMBER_SEPARATORS = r"[\s().+/-]*"
_ACCENTED = {
    "a": "aáàâãä",
    "e": "eéèêë",
    "i": "iíìîï",
    "o": "oóòôõö",
    "u": "uúùûü",
    "c": "cç",
    "n": "nñ",
}


def mask_digits(text: str) -> str:
    """Every digit replaced by ``*``; punctuation and letters kept: ``+** (**) *****-****``."""
    return _DIGIT_RE.sub("*", text)


def mask_name(text: str) -> str:
    """The first letter of each word kept: ``Maria Souza`` -> ``M*** S***``; digits masked."""
    return mask_digits(_MASKABLE_WORD_RE.sub(lambda m: m.group(0)[0] + MASK, text))


def mask_as(kind: Kind, value: str) -> str:
    """`value`, known to be personal data of `kind`, masked whole; empty stays empty."""
    if not value:
        return value
    if kind == "name":
        return mask_name(value)
    if kind == "number":
        return mask_digits(value)
    if kind == "email":
        return EMAIL_MASK
    return MASK


@dataclass(frozen=True, slots=True)
class KnownValues:
    """One session's personal values, to find wherever they are written."""

    names: tuple[str, ...] = ()  # matched whole and word by word
    companies: tuple[str, ...] = ()  # matched whole only: their words are ordinary words
    numbers: tuple[str, ...] = ()
    emails: tuple[str, ...] = ()
    identifiers: tuple[str, ...] = ()


def known_values(
    *,
    customer_name: str = "",
    customer_phone: str = "",
    customer_user_id: str = "",
    customer_document: str = "",
    data: Iterable[Mapping[str, Any]] = (),
) -> KnownValues:
    """A session's known values: its customer fields and the personal keys of `data` (its
    registration data and extras)."""
    companies: list[str] = []
    found: dict[Kind, list[str]] = {
        "name": [customer_name],
        "number": [customer_phone, customer_document],
        "email": [],
        "identifier": [customer_user_id],
    }
    for mapping in data:
        for key, value in mapping.items():
            key = str(key).lower()
            kind = PERSONAL_KEYS.get(key)
            if kind is None or not isinstance(value, str | int) or isinstance(value, bool):
                continue
            (companies if key in COMPANY_KEYS else found[kind]).append(str(value))

    def clean(values: list[str]) -> tuple[str, ...]:
        return tuple(dict.fromkeys(v.strip() for v in values if v and v.strip()))

    return KnownValues(
        names=clean(found["name"]),
        companies=clean(companies),
        numbers=clean(found["number"]),
        emails=clean(found["email"]),
        identifiers=clean(found["identifier"]),
    )


def _fold(char: str) -> str:
    return unicodedata.normalize("NFKD", char)[0].lower()


def _loose_letters(text: str) -> str:
    """A pattern matching `text` whatever its accents (re.IGNORECASE handles the case)."""
    parts = []
    for char in text:
        base = _fold(char)
        if base in _ACCENTED:
            parts.append(f"[{_ACCENTED[base]}]")
        elif char.isspace():
            parts.append(r"\s+")
        else:
            parts.append(re.escape(char))
    return "".join(parts)


def _word(pattern: str) -> str:
    return rf"(?<!\w){pattern}(?!\w)"


def _number_pattern(digits: str) -> str:
    return r"(?<!\d)" + _NUMBER_SEPARATORS.join(digits) + r"(?!\d)"


def _number_variants(value: str) -> list[str]:
    """The number as stored and as people write it: without the country code, without the
    area code."""
    digits = re.sub(r"\D", "", value)
    variants = [digits]
    if digits.startswith("55") and len(digits) in (12, 13):
        variants += [digits[2:], digits[4:]]
    return [d for d in variants if len(d) >= _MIN_KNOWN_DIGITS]


def _alternation(patterns: Iterable[str]) -> re.Pattern[str] | None:
    unique = sorted(set(patterns), key=len, reverse=True)  # longest first: the whole name wins
    if not unique:
        return None
    return re.compile("|".join(unique), re.IGNORECASE)


def _digits_of(text: str) -> str:
    return re.sub(r"\D", "", text)


class Masker:
    """Masks one session's personal data (and anyone's, by pattern) in texts and JSON values.

    Build one per session and reuse it for all of that session's rows: the patterns are compiled
    once. `keep_numbers` are numbers that are not personal data (the company's own phone) and
    stay readable. `patterns=False` masks the known values only: for a text that also holds the
    company's own data (a final prompt quoting the knowledge base).
    """

    __slots__ = ("_emails", "_identifiers", "_keep", "_names", "_numbers", "_patterns")

    def __init__(
        self,
        known: KnownValues | None = None,
        *,
        keep_numbers: Iterable[str] = (),
        patterns: bool = True,
    ) -> None:
        known = known or KnownValues()
        self._patterns = patterns
        self._keep = frozenset(d for n in keep_numbers for d in _number_variants(n))
        self._emails = _alternation(_word(re.escape(e)) for e in known.emails)
        self._identifiers = _alternation(
            _word(re.escape(i)) for i in known.identifiers if len(i) >= _MIN_IDENTIFIER
        )
        self._numbers = _alternation(
            _number_pattern(d) for n in known.numbers for d in _number_variants(n)
        )
        words = [
            w
            for name in known.names
            for w in _LETTERS_RE.findall(name)
            if len(w) >= _MIN_NAME_WORD and w.lower() not in _NAME_PARTICLES
        ]
        self._names = _alternation(
            _word(_loose_letters(v)) for v in [*known.names, *known.companies, *words]
        )

    def text(self, text: str) -> str:
        """`text` with known values and anything shaped like personal data masked."""
        if not text:
            return text
        # Most texts hold no e-mail and many no digit: skip those passes (a transcript page
        # masks hundreds of messages).
        has_at = "@" in text
        has_digit = _DIGIT_RE.search(text) is not None
        if has_at and self._patterns:
            text = _EMAIL_RE.sub(EMAIL_MASK, text)
        if has_at and self._emails is not None:
            text = self._emails.sub(EMAIL_MASK, text)
        if self._identifiers is not None:
            text = self._identifiers.sub(MASK, text)
        if has_digit and self._numbers is not None:
            text = self._numbers.sub(self._number, text)
        if self._names is not None:
            text = self._names.sub(lambda m: mask_name(m.group(0)), text)
        if has_digit and self._patterns:
            for pattern in (_CNPJ_RE, _CPF_RE, _PHONE_RE):
                text = pattern.sub(self._number, text)
        return text

    def value(self, value: Any, key: str | None = None) -> Any:
        """A JSON value masked: values under a personal key by their kind, other texts by
        `text`, recursively; keys, numbers outside personal keys and booleans unchanged."""
        kind = PERSONAL_KEYS.get(key.lower()) if key is not None else None
        if isinstance(value, Mapping):
            return {k: self.value(v, str(k)) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.value(v, key) for v in value]
        if isinstance(value, bool) or value is None:
            return value
        if kind is not None and isinstance(value, str | int | float):
            return mask_as(kind, str(value))
        if isinstance(value, str):
            return self.text(value)
        return value

    def known_only(self) -> "Masker":
        """The same known values, without the patterns."""
        twin = Masker(patterns=False)
        for name in ("_emails", "_identifiers", "_keep", "_names", "_numbers"):
            setattr(twin, name, getattr(self, name))
        return twin

    def field(self, name: str, value: str) -> str:
        """A text column named `name`: by its kind when the name is a personal key."""
        kind = PERSONAL_KEYS.get(name)
        return mask_as(kind, value) if kind is not None else self.text(value)

    def _number(self, match: re.Match[str]) -> str:
        found = match.group(0)
        return found if _digits_of(found) in self._keep else mask_digits(found)


PATTERNS_ONLY = Masker()
"""For rows tied to no session (status events, webhook bodies before their values are known)."""


def contains_personal_data(text: str) -> bool:
    """Whether `text` holds something shaped like personal data (e-mail, CPF, CNPJ, phone)."""
    return PATTERNS_ONLY.text(text) != text
