"""The satisfaction question's pure parts: the reply ids a tap brings back and the interactive
object sent (no database)."""

import pytest

from conversations.satisfaction import score_of_reply, survey_interactive
from whatsapp.interactive import MAX_BODY_CHARS, options_of


@pytest.mark.parametrize(
    ("reply_id", "score"),
    [
        ("csat:1", 1),
        ("csat:3", 3),
        ("csat:5", 5),
        ("csat:0", None),
        ("csat:6", None),
        ("csat:", None),
        ("csat:55", None),
        ("csat:٣", None),  # an Arabic-Indic three: a digit, not ours
        ("CSAT:5", None),
        ("sim", None),
        ("", None),
    ],
)
def test_only_csat_and_a_score_from_1_to_5_is_an_answer(reply_id: str, score: int | None) -> None:
    assert score_of_reply(reply_id) == score


def test_the_buttons_carry_5_3_and_1() -> None:
    interactive = survey_interactive("Como você avalia o atendimento?", "buttons")

    assert [(o.id, o.title) for o in options_of(interactive)] == [
        ("csat:5", "Ótimo"),
        ("csat:3", "Regular"),
        ("csat:1", "Ruim"),
    ]


def test_the_list_carries_5_to_1() -> None:
    interactive = survey_interactive("Nota?", "list")

    assert [o.id for o in options_of(interactive)] == [f"csat:{n}" for n in (5, 4, 3, 2, 1)]
    assert interactive["action"]["button"] == "Avaliar"


@pytest.mark.parametrize(
    ("question", "body"),
    [
        ("  ", "Como você avalia o atendimento?"),
        ("x" * MAX_BODY_CHARS, "x" * MAX_BODY_CHARS),
        ("x" * (MAX_BODY_CHARS + 1), "Como você avalia o atendimento?"),
    ],
    ids=["blank", "at WhatsApp's limit", "1 over it"],
)
def test_a_question_that_cannot_be_sent_falls_back_to_the_default(question: str, body: str) -> None:
    assert survey_interactive(question, "buttons")["body"] == {"text": body}
