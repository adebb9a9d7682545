"""The `cadastro` (registration) fields: normalisation and validation (DESIGN.md §7).

`normalise_registration(raw)` takes what the `coleta` agent sent under `cadastro` and splits it
into valid normalised values, values that failed validation (with a pt-BR reason staff can read)
and keys the registration does not know (kept visible as extras, never silently in the data).
`missing_for_confirmation(data)` lists what code 4 still needs.

Rules:
- ``nome``, ``empresa``, ``cidade``: text, surrounding and repeated whitespace removed.
- ``email``: syntax only (no DNS); the domain is lower-cased, the local part kept as written.
- ``documento``: a CPF (11 digits) or a CNPJ (14 digits) whose check digits validate-docbr
  accepts; punctuation is tolerated and only the digits are stored. The alphanumeric CNPJ is not
  accepted yet (`Session.customer_document` stores digits).
- ``uf``: one of the 27 federative units, by abbreviation or by name, stored as the abbreviation.
- ``telefone``: a valid number for `agents.phones.parse_phone` (Brazil when no country code is
  given), stored in E.164 (``+5511912345678``).
- An empty value (``None`` or blank text) means "not given" and is skipped, not an error.

Pure module: no Django import.
"""

import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from validate_docbr import CNPJ, CPF

from agents.phones import PhoneError, parse_phone

REGISTRATION_FIELDS: tuple[str, ...] = (
    "nome",
    "email",
    "documento",
    "empresa",
    "cidade",
    "uf",
    "telefone",
)
MAX_TEXT_CHARS = 200

UF_NAMES: dict[str, str] = {
    "AC": "Acre",
    "AL": "Alagoas",
    "AP": "Amapá",
    "AM": "Amazonas",
    "BA": "Bahia",
    "CE": "Ceará",
    "DF": "Distrito Federal",
    "ES": "Espírito Santo",
    "GO": "Goiás",
    "MA": "Maranhão",
    "MT": "Mato Grosso",
    "MS": "Mato Grosso do Sul",
    "MG": "Minas Gerais",
    "PA": "Pará",
    "PB": "Paraíba",
    "PR": "Paraná",
    "PE": "Pernambuco",
    "PI": "Piauí",
    "RJ": "Rio de Janeiro",
    "RN": "Rio Grande do Norte",
    "RS": "Rio Grande do Sul",
    "RO": "Rondônia",
    "RR": "Roraima",
    "SC": "Santa Catarina",
    "SP": "São Paulo",
    "SE": "Sergipe",
    "TO": "Tocantins",
}
UFS: frozenset[str] = frozenset(UF_NAMES)

DocumentKind = Literal["cpf", "cnpj"]

# Syntax of an address as people type it: a dot-atom local part and a dotted domain whose last
# label is alphabetic. Quoted local parts and IP-literal domains are refused on purpose.
_EMAIL_RE = re.compile(
    r"^(?P<local>[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*)"
    r"@(?P<domain>(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,63})$"
)
_DOCUMENT_PUNCTUATION = re.compile(r"[\s./-]")


class FieldValueError(ValueError):
    """A value that does not fit its field; the message is pt-BR, shown to staff.

    The message names the field and the rule, never the value: it is logged and stored (handoff
    detail, `data_rejected` event), and the value is a customer's CPF, e-mail or phone.
    """


@dataclass(frozen=True, slots=True)
class InvalidValue:
    value: Any
    error: str


@dataclass(frozen=True, slots=True)
class RegistrationResult:
    data: dict[str, str] = field(default_factory=dict)
    # Field -> the value as sent and why it was refused.
    invalid: dict[str, InvalidValue] = field(default_factory=dict)
    extras: dict[str, Any] = field(default_factory=dict)


def _text(value: Any, label: str) -> str:
    if not isinstance(value, str):
        raise FieldValueError(f"{label} deve ser um texto")
    text = " ".join(str(value).split())
    if len(text) > MAX_TEXT_CHARS:
        raise FieldValueError(f"{label} tem mais de {MAX_TEXT_CHARS} caracteres")
    return text


def normalise_name(value: Any) -> str:
    return _text(value, "nome")


def normalise_company(value: Any) -> str:
    return _text(value, "empresa")


def normalise_city(value: Any) -> str:
    return _text(value, "cidade")


def normalise_email(value: Any) -> str:
    if not isinstance(value, str):
        raise FieldValueError("email deve ser um texto")
    text = value.strip()
    match = _EMAIL_RE.match(text)
    if match is None or len(text) > 254 or len(match["local"]) > 64:
        raise FieldValueError("email inválido: não tem a forma nome@domínio")
    return f"{match['local']}@{match['domain'].lower()}"


def document_kind(digits: str) -> DocumentKind | None:
    """`cpf` or `cnpj` for a stored (digits-only, valid) document; None otherwise."""
    if len(digits) == 11 and digits.isascii() and digits.isdigit():
        return "cpf"
    if len(digits) == 14 and digits.isascii() and digits.isdigit():
        return "cnpj"
    return None


def normalise_document(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise FieldValueError("documento deve ser um texto com o CPF ou o CNPJ")
    digits = _DOCUMENT_PUNCTUATION.sub("", str(value))
    if not (digits.isascii() and digits.isdigit()):
        raise FieldValueError("documento deve ter apenas números")
    kind = document_kind(digits)
    # validate-docbr pads a short CPF with zeros; the length is checked here first.
    if kind == "cpf":
        if not CPF().validate(digits):
            raise FieldValueError("documento: CPF inválido (dígitos verificadores)")
    elif kind == "cnpj":
        if not CNPJ().validate(digits):
            raise FieldValueError("documento: CNPJ inválido (dígitos verificadores)")
    else:
        raise FieldValueError("documento deve ter 11 dígitos (CPF) ou 14 dígitos (CNPJ)")
    return digits


def _fold(text: str) -> str:
    decomposed = unicodedata.normalize("NFKD", text)
    return " ".join("".join(c for c in decomposed if not unicodedata.combining(c)).split()).upper()


_UF_BY_FOLDED_NAME = {_fold(name): uf for uf, name in UF_NAMES.items()}


def normalise_uf(value: Any) -> str:
    if not isinstance(value, str):
        raise FieldValueError("uf deve ser um texto")
    folded = _fold(value)
    if folded in UFS:
        return folded
    if folded in _UF_BY_FOLDED_NAME:
        return _UF_BY_FOLDED_NAME[folded]
    raise FieldValueError("uf inválida: use a sigla ou o nome de uma unidade federativa")


def normalise_phone(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise FieldValueError("telefone deve ser um texto")
    try:
        return parse_phone(str(value))
    except PhoneError as exc:
        if exc.parsed:
            raise FieldValueError(
                "telefone inválido: número inexistente no plano de numeração"
            ) from exc
        raise FieldValueError("telefone inválido: não é um número de telefone") from exc


_NORMALISERS = {
    "nome": normalise_name,
    "email": normalise_email,
    "documento": normalise_document,
    "empresa": normalise_company,
    "cidade": normalise_city,
    "uf": normalise_uf,
    "telefone": normalise_phone,
}


def _is_empty(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def normalise_registration(raw: Mapping[str, Any]) -> RegistrationResult:
    """Split a `cadastro` payload into valid normalised data, refused values and extras."""
    data: dict[str, str] = {}
    invalid: dict[str, InvalidValue] = {}
    extras: dict[str, Any] = {}
    for key, value in raw.items():
        normaliser = _NORMALISERS.get(key)
        if normaliser is None:
            extras[key] = value
            continue
        if _is_empty(value):
            continue
        try:
            data[key] = normaliser(value)
        except FieldValueError as exc:
            invalid[key] = InvalidValue(value=value, error=str(exc))
    return RegistrationResult(data=data, invalid=invalid, extras=extras)


def required_for_confirmation(data: Mapping[str, Any]) -> tuple[str, ...]:
    """The fields code 4 needs: nome, documento, email, and empresa for a CNPJ."""
    required: tuple[str, ...] = ("nome", "documento", "email")
    if document_kind(str(data.get("documento", ""))) == "cnpj":
        required += ("empresa",)
    return required


def missing_for_confirmation(data: Mapping[str, Any]) -> list[str]:
    """Required fields of code 4 that `data` (already normalised) lacks, in a stable order."""
    return [name for name in required_for_confirmation(data) if _is_empty(data.get(name))]
