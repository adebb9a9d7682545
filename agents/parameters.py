"""A service's technical-parameter schema: its shape, and typing a value against it.

The schema is admin-edited JSON stored on `knowledge_base.Service`: a list of
``{"name", "label", "type", "required", "choices"}``. `parse_parameter_schema` refuses a malformed
schema with a message naming the entry and the problem, so the admin form can show it. Pure module.
"""

import re
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal, InvalidOperation
from typing import Any

PARAMETER_TYPES = ("text", "integer", "decimal", "boolean", "choice", "date")
_NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
_TRUE = {"sim", "s", "true", "1", "yes", "verdadeiro"}
_FALSE = {"nao", "não", "n", "false", "0", "no", "falso"}


class ParameterSchemaError(ValueError):
    """The schema itself is malformed. `position` (1-based) names the entry at fault, if one is,
    and `problem` is the message without the "parâmetro N" prefix, so a form that shows the
    entries as rows can name the row its own way."""

    def __init__(self, message: str, position: int | None = None, problem: str = "") -> None:
        super().__init__(message)
        self.position = position
        self.problem = problem or message


def _entry_error(position: int, name: str | None, problem: str) -> ParameterSchemaError:
    where = f"parâmetro {position}" if name is None else f"parâmetro {position} ('{name}')"
    return ParameterSchemaError(f"{where}: {problem}", position=position, problem=problem)


class ParameterValueError(ValueError):
    """A value does not fit its parameter's type."""


@dataclass(frozen=True, slots=True)
class ParameterSpec:
    name: str
    label: str
    type: str = "text"
    required: bool = False
    choices: tuple[str, ...] = field(default_factory=tuple)


def parse_parameter_schema(raw: Any) -> list[ParameterSpec]:
    """Validate the stored JSON and return typed specs; raises `ParameterSchemaError`."""
    if raw in (None, ""):
        return []
    if not isinstance(raw, list):
        raise ParameterSchemaError("o esquema deve ser uma lista de parâmetros")
    specs: list[ParameterSpec] = []
    seen: set[str] = set()
    for position, entry in enumerate(raw, start=1):
        if not isinstance(entry, dict):
            raise _entry_error(position, None, "deve ser um objeto")
        unknown = set(entry) - {"name", "label", "type", "required", "choices"}
        if unknown:
            raise _entry_error(position, None, f"chaves desconhecidas {sorted(unknown)}")
        name = entry.get("name")
        if not isinstance(name, str) or not _NAME_RE.match(name):
            raise _entry_error(
                position, None, "'name' deve ser snake_case minúsculo (ex.: tipo_amostra)"
            )
        if name in seen:
            raise _entry_error(position, None, f"nome repetido '{name}'")
        seen.add(name)
        label = entry.get("label", name)
        if not isinstance(label, str) or not label.strip():
            raise _entry_error(position, name, "'label' deve ser um texto")
        kind = entry.get("type", "text")
        if kind not in PARAMETER_TYPES:
            raise _entry_error(
                position, name, f"tipo '{kind}' inválido; use um de {', '.join(PARAMETER_TYPES)}"
            )
        required = entry.get("required", False)
        if not isinstance(required, bool):
            raise _entry_error(position, name, "'required' deve ser true ou false")
        choices = entry.get("choices", [])
        if not isinstance(choices, list) or not all(isinstance(c, str) and c for c in choices):
            raise _entry_error(position, name, "'choices' deve ser uma lista de textos")
        if kind == "choice" and not choices:
            raise _entry_error(position, name, "tipo 'choice' exige 'choices'")
        if kind != "choice" and choices:
            raise _entry_error(position, name, "'choices' só vale para tipo 'choice'")
        specs.append(
            ParameterSpec(
                name=name, label=label, type=kind, required=required, choices=tuple(choices)
            )
        )
    return specs


def coerce_parameter_value(spec: ParameterSpec, value: Any) -> Any:
    """Type a model-provided value per its spec (JSON-serialisable result)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        raise ParameterValueError(f"'{spec.name}' está vazio")
    if spec.type == "text":
        if isinstance(value, (dict, list)):
            raise ParameterValueError(f"'{spec.name}' deve ser um texto")
        return str(value).strip()
    if spec.type == "integer":
        if isinstance(value, bool):
            raise ParameterValueError(f"'{spec.name}' deve ser um número inteiro")
        if isinstance(value, int):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str) and re.fullmatch(r"\s*-?\d+\s*", value):
            return int(value)
        raise ParameterValueError(f"'{spec.name}' deve ser um número inteiro")
    if spec.type == "decimal":
        if isinstance(value, bool):
            raise ParameterValueError(f"'{spec.name}' deve ser um número")
        text = str(value).strip().replace(",", ".") if isinstance(value, str) else str(value)
        try:
            number = Decimal(text)
        except InvalidOperation as exc:
            raise ParameterValueError(f"'{spec.name}' deve ser um número") from exc
        if not number.is_finite():
            raise ParameterValueError(f"'{spec.name}' deve ser um número")
        return str(number)
    if spec.type == "boolean":
        if isinstance(value, bool):
            return value
        lowered = str(value).strip().lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
        raise ParameterValueError(f"'{spec.name}' deve ser sim ou não")
    if spec.type == "choice":
        text = str(value).strip()
        for choice in spec.choices:
            if choice.casefold() == text.casefold():
                return choice
        raise ParameterValueError(f"'{spec.name}' deve ser um de: {', '.join(spec.choices)}")
    # date
    text = str(value).strip()
    for parse in (_iso_date, _br_date):
        parsed = parse(text)
        if parsed is not None:
            return parsed.isoformat()
    raise ParameterValueError(f"'{spec.name}' deve ser uma data (AAAA-MM-DD ou DD/MM/AAAA)")


def _iso_date(text: str) -> date | None:
    try:
        return date.fromisoformat(text)
    except ValueError:
        return None


def _br_date(text: str) -> date | None:
    match = re.fullmatch(r"(\d{1,2})/(\d{1,2})/(\d{4})", text)
    if not match:
        return None
    day, month, year = (int(g) for g in match.groups())
    try:
        return date(year, month, day)
    except ValueError:
        return None
