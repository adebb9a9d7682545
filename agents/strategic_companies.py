"""Which active strategic company a customer belongs to, decided in code (never by the model).

The list of strategic companies is confidential: it is never put in a prompt (a customer can ask
the model to repeat its instructions). A customer belongs to a company when any of these holds:

- the session's WhatsApp phone is one of the company's phones;
- a CNPJ of the company is the session's collected document, or is written in the customer's text
  (with or without its punctuation);
- the company's name is mentioned in the customer's text or is the collected `empresa` field.

Names are compared as words: case, accents and punctuation do not count, legal suffixes at the
end of the registered name (Ltda, S.A., S/A, SA, ME, EPP, EIRELI, LTDA-ME, ...) are dropped, and
the name must appear as whole words ("Alfa" is found in "sou da alfa." but not in "alfabeto").
A name that is only a suffix ("ME Ltda") or shorter than two characters is never matched by
text. A false match costs a human
handoff, a missed one leaks the company to the bot, so the rule leans to matching.
Pure module.
"""

import re
import unicodedata
from collections.abc import Iterable, Sequence
from functools import lru_cache

from agents.sources import StrategicCompanyInfo

# Legal-form suffixes, as word sequences after normalisation ("S.A." -> "s a", "LTDA-ME" ->
# "ltda me"); dropped from the end of a registered name, repeatedly, longest first.
LEGAL_SUFFIXES: tuple[tuple[str, ...], ...] = tuple(
    sorted(
        (
            ("ltda",),
            ("limitada",),
            ("sa",),
            ("s", "a"),
            ("me",),
            ("mei",),
            ("epp",),
            ("eireli",),
            ("ss",),
            ("s", "s"),
            ("cia",),
            ("e", "cia"),
        ),
        key=len,
        reverse=True,
    )
)

# A shorter name ("A", "X Ltda") would match ordinary words.
MIN_NAME_CHARS = 2

_WORD = re.compile(r"[0-9a-z]+")
# 14 digits as a CNPJ is written: 11222333000181, 11.222.333/0001-81, with spaces too.
_CNPJ = re.compile(r"(?<!\d)\d{2}[. ]?\d{3}[. ]?\d{3}[/ ]?\d{4}[- ]?\d{2}(?!\d)")


def words(text: str) -> tuple[str, ...]:
    """The words of a text: accents removed, case folded, "&" read as "e", the rest separators."""
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    plain = "".join(c for c in decomposed if not unicodedata.combining(c)).replace("&", " e ")
    return tuple(_WORD.findall(plain))


@lru_cache(maxsize=1024)
def company_name_key(name: str) -> str:
    """A registered name as the words to look for, legal suffixes dropped ("" if none is left)."""
    parts = list(words(name))
    changed = True
    while changed:
        changed = False
        for suffix in LEGAL_SUFFIXES:
            if len(parts) > len(suffix) and tuple(parts[-len(suffix) :]) == suffix:
                del parts[-len(suffix) :]
                changed = True
                break
    key = " ".join(parts)
    if tuple(parts) in LEGAL_SUFFIXES or len(key) < MIN_NAME_CHARS:
        return ""
    return key


def mentions_company(text: str, name: str) -> bool:
    """Whether `text` names the company `name` as whole words (see the module docstring)."""
    key = company_name_key(name)
    return bool(key) and f" {key} " in f" {' '.join(words(text))} "


def cnpjs_in(text: str) -> set[str]:
    """The 14-digit CNPJs written in a text, as digits."""
    return {_digits(found) for found in _CNPJ.findall(text)}


def _digits(text: str) -> str:
    return re.sub(r"\D", "", text)


def strategic_company_match(
    companies: Iterable[StrategicCompanyInfo],
    *,
    phone: str = "",
    document: str = "",
    texts: Sequence[str] = (),
) -> StrategicCompanyInfo | None:
    """The first company (in the given order) the customer belongs to, or None.

    `phone` and `document` are digits (the session's phone, the collected CPF/CNPJ); `texts` are
    what the customer wrote this turn and the collected `empresa`, searched for a company's
    CNPJ and name.
    """
    written = " \n ".join(t for t in texts if t)
    text_words = f" {' '.join(words(written))} " if written else ""
    documents = cnpjs_in(written) if written else set()
    if document:
        documents.add(_digits(document))
    for company in companies:
        if phone and phone in company.phones:
            return company
        if company.cnpj and _digits(company.cnpj) in documents:
            return company
        key = company_name_key(company.name) if text_words else ""
        if key and f" {key} " in text_words:
            return company
    return None
