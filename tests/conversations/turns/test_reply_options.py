"""A reply's buttons and lists through a whole turn: code 4's Confirmar / Corrigir, an answer's
``opcoes`` as reply buttons or a list, the last part of a split reply, the fallback to text, and a
malformed ``opcoes`` through the one repair call."""

import json
import logging
from typing import Any

import pytest

from conversations.models import Instance
from tests.helpers.pipeline import (
    COLLECTING,
    INVALID_FORMAT_TEXT,
    SUMMARY_MODEL,
    S,
    confirming,
    events,
    inbound,
    llm_calls,
    make_session,
    outbound,
    pipeline,
)

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("catalog")]

CONFIRMATION_BUTTONS = {
    "buttons": [
        {"type": "reply", "reply": {"id": "confirmar", "title": "Confirmar"}},
        {"type": "reply", "reply": {"id": "corrigir", "title": "Corrigir"}},
    ]
}


def answer(code: int, options: list[str], text: str) -> str:
    return json.dumps({"s": code, "opcoes": options}, ensure_ascii=False) + text


def stored(session: Any) -> list[tuple[str, str, Any]]:
    return [(m.message_type, m.content, m.interactive) for m in outbound(session)]


def test_code_4_goes_out_with_the_confirmar_and_corrigir_buttons_under_the_model_s_text(
    instance: Instance, capture: Any
) -> None:
    session = make_session(instance, S.DATA_COLLECT, **COLLECTING)
    inbound(session, "ana@example.com")
    run = pipeline(
        '{"s":4,"cadastro":{"nome":"Ana Lima","documento":"529.982.247-25",'
        '"email":"ana@example.com"}}Confere: **Ana Lima**, CPF 529.982.247-25. Está tudo certo?'
    )

    run.run(session, capture=capture)

    body = "Confere: *Ana Lima*, CPF 529.982.247-25. Está tudo certo?"
    assert stored(session) == [
        (
            "interactive",
            body,
            {"type": "button", "body": {"text": body}, "action": CONFIRMATION_BUTTONS},
        )
    ]
    assert run.sent == [m.pk for m in outbound(session)]


def test_three_options_of_at_most_20_characters_are_reply_buttons(
    instance: Instance, capture: Any
) -> None:
    session = make_session(instance)
    inbound(session, "Oi")
    twenty = "Análise microbiológi"  # 20 characters
    run = pipeline(answer(1, ["Alimentos", "Ambiental", twenty], "Qual é o segmento?"))

    run.run(session, capture=capture)

    assert stored(session) == [
        (
            "interactive",
            "Qual é o segmento?",
            {
                "type": "button",
                "body": {"text": "Qual é o segmento?"},
                "action": {
                    "buttons": [
                        {"type": "reply", "reply": {"id": "opt1", "title": "Alimentos"}},
                        {"type": "reply", "reply": {"id": "opt2", "title": "Ambiental"}},
                        {"type": "reply", "reply": {"id": "opt3", "title": twenty}},
                    ]
                },
            },
        )
    ]


def list_of(body: str, titles: list[str]) -> dict[str, Any]:
    return {
        "type": "list",
        "body": {"text": body},
        "action": {
            "button": "Ver opções",
            "sections": [
                {
                    "rows": [
                        {"id": f"opt{number}", "title": title}
                        for number, title in enumerate(titles, 1)
                    ]
                }
            ],
        },
    }


@pytest.mark.parametrize(
    "titles",
    [
        ["Alimentos", "Ambiental", "Saúde humana", "Saúde animal"],
        ["Alimentos", "Ambiental", "Análise microbiológic"],  # 21 characters: not a button
        [f"Opção {n}" for n in range(1, 11)],
        ["Alimentos", "Análise de água potável!"],  # 24 characters: the most a row takes
    ],
    ids=["four", "twenty-one-chars", "ten", "twenty-four-chars"],
)
def test_options_that_do_not_fit_buttons_are_a_list_opened_by_ver_opcoes(
    instance: Instance, capture: Any, titles: list[str]
) -> None:
    session = make_session(instance)
    inbound(session, "Oi")
    run = pipeline(answer(1, titles, "Qual destas opções?"))

    run.run(session, capture=capture)

    assert stored(session) == [
        ("interactive", "Qual destas opções?", list_of("Qual destas opções?", titles))
    ]


def test_only_the_last_part_of_a_split_reply_carries_the_buttons(
    instance: Instance, capture: Any
) -> None:
    session = make_session(instance)
    inbound(session, "Oi")
    first, last = "a" * 4090, "Qual é o segmento?"
    run = pipeline(answer(1, ["Alimentos", "Ambiental"], f"{first}\n\n{last}"))

    run.run(session, capture=capture)

    [head, tail] = outbound(session)
    assert (head.message_type, head.content, head.interactive) == ("text", first, None)
    assert (tail.message_type, tail.content, tail.part_index) == ("interactive", last, 1)
    assert tail.interactive is not None
    assert tail.interactive["action"]["buttons"][1] == {
        "type": "reply",
        "reply": {"id": "opt2", "title": "Ambiental"},
    }
    assert run.sent == [head.pk, tail.pk]


@pytest.mark.parametrize(
    ("chars", "message_type"),
    [(1024, "interactive"), (1025, "text")],
    ids=["1024-interactive", "1025-text"],
)
def test_a_body_over_1024_characters_goes_out_as_the_text_it_is(
    instance: Instance,
    capture: Any,
    caplog: pytest.LogCaptureFixture,
    chars: int,
    message_type: str,
) -> None:
    session = make_session(instance)
    inbound(session, "Oi")
    body = "b" * chars
    run = pipeline(answer(1, ["Alimentos", "Ambiental"], body))

    with caplog.at_level(logging.WARNING, logger="conversations.turns.rows"):
        run.run(session, capture=capture)

    [reply] = outbound(session)
    assert (reply.message_type, reply.content) == (message_type, body)
    assert (reply.interactive is None) == (message_type == "text")
    dropped = [r for r in caplog.records if r.getMessage() == "reply_options_dropped"]
    assert [(r.options, r.body_chars) for r in dropped] == (  # type: ignore[attr-defined]
        [(2, 1025)] if message_type == "text" else []
    )
    assert run.sent == [reply.pk]


def test_a_code_5_with_options_is_sent_as_text(instance: Instance, capture: Any) -> None:
    session = confirming(instance)
    inbound(session, "Confirmar")
    run = pipeline(answer(5, ["Nova solicitação"], "Registrado!"))

    run.run(session, capture=capture)

    assert stored(session) == [("text", "Registrado!", None)]
    session.refresh_from_db()
    assert (session.state, session.handoff_reason) == ("HUMAN", "qualified_lead")


def test_malformed_options_get_the_one_repair_call_and_the_repaired_text_goes_out(
    instance: Instance, capture: Any
) -> None:
    session = make_session(instance)
    inbound(session, "Oi")
    run = pipeline(
        answer(1, ["Alimentos", "alimentos"], "Qual é o segmento?"),
        '{"s":1}Qual é o segmento?',
    )

    run.run(session, capture=capture)

    assert [c["model"] for c in run.llm.calls] == ["gpt-4o-mini", SUMMARY_MODEL]
    assert run.llm.calls[1]["messages"][0].content == answer(
        1, ["Alimentos", "alimentos"], "Qual é o segmento?"
    )
    assert stored(session) == [("text", "Qual é o segmento?", None)]
    assert llm_calls(session) == [
        ("agent", "triagem", "gpt-4o-mini", "ok"),
        ("repair", "triagem", SUMMARY_MODEL, "ok"),
    ]


def test_malformed_options_the_repair_keeps_hand_off_as_invalid_json(
    instance: Instance, capture: Any
) -> None:
    session = make_session(instance)
    inbound(session, "Oi")
    malformed = answer(1, ["x" * 25], "Qual é o segmento?")
    run = pipeline(malformed, malformed)

    run.run(session, capture=capture)

    session.refresh_from_db()
    assert (session.state, session.handoff_reason) == ("HUMAN", "llm_invalid_json")
    assert stored(session) == [("text", INVALID_FORMAT_TEXT, None)]
    assert events(session) == [("handoff", "llm_invalid_json")]
    assert session.handoff_detail == (
        "triagem: invalid 'opcoes': option 1 has 25 characters, at most 24; repaired answer: "
        "invalid 'opcoes': option 1 has 25 characters, at most 24"
    )
