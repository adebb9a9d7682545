"""The sessions search's length thresholds on both sides: a message's text is searched from 3
characters; without permission to view personal data, a term with 4 digits or more (part of a
phone or a document) is refused, one with 3 is searched."""

import pytest
from model_bakery import baker

from conversations.models import Message, Session
from support.admin.sessions import is_personal_data_search, sessions_search


@pytest.mark.parametrize(
    ("term", "personal"),
    [
        pytest.param("lote 123", False, id="3 digits"),
        pytest.param("lote 1-2-3", False, id="3 digits, punctuated"),
        pytest.param("lote 1234", True, id="4 digits"),
        pytest.param("5.678", True, id="4 digits, punctuated"),
    ],
)
def test_a_search_term_with_4_digits_or_more_is_personal_data(term: str, personal: bool) -> None:
    assert is_personal_data_search(term) is personal


@pytest.mark.django_db
@pytest.mark.parametrize("personal_data", [True, False], ids=["support", "prompt editor"])
@pytest.mark.parametrize(
    ("term", "found"),
    [
        pytest.param("ço", False, id="2 characters"),
        pytest.param("poç", True, id="3 characters"),
        pytest.param("poço", True, id="4 characters"),
    ],
)
def test_a_message_s_text_is_searched_from_3_characters(
    term: str, found: bool, personal_data: bool
) -> None:
    session = baker.make(Session, customer_name="Pedro")
    baker.make(Message, session=session, content="Tenho um poço artesiano")

    matches = sessions_search(
        queryset=Session.objects.all(), term=term, personal_data=personal_data
    )

    assert list(matches) == ([session] if found else [])
