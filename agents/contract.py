"""The `{JSON}Mensagem` response contract: a strict parser and nothing else.

An agent answers with one JSON object followed by the text for the customer:
``{"s":1,"qualification_data":{"tipo_amostra":"água"}}Quantas amostras serão analisadas?``

The parser (seed 000, DESIGN.md §5) accepts only that shape: after ``lstrip()`` the first
character must be ``{``; the object ends at the first ``}`` that brings the brace depth back to
zero, counting only braces outside strings; only that slice goes to ``json.loads``; the rest,
``lstrip()``-ed, is the message. The object must carry an ``s`` of type ``int`` (``bool`` is
refused although Python treats it as an ``int``). There is no regex extraction and no tolerant
JSON: whether the code is allowed, and whether the message is required, is decided later by the
action mapping. Pure module: no Django import.
"""

import json
from dataclasses import dataclass
from typing import Any


class LLMResponseParseError(ValueError):
    """The raw answer is not a `{JSON}Mensagem`; the message says what is wrong."""


@dataclass(frozen=True, slots=True)
class ParsedLLMResponse:
    s: int
    json_part: dict[str, Any]
    message: str


def _find_object_end(text: str) -> int:
    """Index of the `}` that closes the object opened at ``text[0]``.

    A single linear pass: braces count only outside strings, and inside a string a backslash
    escapes the next character (so ``\\"`` does not end it and ``\\\\"`` does).
    """
    depth = 0
    in_string = False
    escaped = False
    for index, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return index
    if in_string:
        raise LLMResponseParseError("unbalanced braces: the JSON object has an unterminated string")
    raise LLMResponseParseError(
        f"unbalanced braces: the JSON object is never closed ({depth} brace(s) left open)"
    )


def parse_llm_response(raw: str) -> ParsedLLMResponse:
    """Split a raw model answer into its code, its JSON object and the customer message."""
    if not isinstance(raw, str):
        raise LLMResponseParseError(f"the answer is not text but {type(raw).__name__}")
    text = raw.lstrip()
    if not text:
        raise LLMResponseParseError("the answer is empty")
    if text[0] != "{":
        if text[0] == "[":
            raise LLMResponseParseError("not an object: the answer starts with a JSON array")
        # Where the JSON starts, not what comes before it: this text is logged
        # (`llm_response_parse_retry`) and stored, and the model's words may carry the customer's.
        start = text.find("{")
        where = f"{start} character(s) before the first '{{'" if start > 0 else "no '{' at all"
        raise LLMResponseParseError(
            f"text before the JSON: the answer must start with '{{' ({where})"
        )
    end = _find_object_end(text)
    json_text = text[: end + 1]
    try:
        obj = json.loads(json_text)
    except json.JSONDecodeError as exc:
        raise LLMResponseParseError(
            f"malformed JSON at line {exc.lineno} column {exc.colno} (char {exc.pos}): {exc.msg}"
        ) from exc
    if not isinstance(obj, dict):  # pragma: no cover - a `{...}` slice always decodes to a dict
        raise LLMResponseParseError("not an object")
    if "s" not in obj:
        raise LLMResponseParseError("missing 's': the JSON object has no code field")
    code = obj["s"]
    if isinstance(code, bool) or not isinstance(code, int):
        raise LLMResponseParseError(
            f"'s' must be an integer, got {type(code).__name__} {json.dumps(code)}"
        )
    return ParsedLLMResponse(s=code, json_part=obj, message=text[end + 1 :].lstrip())
