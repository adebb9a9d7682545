"""The single format-repair call: what it asks, and how its answer is read."""

import pytest

from agents.contract import ParsedLLMResponse
from agents.llm import ChatMessage, LLMCallResult, LLMProviderError
from agents.repair import INVALID_FORMAT, REPAIR_INSTRUCTIONS, RepairResult, repair_llm_response
from tests.helpers.fake_collaborators import FakeLLM


def test_the_repair_asks_the_given_model_to_fix_only_the_format() -> None:
    llm = FakeLLM('{"s":1}Olá!')
    raw = 'Claro! Segue:\n```json\n{"s":1}Olá!\n```'

    repair_llm_response(llm=llm, model="gpt-summary", raw_response=raw)

    assert llm.calls == [
        {
            "model": "gpt-summary",
            "instructions": REPAIR_INSTRUCTIONS,
            "messages": [ChatMessage(role="user", content=raw)],
            "purpose": "repair",
            "cache_key": "",
        }
    ]


@pytest.mark.parametrize(
    "phrase",
    [
        "remova qualquer texto antes do objeto JSON",
        "remova cercas de código Markdown",
        "remova espaços e quebras de linha indevidos",
        "Preserve todo o resto exatamente como está",
        "responda exatamente INVALID_FORMAT",
    ],
)
def test_the_instructions_say_what_seed_000_allows(phrase: str) -> None:
    assert phrase in REPAIR_INSTRUCTIONS


def test_a_repaired_answer_is_parsed_by_the_strict_parser() -> None:
    llm = FakeLLM('{"s":1,"segmento":"AMBIENTAL"}Certo!')

    result = repair_llm_response(llm=llm, model="m", raw_response='Ok {"s":1}')

    assert result == RepairResult(
        call=LLMCallResult('{"s":1,"segmento":"AMBIENTAL"}Certo!', "m", 100, 10, 5),
        parsed=ParsedLLMResponse(1, {"s": 1, "segmento": "AMBIENTAL"}, "Certo!"),
    )


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        (INVALID_FORMAT, "the repair answered INVALID_FORMAT"),
        (f"  {INVALID_FORMAT}\n", "the repair answered INVALID_FORMAT"),
        (
            'Aqui está: {"s":1}Oi',
            "repaired answer: text before the JSON: the answer must start with '{' "
            "(11 character(s) before the first '{')",
        ),
        (
            '{"s":1,}Oi',
            "repaired answer: malformed JSON at line 1 column 8 (char 7): "
            "Expecting property name enclosed in double quotes",
        ),
    ],
)
def test_an_unusable_repair_is_reported_with_its_call(answer: str, error: str) -> None:
    llm = FakeLLM(answer)

    result = repair_llm_response(llm=llm, model="m", raw_response="lixo")

    assert result == RepairResult(
        call=LLMCallResult(answer, "m", 100, 10, 5), parsed=None, error=error
    )


def test_a_provider_error_propagates_to_the_caller() -> None:
    error = LLMProviderError("HTTP 500", attempts=2)
    llm = FakeLLM(error)

    with pytest.raises(LLMProviderError) as excinfo:
        repair_llm_response(llm=llm, model="m", raw_response="lixo")

    assert excinfo.value is error
    assert len(llm.calls) == 1


def test_the_instructions_allow_dropping_a_malformed_opcoes_and_state_its_rule() -> None:
    assert (
        'Se o JSON tiver o campo "opcoes" fora da regra (uma lista de no máximo 10 textos\n'
        "curtos, de até 24 caracteres, sem textos vazios nem repetidos), remova o campo\n"
        '"opcoes" inteiro.'
    ) in REPAIR_INSTRUCTIONS
