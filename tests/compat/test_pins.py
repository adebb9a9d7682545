"""tests.compat.pins: an adapter's pin fails loudly when pyproject.toml moves on without it, or
when the installed version is outside it."""

import re

import pytest

from tests.compat.pins import assert_pinned, declared_specifiers


def test_the_declared_specifiers_are_read_from_pyproject() -> None:
    declared = declared_specifiers()

    assert (declared["django"], declared["psycopg"], declared["kombu"]) == (
        "~=5.2.0",
        "~=3.3",
        "~=5.7.0",
    )


def test_an_adapter_checked_against_another_specifier_than_pyprojects_fails() -> None:
    with pytest.raises(
        AssertionError, match=re.escape("pyproject.toml now declares Django~=5.2.0")
    ):
        assert_pinned({"Django": "~=6.0.0"})


def test_an_installed_version_outside_the_checked_specifier_fails() -> None:
    with pytest.raises(AssertionError, match=re.escape("Django 5.3.0 is installed")):
        assert_pinned({"Django": "~=5.2.0"}, installed_version=lambda name: "5.3.0")
