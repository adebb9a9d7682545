"""A service's parameter schema: refused with a precise message when malformed; values typed."""

import pytest

from agents.parameters import (
    ParameterSchemaError,
    ParameterSpec,
    ParameterValueError,
    coerce_parameter_value,
    parse_parameter_schema,
)


def test_valid_schema_becomes_specs() -> None:
    raw = [
        {"name": "tipo_amostra", "label": "Tipo de amostra", "type": "text", "required": True},
        {"name": "quantidade_amostras", "label": "Quantidade", "type": "integer", "required": True},
        {"name": "matriz", "label": "Matriz", "type": "choice", "choices": ["água", "solo"]},
    ]
    assert parse_parameter_schema(raw) == [
        ParameterSpec("tipo_amostra", "Tipo de amostra", "text", True, ()),
        ParameterSpec("quantidade_amostras", "Quantidade", "integer", True, ()),
        ParameterSpec("matriz", "Matriz", "choice", False, ("água", "solo")),
    ]


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"name": "x"}, "o esquema deve ser uma lista de parâmetros"),
        (["x"], "parâmetro 1: deve ser um objeto"),
        ([{"name": "Tipo"}], "parâmetro 1: 'name' deve ser snake_case minúsculo (ex.: tipo_amostra)"),
        ([{"name": "a"}, {"name": "a"}], "parâmetro 2: nome repetido 'a'"),
        ([{"name": "a", "type": "float"}], "parâmetro 1 ('a'): tipo 'float' inválido; use um de text, integer, decimal, boolean, choice, date"),
        ([{"name": "a", "required": "yes"}], "parâmetro 1 ('a'): 'required' deve ser true ou false"),
        ([{"name": "a", "type": "choice"}], "parâmetro 1 ('a'): tipo 'choice' exige 'choices'"),
        ([{"name": "a", "choices": ["x"]}], "parâmetro 1 ('a'): 'choices' só vale para tipo 'choice'"),
        ([{"name": "a", "extra": 1}], "parâmetro 1: chaves desconhecidas ['extra']"),
        ([{"name": "a", "label": ""}], "parâmetro 1 ('a'): 'label' deve ser um texto"),
    ],
)  # fmt: skip
def test_malformed_schema_is_refused_with_a_precise_message(raw: object, message: str) -> None:
    with pytest.raises(ParameterSchemaError) as excinfo:
        parse_parameter_schema(raw)
    assert str(excinfo.value) == message


@pytest.mark.parametrize(
    ("kind", "value", "expected"),
    [
        ("text", "  água de poço ", "água de poço"),
        ("integer", "12", 12),
        ("integer", 3.0, 3),
        ("decimal", "2,5", "2.5"),
        ("boolean", "Sim", True),
        ("boolean", False, False),
        ("date", "31/12/2026", "2026-12-31"),
        ("date", "2026-01-05", "2026-01-05"),
    ],
)
def test_values_are_typed(kind: str, value: object, expected: object) -> None:
    assert coerce_parameter_value(ParameterSpec("p", "P", kind), value) == expected


def test_choice_matches_case_insensitively_and_returns_the_declared_spelling() -> None:
    spec = ParameterSpec("m", "M", "choice", choices=("Água", "Solo"))
    assert coerce_parameter_value(spec, "água") == "Água"


@pytest.mark.parametrize(
    ("kind", "value", "message"),
    [
        ("integer", "doze", "'p' deve ser um número inteiro"),
        ("integer", True, "'p' deve ser um número inteiro"),
        ("decimal", "abc", "'p' deve ser um número"),
        ("boolean", "talvez", "'p' deve ser sim ou não"),
        ("date", "31/02/2026", "'p' deve ser uma data (AAAA-MM-DD ou DD/MM/AAAA)"),
        ("text", "  ", "'p' está vazio"),
        ("text", {"a": 1}, "'p' deve ser um texto"),
    ],
)
def test_bad_values_are_refused(kind: str, value: object, message: str) -> None:
    with pytest.raises(ParameterValueError) as excinfo:
        coerce_parameter_value(ParameterSpec("p", "P", kind), value)
    assert str(excinfo.value) == message


@pytest.mark.parametrize(
    ("raw", "position", "problem"),
    [
        ({"name": "x"}, None, "o esquema deve ser uma lista de parâmetros"),
        ([{"name": "a"}, {"name": "a"}], 2, "nome repetido 'a'"),
        ([{"name": "a"}, {"name": "b", "type": "choice"}], 2, "tipo 'choice' exige 'choices'"),
    ],
)
def test_the_error_names_the_entry_and_the_problem_apart(
    raw: object, position: int | None, problem: str
) -> None:
    """The admin's rows name the row themselves ("Linha 2: …"), so they need both apart."""
    with pytest.raises(ParameterSchemaError) as excinfo:
        parse_parameter_schema(raw)
    assert (excinfo.value.position, excinfo.value.problem) == (position, problem)
