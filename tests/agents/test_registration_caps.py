"""The registration's text cap tried on both sides: 200 characters are kept, 201 are refused."""

import pytest

from agents.fields import InvalidValue, RegistrationResult, normalise_registration


@pytest.mark.parametrize("length", [199, 200], ids=["199 characters", "200 characters"])
def test_a_name_of_up_to_200_characters_is_kept(length: int) -> None:
    assert normalise_registration({"nome": "x" * length}) == RegistrationResult(
        data={"nome": "x" * length}, invalid={}, extras={}
    )


def test_a_name_of_201_characters_is_refused() -> None:
    assert normalise_registration({"nome": "x" * 201}) == RegistrationResult(
        data={}, invalid={"nome": InvalidValue("x" * 201, "nome tem mais de 200 caracteres")}
    )
