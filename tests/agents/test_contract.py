"""The strict `{JSON}Mensagem` parser: seed 000's table, edge cases and a property."""

import json
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.contract import (
    MAX_OPTION_CHARS,
    MAX_OPTIONS,
    LLMResponseParseError,
    ParsedLLMResponse,
    parse_llm_response,
)
from whatsapp.interactive import MAX_LIST_ROWS, MAX_ROW_TITLE_CHARS


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ('{"s":1}Olá.', ParsedLLMResponse(1, {"s": 1}, "Olá.")),
        (' \n\t {"s":1}Olá.', ParsedLLMResponse(1, {"s": 1}, "Olá.")),
        (
            '{"s":99,"context_needed":"COMPANY_INFO"}',
            ParsedLLMResponse(99, {"s": 99, "context_needed": "COMPANY_INFO"}, ""),
        ),
        (
            '{"s":1,"nota":"usa {chaves}"}Texto',
            ParsedLLMResponse(1, {"s": 1, "nota": "usa {chaves}"}, "Texto"),
        ),
        ('{"s":123}Texto', ParsedLLMResponse(123, {"s": 123}, "Texto")),
    ],
    ids=["plain", "leading-whitespace", "empty-message", "braces-in-string", "unknown-code"],
)
def test_seed_table_valid_answers(raw: str, expected: ParsedLLMResponse) -> None:
    assert parse_llm_response(raw) == expected


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        ('Olá {"s":1}Texto', "text before the JSON: the answer must start with '{' (4 character(s) before the first '{')"),
        # The error says where the JSON starts, never what the model wrote (it is logged).
        ("Seu CPF 529.982.247-25 foi anotado", "text before the JSON: the answer must start with '{' (no '{' at all)"),
        ('```json\n{"s":1}\n```Texto', "text before the JSON: the answer must start with '{' (8 character(s) before the first '{')"),
        ('{"s":1,}Texto', "malformed JSON at line 1 column 8 (char 7): Expecting property name enclosed in double quotes"),
        ('{"s":1', "unbalanced braces: the JSON object is never closed (1 brace(s) left open)"),
        ('{"s":"1"}Texto', "'s' must be an integer, got str \"1\""),
        ('{"s":true}Texto', "'s' must be an integer, got bool true"),
        ('{"s":1.0}Texto', "'s' must be an integer, got float 1.0"),
        ('{"message":"Texto"}', "missing 's': the JSON object has no code field"),
        ('[{"s":1}]Texto', "not an object: the answer starts with a JSON array"),
    ],
    ids=[
        "text-before", "text-without-json", "markdown-fence", "trailing-comma", "unbalanced", "s-string", "s-bool",
        "s-float", "s-missing", "top-level-array",
    ],
)  # fmt: skip
def test_seed_table_invalid_answers(raw: str, error: str) -> None:
    with pytest.raises(LLMResponseParseError) as excinfo:
        parse_llm_response(raw)
    assert str(excinfo.value) == error


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (
            r'{"s":1,"q":"diz \"oi\" {"}Texto',
            ParsedLLMResponse(1, {"s": 1, "q": 'diz "oi" {'}, "Texto"),
        ),
        (
            r'{"s":1,"path":"C:\\"}}Texto',
            ParsedLLMResponse(1, {"s": 1, "path": "C:\\"}, "}Texto"),
        ),
        (
            '{"s":1,"x":"[{]}"}Texto',
            ParsedLLMResponse(1, {"s": 1, "x": "[{]}"}, "Texto"),
        ),
        (
            '{"s":3,"qualification_data":{"a":[1,{"b":{}}],"c":[]}}Ok',
            ParsedLLMResponse(3, {"s": 3, "qualification_data": {"a": [1, {"b": {}}], "c": []}}, "Ok"),
        ),
        (
            '{"s":1,"nome":"Jo\\u00e3o 😀"}Olá, João! 😀',
            ParsedLLMResponse(1, {"s": 1, "nome": "João 😀"}, "Olá, João! 😀"),
        ),
        ('{"s":1}  \n\t ', ParsedLLMResponse(1, {"s": 1}, "")),
        ('{"s":1}{"s":2}', ParsedLLMResponse(1, {"s": 1}, '{"s":2}')),
        ('{"s":-5}x', ParsedLLMResponse(-5, {"s": -5}, "x")),
        (
            '{"s":123456789012345678901234567890}x',
            ParsedLLMResponse(123456789012345678901234567890, {"s": 123456789012345678901234567890}, "x"),
        ),
        ('{"s":1}\n\nLinha 1\nLinha 2', ParsedLLMResponse(1, {"s": 1}, "Linha 1\nLinha 2")),
    ],
    ids=[
        "escaped-quote-and-brace", "backslash-before-closing-quote", "brackets-in-string",
        "nested", "unicode-escape-and-emoji", "whitespace-only-message", "second-object-is-text",
        "negative", "very-large", "message-lstrip-only",
    ],
)  # fmt: skip
def test_edge_cases_valid(raw: str, expected: ParsedLLMResponse) -> None:
    assert parse_llm_response(raw) == expected


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        ('{"s":null}x', "'s' must be an integer, got NoneType null"),
        ('\ufeff{"s":1}x', "text before the JSON: the answer must start with '{' (1 character(s) before the first '{')"),
        ("", "the answer is empty"),
        ("   \n", "the answer is empty"),
        ('{"s":1,"q":"never closed}', "unbalanced braces: the JSON object has an unterminated string"),
        ("{'s':1}x", "malformed JSON at line 1 column 2 (char 1): Expecting property name enclosed in double quotes"),
        ('{"s":1}}', None),
    ],
    ids=["s-null", "leading-bom", "empty", "blank", "unterminated-string", "single-quotes", "extra-closing-brace"],
)  # fmt: skip
def test_edge_cases_invalid(raw: str, error: str | None) -> None:
    if error is None:
        # An extra closing brace after a complete object is message text, not an error.
        assert parse_llm_response(raw) == ParsedLLMResponse(1, {"s": 1}, "}")
        return
    with pytest.raises(LLMResponseParseError) as excinfo:
        parse_llm_response(raw)
    assert str(excinfo.value) == error


def test_not_text_is_refused() -> None:
    with pytest.raises(LLMResponseParseError) as excinfo:
        parse_llm_response(None)  # type: ignore[arg-type]  # the wrong type is the case tested
    assert str(excinfo.value) == "the answer is not text but NoneType"


def test_one_megabyte_message_parses_in_linear_time() -> None:
    message = 'Olá { } " \\ ' * 90_000
    payload = '{"s":1,"k":"' + "x{" * 50_000 + '"}' + message
    started = time.perf_counter()
    parsed = parse_llm_response(payload)
    elapsed = time.perf_counter() - started
    assert parsed.s == 1
    assert parsed.message == message.lstrip()
    assert len(parsed.message) == 1_080_000
    # The scan stops at the object's end: the message is never walked character by character.
    assert elapsed < 0.5


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet=st.characters(), max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=15,
)
tricky_text = st.text(alphabet=st.sampled_from('{}[]"\\ab \n\tçã😀'), max_size=30)


@settings(max_examples=300, deadline=None)
@given(
    code=st.integers(),
    extra=st.dictionaries(
        # "opcoes" is the one other key the contract checks; its own tests are below.
        st.text(max_size=8).filter(lambda k: k not in {"s", "opcoes"}),
        json_values | tricky_text,
        max_size=5,
    ),
    message=st.text(max_size=60) | tricky_text,
    compact=st.booleans(),
)
def test_property_any_object_with_int_s_roundtrips(
    code: int, extra: dict[str, object], message: str, compact: bool
) -> None:
    obj = {"s": code, **extra}
    separators = (",", ":") if compact else None
    raw = json.dumps(obj, ensure_ascii=False, separators=separators) + message
    assert parse_llm_response(raw) == ParsedLLMResponse(code, obj, message.lstrip())


# --- "opcoes": the options an answer offers -------------------------------------------------------


def titles(count: int, *, chars: int = 5) -> list[str]:
    """`count` distinct titles of exactly `chars` characters."""
    return [f"{number:0{chars}d}" for number in range(1, count + 1)]


def with_options(options: object) -> str:
    return json.dumps({"s": 1, "opcoes": options}, ensure_ascii=False) + "Qual é o segmento?"


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        (["Alimentos", "Ambiental", "Saúde"], ("Alimentos", "Ambiental", "Saúde")),
        (titles(4), tuple(titles(4))),
        (titles(10), tuple(titles(10))),
        (titles(3, chars=20), tuple(titles(3, chars=20))),
        (titles(3, chars=21), tuple(titles(3, chars=21))),
        (titles(2, chars=24), tuple(titles(2, chars=24))),
        (["  Água  ", "Solo\n"], ("Água", "Solo")),
        ([" " + "x" * 24 + " "], ("x" * 24,)),
        ([], ()),
    ],
    ids=[
        "three", "four", "ten", "twenty-chars", "twenty-one-chars", "twenty-four-chars",
        "stripped", "twenty-four-after-strip", "empty-list",
    ],
)  # fmt: skip
def test_valid_options_are_kept_stripped_in_order(
    options: list[str], expected: tuple[str, ...]
) -> None:
    parsed = parse_llm_response(with_options(options))

    assert (parsed.s, parsed.options, parsed.message) == (1, expected, "Qual é o segmento?")
    assert parsed.json_part["opcoes"] == options


def test_an_answer_without_options_offers_none() -> None:
    assert parse_llm_response('{"s":1}Olá.').options == ()


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ("Alimentos, Ambiental", "invalid 'opcoes': must be a list of texts, got a string"),
        ({"a": "Alimentos"}, "invalid 'opcoes': must be a list of texts, got an object"),
        (None, "invalid 'opcoes': must be a list of texts, got null"),
        (3, "invalid 'opcoes': must be a list of texts, got a number"),
        (titles(11), "invalid 'opcoes': 11 options, at most 10"),
        (["Água", 2], "invalid 'opcoes': option 2 is a number, not a text"),
        (["Água", True], "invalid 'opcoes': option 2 is a boolean, not a text"),
        ([["Água"]], "invalid 'opcoes': option 1 is a list, not a text"),
        ([{"title": "Água"}], "invalid 'opcoes': option 1 is an object, not a text"),
        ([None], "invalid 'opcoes': option 1 is null, not a text"),
        (["Água", ""], "invalid 'opcoes': option 2 is empty"),
        (["Água", "  \n"], "invalid 'opcoes': option 2 is empty"),
        (["x" * 25], "invalid 'opcoes': option 1 has 25 characters, at most 24"),
        (["Água", "Solo", "água"], "invalid 'opcoes': option 3 repeats an earlier one"),
        (["Análise  de solo", "análise de Solo "], "invalid 'opcoes': option 2 repeats an earlier one"),
    ],
    ids=[
        "string", "object", "null", "number", "eleven", "number-item", "bool-item", "list-item",
        "object-item", "null-item", "empty-item", "blank-item", "twenty-five-chars",
        "duplicate-ignoring-case", "duplicate-ignoring-spaces",
    ],
)  # fmt: skip
def test_malformed_options_are_a_parse_error_that_names_no_option(
    options: object, error: str
) -> None:
    with pytest.raises(LLMResponseParseError) as excinfo:
        parse_llm_response(with_options(options))

    assert str(excinfo.value) == error


def test_the_option_limits_are_the_list_message_s() -> None:
    assert (MAX_OPTIONS, MAX_OPTION_CHARS) == (MAX_LIST_ROWS, MAX_ROW_TITLE_CHARS) == (10, 24)
