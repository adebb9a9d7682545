"""The `{JSON}Mensagem` response contract: a strict parser and nothing else.

An agent answers with one JSON object followed by the text for the customer:
``{"s":1,"qualification_data":{"tipo_amostra":"água"}}Quantas amostras serão analisadas?``

The parser (seed 000, DESIGN.md §5) accepts only that shape: after ``lstrip()`` the first
character must be ``{``; the object ends at the first ``}`` that brings the brace depth back to
zero, counting only braces outside strings; only that slice goes to ``json.loads``; the rest,
``lstrip()``-ed, is the message. The object must carry an ``s`` of type ``int`` (``bool`` is
refused although Python treats it as an ``int``). There is no regex extraction and no tolerant
JSON: whether the code is allowed, and whether the message is required, is decided later by the
action mapping.

One optional field has a shape the parser checks too, because it is the answer's form, not its
business data: ``"opcoes"``, the short options the agent offers the customer (sent as reply
buttons or a list, `conversations.dispatcher`). When present it must be a list of at most
`MAX_OPTIONS` texts, each non-blank and at most `MAX_OPTION_CHARS` characters once stripped, no
two the same (ignoring case and spacing); ``[]`` offers nothing. Anything else is a parse
error, so the one format-repair call applies to it as to any other malformed answer. Pure
module: no Django import.
"""

import json
from dataclasses import dataclass
from typing import Any

# Meta's limits on a list message (whatsapp.interactive: 10 rows of at most 24 characters), the
# largest form options can take; agents sits below the channel, so they are repeated here.
OPTIONS_KEY = "opcoes"
MAX_OPTIONS = 10
MAX_OPTION_CHARS = 24
# Up to these, options go out as reply buttons, not a list (Meta's limits; told to the model).
MAX_BUTTON_OPTIONS = 3
MAX_BUTTON_OPTION_CHARS = 20


class LLMResponseParseError(ValueError):
    """The raw answer is not a `{JSON}Mensagem`; the message says what is wrong."""


@dataclass(frozen=True, slots=True)
class ParsedLLMResponse:
    s: int
    json_part: dict[str, Any]
    message: str
    # The titles of ``"opcoes"``, stripped, in the model's order (() when absent or empty).
    options: tuple[str, ...] = ()


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
    return ParsedLLMResponse(
        s=code,
        json_part=obj,
        message=text[end + 1 :].lstrip(),
        options=_options(obj),
    )


def _options(obj: dict[str, Any]) -> tuple[str, ...]:
    """The ``"opcoes"`` of the object, checked (see the module docstring).

    The errors name the position of an item, never its text: they are logged, and an option
    may repeat what the customer wrote.
    """
    if OPTIONS_KEY not in obj:
        return ()
    value = obj[OPTIONS_KEY]
    if not isinstance(value, list):
        raise LLMResponseParseError(
            f"invalid 'opcoes': must be a list of texts, got {_json_type(value)}"
        )
    if len(value) > MAX_OPTIONS:
        raise LLMResponseParseError(
            f"invalid 'opcoes': {len(value)} options, at most {MAX_OPTIONS}"
        )
    titles: list[str] = []
    seen: set[str] = set()
    for number, item in enumerate(value, 1):
        if not isinstance(item, str):
            raise LLMResponseParseError(
                f"invalid 'opcoes': option {number} is {_json_type(item)}, not a text"
            )
        title = item.strip()
        if not title:
            raise LLMResponseParseError(f"invalid 'opcoes': option {number} is empty")
        if len(title) > MAX_OPTION_CHARS:
            raise LLMResponseParseError(
                f"invalid 'opcoes': option {number} has {len(title)} characters, "
                f"at most {MAX_OPTION_CHARS}"
            )
        key = " ".join(title.casefold().split())
        if key in seen:
            raise LLMResponseParseError(f"invalid 'opcoes': option {number} repeats an earlier one")
        seen.add(key)
        titles.append(title)
    return tuple(titles)


def _json_type(value: Any) -> str:
    """The JSON name of a decoded value's type (what the model wrote, in its own terms)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, dict):
        return "an object"
    return "a list"
