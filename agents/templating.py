"""Prompt templates: a dedicated Django template `Engine`, and the check an override must pass.

Prompt texts (built-in and overrides) are Django templates rendered with the agent's variables
(`agents/prompts/variables.py`). The engine is standalone: autoescape off (a prompt is not HTML),
no loaders (so no `{% include %}`/`{% extends %}` can reach a file), no tag libraries beyond the
built-ins. This is the only module of the prompt path that imports Django; the pure builders do
not import it.

`validate_prompt_template` finds what would make an override silently wrong: a syntax error, a
variable the agent does not have (named, with its line), a tag left unclosed (``{{ nome`` would
otherwise be sent to the model as text) and anything that fails when rendered.
"""

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

from django.template import Context, Engine, Template, TemplateSyntaxError
from django.template.base import FilterExpression, Node, NodeList, TextNode, Variable
from django.template.defaulttags import ForNode, WithNode
from django.template.smartif import TokenBase

_RENDER_ENGINE = Engine(autoescape=False, loaders=[], debug=False)
# Debug mode keeps line numbers on syntax errors, for the admin's message.
_CHECK_ENGINE = Engine(autoescape=False, loaders=[], debug=True)
# Names every template context resolves without being given them.
_CONTEXT_BUILTINS = frozenset({"True", "False", "None"})

ProblemKind = Literal["syntax", "unknown_variable", "unclosed_tag", "render"]


class PromptTemplateError(ValueError):
    """A prompt template that cannot be compiled or rendered."""


@dataclass(frozen=True, slots=True)
class TemplateProblem:
    kind: ProblemKind
    # The unknown variable's name, or the error text.
    detail: str
    line: int | None = None


@lru_cache(maxsize=64)
def _compiled(text: str) -> Template:
    # Keyed by the text itself: an edited override is a new key, so nothing goes stale.
    return _RENDER_ENGINE.from_string(text)


def render_prompt_template(text: str, values: Mapping[str, Any]) -> str:
    """Render a prompt template; raises `PromptTemplateError` when it cannot be."""
    try:
        template = _compiled(text)
        return str(template.render(Context(dict(values), autoescape=False)))
    except Exception as exc:  # a template may fail in many ways; all mean "cannot render"
        raise PromptTemplateError(f"{type(exc).__name__}: {exc}") from exc


def validate_prompt_template(
    text: str, allowed: Collection[str], sample_values: Mapping[str, Any]
) -> list[TemplateProblem]:
    """Problems of a template for an agent whose variables are `allowed` (empty list: fine).

    `sample_values` are stand-ins used to try a render, so a template that compiles but fails
    at render time (e.g. an `{% include %}`) is caught while the admin is still editing.
    """
    try:
        template = _CHECK_ENGINE.from_string(text)
    except TemplateSyntaxError as exc:
        debug = getattr(exc, "template_debug", None) or {}
        return [TemplateProblem("syntax", str(exc), debug.get("line"))]

    problems: list[TemplateProblem] = []
    usages: list[tuple[str, int | None]] = []
    local_names: set[str] = set()
    unclosed: list[TemplateProblem] = []
    _walk(template.nodelist, None, usages, local_names, unclosed, set())
    known = set(allowed) | local_names | _CONTEXT_BUILTINS
    reported: set[str] = set()
    for name, line in usages:
        if name not in known and name not in reported:
            reported.add(name)
            problems.append(TemplateProblem("unknown_variable", name, line))
    problems.extend(unclosed)
    if problems:
        return problems
    try:
        template.render(Context(dict(sample_values), autoescape=False))
    except Exception as exc:
        return [TemplateProblem("render", f"{type(exc).__name__}: {exc}")]
    return []


def _walk(
    obj: object,
    line: int | None,
    usages: list[tuple[str, int | None]],
    local_names: set[str],
    unclosed: list[TemplateProblem],
    seen: set[int],
) -> None:
    """Collect every variable root name used anywhere in a compiled template.

    Walks nodes generically (their FilterExpressions, smartif conditions and child node lists),
    so `{% if %}`, `{% for %}`, `{% with %}` and filter arguments are all covered. Names bound by
    `for`/`with` are recorded as local.
    """
    if id(obj) in seen:
        return
    seen.add(id(obj))
    if isinstance(obj, FilterExpression):
        _use(obj.var, line, usages)
        for _func, args in obj.filters:
            for is_variable, arg in args:
                if is_variable:
                    _use(arg, line, usages)
        return
    if isinstance(obj, Variable):
        _use(obj, line, usages)
        return
    if isinstance(obj, (list, tuple, NodeList)):
        for item in obj:
            _walk(item, line, usages, local_names, unclosed, seen)
        return
    if isinstance(obj, dict):
        for item in obj.values():
            _walk(item, line, usages, local_names, unclosed, seen)
        return
    if isinstance(obj, Node):
        token = getattr(obj, "token", None)
        line = getattr(token, "lineno", None) or line
        if isinstance(obj, TextNode):
            _check_text(obj.s, line, unclosed)
            return
        if isinstance(obj, ForNode):
            local_names.update(obj.loopvars)
            local_names.add("forloop")
        if isinstance(obj, WithNode):
            local_names.update(obj.extra_context)
        for key, value in vars(obj).items():
            if key not in ("token", "origin"):
                _walk(value, line, usages, local_names, unclosed, seen)
        return
    if isinstance(obj, TokenBase):  # `{% if %}` conditions (literals and operators)
        for value in vars(obj).values():
            _walk(value, line, usages, local_names, unclosed, seen)


def _use(var: object, line: int | None, usages: list[tuple[str, int | None]]) -> None:
    lookups = getattr(var, "lookups", None) if isinstance(var, Variable) else None
    if lookups:
        usages.append((lookups[0], line))


def _check_text(text: str, line: int | None, unclosed: list[TemplateProblem]) -> None:
    for opener in ("{{", "{%"):
        index = text.find(opener)
        if index >= 0:
            where = None if line is None else line + text[:index].count("\n")
            snippet = text[index : index + 30].splitlines()[0]
            unclosed.append(TemplateProblem("unclosed_tag", snippet, where))
