"""Strategic companies matched in code: names without case, accents or legal suffixes, as whole
words; CNPJ (collected or written) and phone. Pure: no database."""

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agents.sources import StrategicCompanyInfo
from agents.strategic_companies import (
    LEGAL_SUFFIXES,
    cnpjs_in,
    company_name_key,
    mentions_company,
    strategic_company_match,
    words,
)

ACME = StrategicCompanyInfo("ACME S.A.", "11222333000181", ("5511988887777",))
ALFA = StrategicCompanyInfo("Alfa Ltda.", "", ())
PARCEIRA = StrategicCompanyInfo("Indústria Parceira LTDA-ME", "60701190000104", ())
COMPANIES = (ACME, ALFA, PARCEIRA)


def test_words_fold_case_accents_and_punctuation() -> None:
    assert words("  Indústria São-João & Cia., LTDA-ME!") == (
        "industria",
        "sao",
        "joao",
        "e",
        "cia",
        "ltda",
        "me",
    )


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("ACME S.A.", "acme"),
        ("Acme SA", "acme"),
        ("Acme S/A", "acme"),
        ("Acme S. A.", "acme"),
        ("Alfa Ltda.", "alfa"),
        ("Alfa Limitada", "alfa"),
        ("Indústria Parceira LTDA-ME", "industria parceira"),
        ("Épsilon Comércio Ltda. ME", "epsilon comercio"),
        ("Gama EIRELI", "gama"),
        ("Delta EPP", "delta"),
        ("Zeta e Cia. Ltda", "zeta"),
        ("Johnson & Johnson do Brasil", "johnson e johnson do brasil"),
        ("3M do Brasil Ltda", "3m do brasil"),
        # A suffix word inside the name stays; only the end is a legal form.
        ("Casa Me Engenharia", "casa me engenharia"),
        # Nothing left to look for: never matched by text.
        ("ME Ltda", ""),
        ("S.A.", ""),
        ("X Ltda", ""),
        ("", ""),
    ],
)
def test_company_name_key_drops_legal_suffixes(name: str, key: str) -> None:
    assert company_name_key(name) == key


@pytest.mark.parametrize(
    ("text", "name", "expected"),
    [
        ("aqui é da acme", "ACME S.A.", True),
        ("Oi! Falo pela ACMÉ, do setor de compras.", "ACME S.A.", True),
        ("Compramos sempre da Acme S/A", "Acme", True),
        ("sou da industria parceira, preciso de um laudo", "Indústria Parceira LTDA-ME", True),
        ("Alfa-Beta aqui", "Alfa Beta Ltda", True),
        ("Sou da ALFA.", "Alfa Ltda.", True),
        # Whole words only.
        ("quero analisar a água da escola Alfabeto", "Alfa Ltda.", False),
        ("acmes e acmezinhos", "ACME S.A.", False),
        # Every word, in order.
        ("sou da indústria", "Indústria Parceira LTDA-ME", False),
        ("beta alfa", "Alfa Beta", False),
        ("sou do ME", "ME Ltda", False),
        ("", "ACME S.A.", False),
    ],
)
def test_mentions_company(text: str, name: str, expected: bool) -> None:
    assert mentions_company(text, name) is expected


def test_cnpjs_in_finds_written_cnpjs_with_or_without_punctuation() -> None:
    text = "CNPJ 11.222.333/0001-81, o outro é 60701190000104; telefone 11 98888-7777"

    assert cnpjs_in(text) == {"11222333000181", "60701190000104"}
    assert cnpjs_in("pedido 111222333000181999") == set()


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"phone": "5511988887777"}, ACME),
        ({"document": "11222333000181"}, ACME),
        ({"document": "11.222.333/0001-81"}, ACME),
        ({"texts": ("meu CNPJ é 60.701.190/0001-04",)}, PARCEIRA),
        ({"texts": ("Bom dia", "aqui é da acme")}, ACME),
        ({"texts": ("", "Industria Parceira")}, PARCEIRA),
        ({"texts": ("sou da alfa",)}, ALFA),
        ({"phone": "5511900000000", "document": "52998224725", "texts": ("oi",)}, None),
        ({"texts": ("quero analisar a água da escola Alfabeto",)}, None),
        ({}, None),
    ],
)
def test_strategic_company_match(
    kwargs: dict[str, Any], expected: StrategicCompanyInfo | None
) -> None:
    assert strategic_company_match(COMPANIES, **kwargs) is expected


def test_a_stored_cnpj_with_punctuation_still_matches() -> None:
    company = StrategicCompanyInfo("Ômega", "11.222.333/0001-81")

    assert strategic_company_match((company,), document="11222333000181") is company


def test_nothing_matches_without_companies() -> None:
    assert strategic_company_match((), phone="5511988887777", texts=("acme",)) is None


# A word of a name that is not itself a legal suffix (a name made only of those never matches).
NAME_WORD = st.text(alphabet="abcdefghijklmnopqrstuvwxyzáéíóúãõç", min_size=3, max_size=10).filter(
    lambda word: words(word) not in LEGAL_SUFFIXES
)
SUFFIX = st.sampled_from(
    ["", " Ltda", " LTDA.", " S.A.", " S/A", " SA", " ME", " Ltda-ME", " EIRELI"]
)
FILLER = st.lists(st.sampled_from(["oi", "aqui", "é", "da", "sou", "do", "setor", "bom dia,"]))


@given(name=st.lists(NAME_WORD, min_size=1, max_size=3), suffix=SUFFIX, before=FILLER, after=FILLER)
def test_a_name_written_in_lower_case_without_its_suffix_is_found_anywhere_in_a_text(
    name: list[str], suffix: str, before: list[str], after: list[str]
) -> None:
    registered = " ".join(word.capitalize() for word in name) + suffix
    text = " ".join([*before, " ".join(name).lower(), *after])

    assert mentions_company(text, registered)


@given(name=NAME_WORD, extra=st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=5))
def test_a_name_glued_to_other_letters_is_not_found(name: str, extra: str) -> None:
    assert not mentions_company(f"{name}{extra} {extra}{name}", f"{name} Ltda")
