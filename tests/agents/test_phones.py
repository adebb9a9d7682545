"""The one phone parser (agents.phones)."""

import pytest

from agents.phones import PhoneError, format_phone, parse_phone, phone_digits


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
