"""The one phone parser (agents.phones)."""

import pytest

from agents.phones import (
    PhoneError,
    customer_phone_key,
    format_phone,
    parse_phone,
    phone_digits,
    phone_forms,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("(11) 91234-5678", "+5511912345678"),
        (" +55 21 3456-7890 ", "+552134567890"),
        ("+1 650 253 0000", "+16502530000"),
    ],
)
def test_a_number_as_people_write_it_becomes_e164_with_brazil_by_default(
    text: str, expected: str
) -> None:
    assert parse_phone(text) == expected
    assert phone_digits(text) == expected[1:]


@pytest.mark.parametrize(("text", "parsed"), [("telefone", False), ("+55 11 1234", True)])
def test_not_a_phone_says_whether_it_looked_like_one(text: str, parsed: bool) -> None:
    with pytest.raises(PhoneError) as excinfo:
        parse_phone(text)
    assert excinfo.value.parsed is parsed
    assert phone_digits(text) is None


@pytest.mark.parametrize(
    ("digits", "expected"),
    [
        ("5511912345678", "+55 11 91234-5678"),
        ("552134567890", "+55 21 3456-7890"),
        ("*************", "+*************"),
        ("123", "+123"),
    ],
)
def test_a_stored_phone_reads_with_its_spaces_and_a_masked_one_as_it_is(
    digits: str, expected: str
) -> None:
    assert format_phone(digits) == expected


# --- the ninth digit ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("digits", "key"),
    [
        pytest.param("551187654321", "5511987654321", id="a mobile without its ninth digit"),
        pytest.param("5511987654321", "5511987654321", id="a mobile with it"),
        pytest.param("552166554433", "5521966554433", id="6: the lowest old mobile start"),
        pytest.param("552155554433", "552155554433", id="5: a landline, never a ninth digit"),
        pytest.param("551133334444", "551133334444", id="a landline of São Paulo"),
        pytest.param("552087654321", "552087654321", id="no area code 20: not a mobile"),
        pytest.param("55118765432", "55118765432", id="11 digits: not a Brazilian number"),
        pytest.param("5511876543210", "5511876543210", id="13 digits without a 9"),
        pytest.param("14155550100", "14155550100", id="another country"),
        pytest.param("", "", id="no phone"),
    ],
)
def test_a_customer_s_phone_key_is_a_brazilian_mobile_with_its_ninth_digit(
    digits: str, key: str
) -> None:
    assert customer_phone_key(digits) == key


@pytest.mark.parametrize(
    ("digits", "forms"),
    [
        ("551187654321", {"551187654321", "5511987654321"}),
        ("5511987654321", {"551187654321", "5511987654321"}),
        # 9 then 1: the subscriber part never began with 1 before the ninth digit.
        ("5511912345678", {"5511912345678"}),
        ("551133334444", {"551133334444"}),
        ("14155550100", {"14155550100"}),
        ("", set()),
    ],
)
def test_a_phone_s_forms_are_both_of_a_brazilian_mobile_and_only_itself_otherwise(
    digits: str, forms: set[str]
) -> None:
    assert phone_forms(digits) == forms
