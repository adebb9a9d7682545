"""Registration (`cadastro`) fields: normalisation, validation, extras and what code 4 needs."""

import pytest

from agents.fields import (
    UFS,
    FieldValueError,
    InvalidValue,
    RegistrationResult,
    document_kind,
    missing_for_confirmation,
    normalise_document,
    normalise_email,
    normalise_phone,
    normalise_registration,
    normalise_uf,
    required_for_confirmation,
)

VALID_CPF = "52998224725"
VALID_CNPJ = "11222333000181"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("529.982.247-25", VALID_CPF),
        ("52998224725", VALID_CPF),
        (" 529 982 247 25 ", VALID_CPF),
        (52998224725, VALID_CPF),
        ("11.222.333/0001-81", VALID_CNPJ),
        ("11222333000181", VALID_CNPJ),
    ],
)
def test_document_keeps_only_the_digits_of_a_valid_cpf_or_cnpj(raw: object, expected: str) -> None:
    assert normalise_document(raw) == expected


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        # The message names the field and the rule, never the value (it is logged and stored).
        ("529.982.247-24", "documento: CPF inválido (dígitos verificadores)"),
        ("111.111.111-11", "documento: CPF inválido (dígitos verificadores)"),
        ("11.222.333/0001-80", "documento: CNPJ inválido (dígitos verificadores)"),
        # validate-docbr pads a short CPF with zeros; a short number is refused before that.
        ("2998224725", "documento deve ter 11 dígitos (CPF) ou 14 dígitos (CNPJ)"),
        ("123", "documento deve ter 11 dígitos (CPF) ou 14 dígitos (CNPJ)"),
        ("12.ABC.345/01DE-35", "documento deve ter apenas números"),
        # isdigit() accepts superscripts; a document is ASCII digits only.
        ("²" * 11, "documento deve ter apenas números"),
        (True, "documento deve ser um texto com o CPF ou o CNPJ"),
        (["52998224725"], "documento deve ser um texto com o CPF ou o CNPJ"),
    ],
)
def test_document_refuses_wrong_check_digits_lengths_and_types(raw: object, error: str) -> None:
    with pytest.raises(FieldValueError) as excinfo:
        normalise_document(raw)
    assert str(excinfo.value) == error


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("maria@example.com", "maria@example.com"),
        ("  Maria.Souza+lab@Example.COM.br ", "Maria.Souza+lab@example.com.br"),
        ("o'neil@sub.domain.io", "o'neil@sub.domain.io"),
    ],
)
def test_email_keeps_the_local_part_and_lowercases_the_domain(raw: str, expected: str) -> None:
    assert normalise_email(raw) == expected


@pytest.mark.parametrize(
    "raw",
    [
        "maria",
        "maria@",
        "@example.com",
        "maria@example",
        "maria@@example.com",
        "ma ria@example.com",
        ".maria@example.com",
        "maria.@example.com",
        "ma..ria@example.com",
        "maria@-example.com",
        "maria@example.c0m",
        "a" * 65 + "@example.com",
    ],
)
def test_email_refuses_bad_syntax(raw: str) -> None:
    with pytest.raises(FieldValueError) as excinfo:
        normalise_email(raw)
    assert str(excinfo.value) == "email inválido: não tem a forma nome@domínio"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("SP", "SP"),
        (" rj ", "RJ"),
        ("São Paulo", "SP"),
        ("sao paulo", "SP"),
        ("Rio Grande do Sul", "RS"),
        ("distrito  federal", "DF"),
        ("PARÁ", "PA"),
    ],
)
def test_uf_accepts_the_abbreviation_or_the_name(raw: str, expected: str) -> None:
    assert normalise_uf(raw) == expected


def test_there_are_27_federative_units() -> None:
    assert len(UFS) == 27


@pytest.mark.parametrize("raw", ["XX", "S", "Sao", "Brasil", ""])
def test_uf_refuses_anything_else(raw: str) -> None:
    with pytest.raises(FieldValueError) as excinfo:
        normalise_uf(raw)
    assert str(excinfo.value) == "uf inválida: use a sigla ou o nome de uma unidade federativa"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("(11) 91234-5678", "+5511912345678"),
        ("11 91234-5678", "+5511912345678"),
        ("+55 11 91234-5678", "+5511912345678"),
        ("+55 (21) 3456-7890", "+552134567890"),
        ("+1 650 253 0000", "+16502530000"),
    ],
)
def test_phone_is_stored_in_e164_with_brazil_as_the_default_region(raw: str, expected: str) -> None:
    assert normalise_phone(raw) == expected


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        ("123", "telefone inválido: número inexistente no plano de numeração"),
        ("1191234567", "telefone inválido: número inexistente no plano de numeração"),
        ("telefone", "telefone inválido: não é um número de telefone"),
        ("+55 11 1234", "telefone inválido: número inexistente no plano de numeração"),
    ],
)
def test_phone_refuses_invalid_numbers(raw: str, error: str) -> None:
    with pytest.raises(FieldValueError) as excinfo:
        normalise_phone(raw)
    assert str(excinfo.value) == error


def test_registration_splits_valid_invalid_and_unknown_fields() -> None:
    result = normalise_registration(
        {
            "nome": "  João   da Silva ",
            "email": "joao@Example.com",
            "documento": "529.982.247-25",
            "empresa": "Águas Claras Ltda",
            "cidade": " Campinas ",
            "uf": "XX",
            "telefone": "123",
            "cargo": "gerente",
            "observacao": {"a": 1},
        }
    )

    assert result == RegistrationResult(
        data={
            "nome": "João da Silva",
            "email": "joao@example.com",
            "documento": VALID_CPF,
            "empresa": "Águas Claras Ltda",
            "cidade": "Campinas",
        },
        invalid={
            "uf": InvalidValue(
                "XX", "uf inválida: use a sigla ou o nome de uma unidade federativa"
            ),
            "telefone": InvalidValue(
                "123", "telefone inválido: número inexistente no plano de numeração"
            ),
        },
        extras={"cargo": "gerente", "observacao": {"a": 1}},
    )


def test_registration_skips_empty_values_instead_of_refusing_them() -> None:
    result = normalise_registration({"nome": "", "email": None, "uf": "   ", "cidade": "Santos"})

    assert result == RegistrationResult(data={"cidade": "Santos"}, invalid={}, extras={})


@pytest.mark.parametrize(
    ("value", "error"),
    [(42, "nome deve ser um texto"), ("x" * 201, "nome tem mais de 200 caracteres")],
)
def test_registration_refuses_a_name_that_is_not_a_short_text(value: object, error: str) -> None:
    result = normalise_registration({"nome": value})

    assert result.invalid == {"nome": InvalidValue(value, error)}
    assert result.data == {}


@pytest.mark.parametrize(
    ("digits", "kind"),
    [(VALID_CPF, "cpf"), (VALID_CNPJ, "cnpj"), ("", None), ("123", None), ("5299822472a", None)],
)
def test_document_kind(digits: str, kind: str | None) -> None:
    assert document_kind(digits) == kind


@pytest.mark.parametrize(
    ("data", "required", "missing"),
    [
        ({}, ("nome", "documento", "email"), ["nome", "documento", "email"]),
        (
            {"nome": "Ana", "documento": VALID_CPF, "email": "ana@example.com"},
            ("nome", "documento", "email"),
            [],
        ),
        (
            {"nome": "Ana", "documento": VALID_CNPJ, "email": "ana@example.com"},
            ("nome", "documento", "email", "empresa"),
            ["empresa"],
        ),
        (
            {"nome": "Ana", "documento": VALID_CNPJ, "email": "a@example.com", "empresa": "X"},
            ("nome", "documento", "email", "empresa"),
            [],
        ),
        ({"nome": "Ana", "email": ""}, ("nome", "documento", "email"), ["documento", "email"]),
    ],
)
def test_confirmation_requires_name_document_email_and_company_for_a_cnpj(
    data: dict[str, str], required: tuple[str, ...], missing: list[str]
) -> None:
    assert required_for_confirmation(data) == required
    assert missing_for_confirmation(data) == missing
