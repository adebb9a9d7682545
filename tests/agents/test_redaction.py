import time

import pytest

from agents.redaction import is_brazilian_phone, is_valid_cpf, redact

OPENAI_401 = (
    "Incorrect API key provided: sk-proj-SENTINEL4b1c*************************9f0a. You can "
    "find your API key at https://platform.openai.com/account/api-keys."
)
GRAPH_190 = (
    "Malformed access token EAAGSENTINELm0PX4ZCpsBAPZBnZCZA8DxVh2ZBZCxZAu4mZBt0ZD "
    "(fbtrace_id AbCdEfGhIjK)"
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # Credentials.
        (
            OPENAI_401,
            "Incorrect API key provided: sk-[redacted]. You can find your API key at "
            "https://platform.openai.com/account/api-keys.",
        ),
        ("key=sk-abcdefghijklmnop", "key=sk-[redacted]"),
        (GRAPH_190, "Malformed access token EAA[redacted] (fbtrace_id AbCdEfGhIjK)"),
        ("Authorization: Bearer eyJhbGciOi.eyJzdWIi.SflKxw", "Authorization: Bearer [redacted]"),
        ("header: bearer abc123def456==", "header: bearer [redacted]"),
        ("AUTHORIZATION: BEARER abcdefgh12345678", "AUTHORIZATION: BEARER [redacted]"),
        # E-mails.
        ("email inválido: 'ana.souza+lab@Empresa.com.br'", "email inválido: '[email]'"),
        ("contato joao_silva@lab-x.com.", "contato [email]."),
        # CPF, formatted or 11 digits (valid check digits or not).
        ("CPF inválido '123.456.789-00'", "CPF inválido '[cpf]'"),
        ("documento 52998224725", "documento [cpf]"),
        ("documento 529 982 247 25", "documento [cpf]"),
        ("documento=12345678900;", "documento=[cpf];"),
        # CNPJ, formatted or 14 digits.
        ("CNPJ 11.222.333/0001-81", "CNPJ [cnpj]"),
        ("cnpj 11222333000180", "cnpj [cnpj]"),
        # Phones: Brazilian forms and E.164.
        ("+5511987654321", "[phone]"),
        ("wa_id '5511987654321'", "wa_id '[phone]'"),
        ("+55 (11) 98765-4321", "[phone]"),
        ("(11) 98765-4321", "[phone]"),
        ("11 98765-4321", "[phone]"),
        ("fixo 1133334444", "fixo [phone]"),
        ("fixo 55 21 3456-7890", "fixo [phone]"),
        ("+1 (415) 555-2671", "[phone]"),
        ("+44 20 7946 0958", "[phone]"),
        ("Key (customer_phone)=(5511987654321)", "Key (customer_phone)=([phone])"),
        ("(+55 11 98765-4321)", "([phone])"),
        # An 11-digit mobile that is no valid CPF is labelled a phone.
        ("ligar 21998765432", "ligar [phone]"),
        # Several kinds in one text.
        (
            "Ana <ana@x.com.br>, CPF 529.982.247-25, tel +55 11 98765-4321, Bearer abcdefgh1234",
            "Ana <[email]>, CPF [cpf], tel [phone], Bearer [redacted]",
        ),
        # Not personal data: left as they are.
        ("pedido 123456 de 30/11/2026 às 17:43", "pedido 123456 de 30/11/2026 às 17:43"),
        ("pedido 2024000123", "pedido 2024000123"),
        ("2026-11-30 17:43:33,123", "2026-11-30 17:43:33,123"),
        ("ts=1767225600", "ts=1767225600"),
        # The documented price: a Unix time of 2028 has a Brazilian landline's shape.
        ("ts=1832000000", "ts=[phone]"),
        ("wamid.HBgNNTUxMTk4NzY1NDMyMRUCABEYEjQ5", "wamid.HBgNNTUxMTk4NzY1NDMyMRUCABEYEjQ5"),
        ("wamid.5511987654321", "wamid.5511987654321"),
        ("user BR.13491208655302741918", "user BR.13491208655302741918"),
        ("phone_number_id 106540352242922", "phone_number_id 106540352242922"),
        ("id 3f2b1c9e-0000-4000-8000-123456789012", "id 3f2b1c9e-0000-4000-8000-123456789012"),
        ("msg_5511987654321", "msg_5511987654321"),
        ("R$ 1.234.567.890,00", "R$ 1.234.567.890,00"),
        ("CEP 01310-100", "CEP 01310-100"),
        ("131047 Re-engagement message", "131047 Re-engagement message"),
        ("98765-4321", "98765-4321"),
        ("192.168.100.200", "192.168.100.200"),
        ("a bearer of news", "a bearer of news"),
        ("sk-short", "sk-short"),
        ("risk-assessment-document-v2", "risk-assessment-document-v2"),
        ("EAAG", "EAAG"),
        ("user@localhost", "user@localhost"),
        ("", ""),
    ],
)
def test_redact_masks_personal_data_and_credentials_and_nothing_else(
    text: str, expected: str
) -> None:
    assert redact(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "a" * 20_000,  # an e-mail's local part that never meets "@"
        "1" * 20_000,
        "a." * 10_000,
        "a@b." * 5_000,
        "1 " * 10_000,
        "sk-" * 6_000,
        "Bearer " * 3_000,
    ],
    ids=["letters", "digits", "dotted", "at-dot", "spaced-digits", "sk-prefixes", "bearers"],
)
def test_redact_takes_linear_time_on_long_runs(text: str) -> None:
    # Each pattern starts only at the start of a run; tried at every position of a 20,000
    # character run, the e-mail pattern took about 9 s here (quadratic), now a few ms.
    started = time.perf_counter()

    redact(text)

    assert time.perf_counter() - started < 1.0


def test_redact_is_idempotent() -> None:
    text = f"{OPENAI_401} {GRAPH_190} ana@x.com 529.982.247-25 +5511987654321 Bearer abcdefgh1234"

    once = redact(text)

    assert redact(once) == once


@pytest.mark.parametrize(
    ("digits", "valid"),
    [
        ("52998224725", True),
        ("52998224724", False),
        ("11111111111", False),
        ("5299822472", False),
        ("5299822472a", False),
        # isdigit() accepts it, int() refuses it.
        ("5299822472²", False),
    ],
)
def test_is_valid_cpf(digits: str, valid: bool) -> None:
    assert is_valid_cpf(digits) is valid


@pytest.mark.parametrize(
    ("digits", "phone"),
    [
        ("11987654321", True),
        ("5511987654321", True),
        ("1133334444", True),
        ("551133334444", True),
        ("1187654321", False),  # a landline starts 2-5
        ("2033334444", False),  # 20 is no DDD
        ("11887654321", False),  # a 9-digit mobile starts with 9
        ("1767225600", False),  # a Unix time of 2026
    ],
)
def test_is_brazilian_phone(digits: str, phone: bool) -> None:
    assert is_brazilian_phone(digits) is phone
