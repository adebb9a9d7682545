"""Reply buttons and list messages within Meta's limits (`whatsapp.interactive`)."""

import pytest

from whatsapp.interactive import (
    Option,
    fits_buttons,
    fits_list,
    list_message,
    options_of,
    reply_buttons,
)


def options(*titles: str) -> list[Option]:
    return [Option(f"o{i}", title) for i, title in enumerate(titles, start=1)]


@pytest.mark.parametrize(
    ("count", "fits"), [(0, False), (1, True), (2, True), (3, True), (4, False)]
)
def test_up_to_three_buttons_fit(count: int, fits: bool) -> None:
    assert fits_buttons("Escolha:", options(*[f"B{i}" for i in range(count)])) is fits


@pytest.mark.parametrize(("chars", "fits"), [(19, True), (20, True), (21, False)])
def test_a_button_title_fits_in_twenty_characters(chars: int, fits: bool) -> None:
    assert fits_buttons("Escolha:", options("x" * chars)) is fits


@pytest.mark.parametrize(("chars", "fits"), [(1023, True), (1024, True), (1025, False)])
def test_the_body_fits_in_1024_characters(chars: int, fits: bool) -> None:
    assert fits_buttons("x" * chars, options("Sim")) is fits


@pytest.mark.parametrize(("count", "fits"), [(9, True), (10, True), (11, False)])
def test_up_to_ten_list_rows_fit(count: int, fits: bool) -> None:
    assert fits_list("Escolha:", options(*[f"Item {i}" for i in range(count)])) is fits


@pytest.mark.parametrize(("chars", "fits"), [(23, True), (24, True), (25, False)])
def test_a_list_row_title_fits_in_24_characters(chars: int, fits: bool) -> None:
    assert fits_list("Escolha:", options("y" * chars)) is fits


def test_repeated_ids_or_blank_titles_do_not_fit() -> None:
    assert fits_buttons("Escolha:", [Option("a", "Sim"), Option("a", "Não")]) is False
    assert fits_buttons("Escolha:", [Option("a", "  ")]) is False
    assert fits_buttons("", options("Sim")) is False


def test_a_list_message_has_one_section_with_its_rows() -> None:
    built = list_message(
        "Qual o segmento?", [Option("agua", "Água"), Option("solo", "Solo")], button="Ver opções"
    )

    assert built == {
        "type": "list",
        "body": {"text": "Qual o segmento?"},
        "action": {
            "button": "Ver opções",
            "sections": [
                {"rows": [{"id": "agua", "title": "Água"}, {"id": "solo", "title": "Solo"}]}
            ],
        },
    }
    assert options_of(built) == [Option("agua", "Água"), Option("solo", "Solo")]


def test_options_that_do_not_fit_are_refused_not_cut() -> None:
    with pytest.raises(ValueError, match="reply buttons"):
        reply_buttons("Escolha:", options("x" * 21))
    with pytest.raises(ValueError, match="button or section"):
        list_message("Escolha:", options("Água"), button="b" * 21)


def test_the_options_of_stored_buttons_read_back() -> None:
    built = reply_buttons(
        "Confirma?", [Option("confirm", "Confirmar"), Option("correct", "Corrigir")]
    )

    assert options_of(built) == [Option("confirm", "Confirmar"), Option("correct", "Corrigir")]
    assert options_of(None) == []
