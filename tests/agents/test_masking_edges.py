"""The masking's length thresholds tried on both sides: the shortest phone the patterns mask
(8 digits) and the longest digit run taken for a number (15, E.164's limit); a known name's words
from 3 letters, a known identifier from 4 characters, a known number in odd spacing from 8 digits."""

import pytest

from agents.masking import PATTERNS_ONLY, KnownValues, Masker


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        pytest.param("pedido 1234567", "pedido 1234567", id="7 digits: kept"),
        pytest.param("pedido 12345678", "pedido ********", id="8 digits: a phone"),
        pytest.param("ramal 123-4567", "ramal 123-4567", id="3+4 digits: kept"),
        pytest.param("fixo 1234-5678", "fixo ****-****", id="4+4 digits: a phone"),
        pytest.param("+12345678901234", "+**************", id="14 digits"),
        pytest.param("+123456789012345", "+***************", id="15 digits: E.164's longest"),
        pytest.param("1234567890123456", "1234567890123456", id="16 digits: no phone"),
    ],
)
def test_the_patterns_mask_phones_from_8_to_15_digits(text: str, masked: str) -> None:
    assert PATTERNS_ONLY.text(text) == masked


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        pytest.param("CPF 529.982.247-2", "CPF 529.982.247-2", id="10 digits: kept"),
        pytest.param("CPF 529.982.247-25", "CPF ***.***.***-**", id="11 digits: a CPF"),
        pytest.param("CPF 529.982.247-256", "CPF 529.982.247-256", id="12 digits: kept"),
        pytest.param("CNPJ 11.222.333/0001-8", "CNPJ 11.222.333/0001-8", id="13 digits: kept"),
        pytest.param("CNPJ 11.222.333/0001-81", "CNPJ **.***.***/****-**", id="14: a CNPJ"),
    ],
)
def test_a_punctuated_document_is_masked_only_with_all_its_digits(text: str, masked: str) -> None:
    assert PATTERNS_ONLY.text(text) == masked


def test_a_known_name_s_words_are_masked_alone_from_3_letters() -> None:
    masker = Masker(KnownValues(names=("Ana Li",)))

    assert masker.text("Ana, Li; Ana Li") == "A***, Li; A*** L***"


@pytest.mark.parametrize(
    ("identifier", "text", "masked"),
    [
        pytest.param("AB1", "id AB1", "id AB1", id="3 characters: kept"),
        pytest.param("AB12", "id AB12", "id ***", id="4 characters: masked"),
    ],
)
def test_a_known_identifier_is_masked_from_4_characters(
    identifier: str, text: str, masked: str
) -> None:
    assert Masker(KnownValues(identifiers=(identifier,))).text(text) == masked


@pytest.mark.parametrize(
    ("number", "text", "masked"),
    [
        pytest.param("1234567", "n 1.2.3.4.5.6.7", "n 1.2.3.4.5.6.7", id="7 digits: kept"),
        pytest.param("12345678", "n 1.2.3.4.5.6.7.8", "n *.*.*.*.*.*.*.*", id="8 digits: masked"),
    ],
)
def test_a_known_number_in_any_spacing_is_masked_from_8_digits(
    number: str, text: str, masked: str
) -> None:
    assert Masker(KnownValues(numbers=(number,))).text(text) == masked
