"""Display masking of personal data (LGPD): patterns, a session's known values, JSON values."""

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agents.masking import (
    PATTERNS_ONLY,
    Kind,
    KnownValues,
    Masker,
    contains_personal_data,
    known_values,
    mask_as,
)

MARIA = known_values(
    customer_name="Maria Souza",
    customer_phone="5511912345678",
    customer_user_id="BR.1A2B3C4D5E",
    customer_document="52998224725",
    data=[
        {
            "nome": "Maria Souza Lima",
            "email": "maria.souza@example.com",
            "documento": "11222333000181",
            "telefone": "+5521987654321",
            "empresa": "Água Limpa Ltda",
            "cidade": "Campinas",
            "uf": "SP",
        }
    ],
)


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        ("CPF 529.982.247-25", "CPF ***.***.***-**"),
        ("cpf:52998224725", "cpf:***********"),
        ("529 982 247 25", "*** *** *** **"),
        ("CNPJ 11.222.333/0001-81.", "CNPJ **.***.***/****-**."),
        ("11222333000181", "**************"),
        ("ligue +55 (11) 91234-5678", "ligue +** (**) *****-****"),
        ("(11) 91234-5678", "(**) *****-****"),
        ("11 91234 5678", "** ***** ****"),
        ("91234-5678 ou 3234-5678", "*****-**** ou ****-****"),
        ("5511912345678", "*************"),
        ("+447911123456", "+************"),
        ("e-mail: Fulano.de-Tal+lab@mail.example.com.br!", "e-mail: ***@***!"),
    ],
)
def test_patterns_mask_anyones_documents_phones_and_e_mails(text: str, masked: str) -> None:
    assert PATTERNS_ONLY.text(text) == masked


@pytest.mark.parametrize(
    "text",
    [
        "30/11/2026 às 14:30",
        "2026-11-30",
        "R$ 1.234,56",
        "R$ 12.345.678,00",
        "CEP 01310-100",
        "3 amostras de 500 ml, pH 7.2",
        "wamid.HBgNNTUxMTkxMjM0NTY3OBUCABIYFjNFQjBBMDk=",
        "override:12 builtin gpt-4o-mini",
    ],
)
def test_dates_money_postal_codes_and_ids_are_not_personal_data(text: str) -> None:
    assert PATTERNS_ONLY.text(text) == text
    assert contains_personal_data(text) is False


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        ("Oi, sou a Maria Souza", "Oi, sou a M*** S***"),
        ("aqui é a maria", "aqui é a m***"),
        ("SOUZA, MARIA", "S***, M***"),
        ("Obrigada, Mária!", "Obrigada, M***!"),
        # Word boundaries: other names and words that contain the name stay.
        ("Mariana e Souzana", "Mariana e Souzana"),
        # Particles are not matched alone; the whole name still is.
        ("Maria Souza Lima", "M*** S*** L***"),
        ("meu id é BR.1A2B3C4D5E", "meu id é ***"),
        ("o telefone 1234-5678 e o fixo 9 1234 5678", "o telefone ****-**** e o fixo * **** ****"),
        # A company name is masked whole, its words are ordinary words.
        (
            "análise de água limpa para a Agua Limpa Ltda",
            "análise de água limpa para a A*** L*** L***",
        ),
        ("cidade: Campinas, SP", "cidade: Campinas, SP"),
    ],
)
def test_a_sessions_known_values_are_masked_wherever_written(text: str, masked: str) -> None:
    assert Masker(MARIA).text(text) == masked


def test_known_numbers_are_masked_in_any_spacing_the_patterns_miss() -> None:
    masker = Masker(KnownValues(numbers=("5511912345678",)))
    assert masker.text("zap 9.1.2.3.4.5.6.7.8") == "zap *.*.*.*.*.*.*.*.*"
    assert PATTERNS_ONLY.text("zap 9.1.2.3.4.5.6.7.8") == "zap 9.1.2.3.4.5.6.7.8"


def test_the_companys_own_number_can_stay_readable() -> None:
    masker = Masker(KnownValues(), keep_numbers=["+55 11 3000-0000"])
    text = "Ligue 11 3000-0000; o seu é 11 91234-5678"
    assert masker.text(text) == "Ligue 11 3000-0000; o seu é ** *****-****"


def test_known_only_leaves_pattern_shaped_company_data() -> None:
    masker = Masker(MARIA)
    text = "Cliente: Maria Souza. CNPJ do laboratório 11.444.777/0001-61."
    assert masker.known_only().text(text) == (
        "Cliente: M*** S***. CNPJ do laboratório 11.444.777/0001-61."
    )
    assert masker.text(text) == "Cliente: M*** S***. CNPJ do laboratório **.***.***/****-**."


@pytest.mark.parametrize(
    ("kind", "value", "masked"),
    [
        ("name", "José da Silva", "J*** d*** S***"),
        ("name", "Empresa 123", "E*** ***"),
        ("number", "+55 (11) 91234-5678", "+** (**) *****-****"),
        ("email", "qualquer coisa", "***@***"),
        ("identifier", "BR.123", "***"),
        ("name", "", ""),
        ("name", "M*** S***", "M*** S***"),
        ("number", "+*************", "+*************"),
    ],
)
def test_a_value_of_a_known_kind_is_masked_whole(kind: Kind, value: str, masked: str) -> None:
    assert mask_as(kind, value) == masked


def test_json_values_are_masked_by_key_and_by_text_keys_and_flags_unchanged() -> None:
    snapshot = {
        "session_id": 12,
        "customer_name": "Maria Souza",
        "customer_phone": "5511912345678",
        "instance": {"name": "Lab Vale", "health_sensitive": False},
        "registration_data": {
            "nome": "Maria Souza Lima",
            "email": "maria.souza@example.com",
            "documento": 52998224725,
            "cidade": "Campinas",
        },
        "technical_data": {"observacao": "falar com Maria no 11 91234-5678", "amostras": 3},
        "history_messages": [None, True, 4.5],
    }
    assert Masker(MARIA).value(snapshot) == {
        "session_id": 12,
        "customer_name": "M*** S***",
        "customer_phone": "*************",
        "instance": {"name": "Lab Vale", "health_sensitive": False},
        "registration_data": {
            "nome": "M*** S*** L***",
            "email": "***@***",
            "documento": "***********",
            "cidade": "Campinas",
        },
        "technical_data": {"observacao": "falar com M*** no ** *****-****", "amostras": 3},
        "history_messages": [None, True, 4.5],
    }


def test_known_values_skip_blanks_and_non_personal_keys() -> None:
    known = known_values(
        customer_name=" ",
        customer_phone="",
        data=[{"nome": "Ana", "uf": "SP", "email": "", "telefone": True}, {"cpf": 52998224725}],
    )
    assert known == KnownValues(
        names=("Ana",), companies=(), numbers=("52998224725",), emails=(), identifiers=()
    )


cpfs = st.from_regex(r"\A\d{3}\.\d{3}\.\d{3}-\d{2}\Z")
phones = st.from_regex(r"\A\(\d{2}\) 9\d{4}-\d{4}\Z")
texts = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=60)


@given(before=texts, value=st.one_of(cpfs, phones), after=texts)
def test_no_digit_of_a_document_or_phone_survives_in_any_text(
    before: str, value: str, after: str
) -> None:
    masked = PATTERNS_ONLY.text(f"{before} {value} {after}")
    assert value not in masked
    assert re.sub(r"\d", "*", value) in masked


@given(text=texts)
def test_masking_twice_is_masking_once(text: str) -> None:
    masker = Masker(MARIA)
    once = masker.text(text)
    assert masker.text(once) == once
