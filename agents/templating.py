"""Prompt templates: a dedicated Django template `Engine`, its allow-list, and its limits.

Prompt texts (built-in and overrides) are Django templates rendered with the agent's variables
(`agents/prompts/variables.py`). The engine is standalone: autoescape off (a prompt is not HTML),
no loaders (so no `{% include %}`/`{% extends %}` can reach a file), no tag libraries beyond the
built-ins. This is the only module of the prompt path that imports Django; the pure builders do
not import it.

Prompt editors are trusted with the wording, not with the worker: Django's template language can
allocate without bound (`{% lorem 2000000 w %}`, `{{ x|ljust:"300000000" }}`, nested
`{% for %}`). So a prompt template may use only what a prompt needs, and the same check runs when
the admin saves an override and before every render (a row written around the form, or saved
before this check existed, is refused at run time too):

- tags: `{% if %}` with `elif`/`else`/`endif` (at most `MAX_IF_DEPTH` nested), `{% comment %}`
  and `{# ... #}` comments;
- variables: the agent's own, by bare name (no `{{ x.attribute }}`: a lookup can call any
  method of a string), plus the literals True/False/None;
- filters: `ALLOWED_FILTERS`, each of which returns at most a few times its input whatever its
  argument;
- the template at most `PROMPT_TEMPLATE_MAX_CHARS`, the rendered text at most
  `PROMPT_RENDERED_MAX_CHARS`; rendering stops as soon as the output passes the cap, so even large
  variable values repeated many times cannot build a huge string.

`validate_prompt_template` finds what would make an override silently wrong or dangerous: a
syntax error, a variable the agent does not have (named, with its line), a tag left unclosed
(``{{ nome`` would otherwise be sent to the model as text), a construct outside the allow-list,
and anything that fails or passes the cap when rendered with the sample values or with empty/false
values (so both sides of `{% if customer_name == "" %}` are tried).
"""

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

from django.template import Context, Engine, Template, TemplateSyntaxError
from django.template.base import Node, NodeList, TextNode, Variable, VariableDoesNotExist

from compat.django_private import (
    CommentNode,
    FilterExpression,
    IfNode,
    TemplateLiteral,
    VariableNode,
)

# One limit for the stored text (the PromptOverride field uses it too) and one for the rendered
# text, which adds the variables' values (catalog, loaded packages) to it. The built-in prompts
# are about 8,000 characters.
PROMPT_TEMPLATE_MAX_CHARS = 30_000
PROMPT_RENDERED_MAX_CHARS = 60_000
MAX_IF_DEPTH = 10

ALLOWED_TAGS = ("if", "elif", "else", "endif", "comment", "endcomment")
# Plain-text filters whose output is bounded by a small multiple of their input or argument:
# none pads, repeats or joins.
ALLOWED_FILTERS = frozenset(
    {
        "capfirst",
        "default",
        "default_if_none",
        "length",
        "lower",
        "title",
        "truncatechars",
        "truncatewords",
        "upper",
        "yesno",
    }
)

_RENDER_ENGINE = Engine(autoescape=False, loaders=[], debug=False)
# Debug mode keeps line numbers on syntax errors, for the admin's message.
_CHECK_ENGINE = Engine(autoescape=False, loaders=[], debug=True)
# Names every template context resolves without being given them.
_CONTEXT_BUILTINS = frozenset({"True", "False", "None"})
# Both engines share Django's built-in filter functions: identify a compiled filter by identity.
_FILTER_NAMES: dict[Any, str] = {
    func: name
    for library in _RENDER_ENGINE.template_builtins
    for name, func in library.filters.items()
}
_ALLOWED_FILTER_FUNCS = frozenset(
    func for func, name in _FILTER_NAMES.items() if name in ALLOWED_FILTERS
)

ProblemKind = Literal[
    "syntax",
    "load_not_allowed",
    "unclosed_block",
    "misplaced_tag",
    "unknown_variable",
    "unclosed_tag",
    "render",
    "too_long",
    "rendered_too_long",
    "tag_not_allowed",
    "filter_not_allowed",
    "attribute_not_allowed",
    "too_deep",
]


class PromptTemplateError(ValueError):
    """A prompt template that cannot be compiled or rendered, or is not allowed."""


class RenderedTooLongError(PromptTemplateError):
    """The rendered text passed `PROMPT_RENDERED_MAX_CHARS` (rendering stopped there)."""


@dataclass(frozen=True, slots=True)
class TemplateProblem:
    kind: ProblemKind
    # The name of the variable, tag or filter; the lookup (`x.y`); or the error text.
    detail: str
    line: int | None = None

    def describe(self) -> str:
        """One line for logs (English; the admin form has its own translated messages)."""
        where = "" if self.line is None else f" (line {self.line})"
        return f"{self.kind}: {self.detail}{where}"


def render_prompt_template(text: str, values: Mapping[str, Any]) -> str:
    """Render a prompt template with `values`, which must hold every variable it may use.

    Raises `PromptTemplateError` when the template cannot be compiled, breaks the allow-list,
    uses a name that is not in `values`, fails to render or renders past the cap.
    """
    if len(text) > PROMPT_TEMPLATE_MAX_CHARS:
        raise PromptTemplateError(
            f"too_long: {len(text)} characters, over {PROMPT_TEMPLATE_MAX_CHARS}"
        )
    template, problems = _prepared(text, frozenset(values))
    if template is None or problems:
        raise PromptTemplateError(problems[0].describe())
    try:
        return render_bounded(template, values)
    except PromptTemplateError:
        raise
    except Exception as exc:  # a template may fail in many ways; all mean "cannot render"
        raise PromptTemplateError(f"{type(exc).__name__}: {exc}") from exc


def variables_used(text: str) -> tuple[str, ...]:
    """The variable names a template uses, in order of first use (a condition counts; empty for
    a template that does not compile)."""
    template, problems = _prepared(text, frozenset())
    if template is None:
        return ()
    return tuple(p.detail for p in problems if p.kind == "unknown_variable")


@lru_cache(maxsize=64)
def _prepared(
    text: str, names: frozenset[str]
) -> tuple[Template | None, tuple[TemplateProblem, ...]]:
    # Keyed by the text and the agent's names: an edited override is a new key, so nothing goes
    # stale, and a refused one is not compiled again on every turn.
    try:
        template = _RENDER_ENGINE.from_string(text)
    except RecursionError:  # thousands of nested blocks; the parser recurses per block
        return None, (TemplateProblem("too_deep", str(MAX_IF_DEPTH)),)
    except Exception as exc:  # TemplateSyntaxError, mostly
        return None, (TemplateProblem("syntax", f"{type(exc).__name__}: {exc}"),)
    return template, tuple(inspect_nodelist(template.nodelist, names))


def validate_prompt_template(
    text: str, allowed: Collection[str], sample_values: Mapping[str, Any]
) -> list[TemplateProblem]:
    """Problems of a template for an agent whose variables are `allowed` (empty list: fine).

    `sample_values` are stand-ins used to try a render, so a template that compiles but fails
    at render time is caught while the admin is still editing; it is rendered again with every
    value empty (False for booleans) so a branch taken only on empty values is tried too.
    """
    if len(text) > PROMPT_TEMPLATE_MAX_CHARS:
        return [TemplateProblem("too_long", str(len(text)))]
    try:
        template = _CHECK_ENGINE.from_string(text)
    except TemplateSyntaxError as exc:
        debug = getattr(exc, "template_debug", None) or {}
        return [syntax_problem(str(exc), debug.get("line"))]
    except RecursionError:
        return [TemplateProblem("too_deep", str(MAX_IF_DEPTH))]

    problems = inspect_nodelist(template.nodelist, frozenset(allowed))
    if problems:
        return problems
    for values in (sample_values, empty_values(sample_values)):
        try:
            render_bounded(template, values)
        except RenderedTooLongError:
            return [TemplateProblem("rendered_too_long", str(PROMPT_RENDERED_MAX_CHARS))]
        except Exception as exc:
            return [TemplateProblem("render", f"{type(exc).__name__}: {exc}")]
    return []


# Django's English syntax errors that an editor meets most, recognised so the admin can word them
# itself (in pt-BR, naming the tag); anything else stays "syntax" with Django's text.
_LOAD_RE = re.compile(r"^'(?P<name>[^']*)' is not a registered tag library")
_UNCLOSED_BLOCK_RE = re.compile(r"^Unclosed tag on line \d+: '(?P<name>[^']+)'")
_INVALID_TAG_RE = re.compile(r"^Invalid block tag on line \d+: '(?P<name>[^']+)'")
_INVALID_FILTER_RE = re.compile(r"^Invalid filter: '(?P<name>[^']+)'")


def syntax_problem(message: str, line: int | None) -> TemplateProblem:
    """The problem a `TemplateSyntaxError` message describes: `{% load x %}` (no library can be
    loaded), a block left open (`{% if %}` without `{% endif %}`), an allowed tag out of place
    (`{% endif %}` without its `{% if %}`), a tag or filter outside the allow-list, or else a
    plain syntax error."""
    if match := _LOAD_RE.match(message):
        return TemplateProblem("load_not_allowed", match["name"], line)
    if match := _UNCLOSED_BLOCK_RE.match(message):
        return TemplateProblem("unclosed_block", match["name"], line)
    if match := _INVALID_TAG_RE.match(message):
        name = match["name"]
        kind: ProblemKind = "misplaced_tag" if name in ALLOWED_TAGS else "tag_not_allowed"
        return TemplateProblem(kind, name, line)
    if match := _INVALID_FILTER_RE.match(message):
        return TemplateProblem("filter_not_allowed", match["name"], line)
    return TemplateProblem("syntax", message, line)


def empty_values(values: Mapping[str, Any]) -> dict[str, Any]:
    """The same variables, each empty: False for a boolean, "" for anything else."""
    return {name: (False if isinstance(value, bool) else "") for name, value in values.items()}


# --- The allow-list -----------------------------------------------------------------------------


def inspect_nodelist(nodelist: NodeList, allowed: frozenset[str]) -> list[TemplateProblem]:
    """Every problem of a compiled template: constructs outside the allow-list, unknown names,
    attribute lookups, `{% if %}` nested too deep and tags left unclosed (each named once)."""
    found = _Findings(allowed | _CONTEXT_BUILTINS)
    found.nodes(nodelist, depth=0)
    return found.problems


class _Findings:
    def __init__(self, known: frozenset[str]) -> None:
        self.known = known
        self.problems: list[TemplateProblem] = []
        self._reported: set[tuple[str, str]] = set()

    def report(self, kind: ProblemKind, detail: str, line: int | None) -> None:
        if (kind, detail) not in self._reported:
            self._reported.add((kind, detail))
            self.problems.append(TemplateProblem(kind, detail, line))

    def nodes(self, nodelist: NodeList, *, depth: int) -> None:
        for node in nodelist:
            line = _line_of(node)
            if isinstance(node, TextNode):
                self.text(node.s, line)
            elif isinstance(node, VariableNode):
                self.expression(node.filter_expression, line)
            elif isinstance(node, CommentNode):
                continue
            elif isinstance(node, IfNode):
                if depth >= MAX_IF_DEPTH:
                    self.report("too_deep", str(MAX_IF_DEPTH), line)
                    continue
                for condition, branch in node.conditions_nodelists:
                    if condition is not None:
                        self.condition(condition, line)
                    self.nodes(branch, depth=depth + 1)
            else:
                # Nothing inside a refused tag is looked at: the tag itself must go.
                self.report("tag_not_allowed", _tag_name(node), line)

    def condition(self, token: object, line: int | None) -> None:
        """An `{% if %}` condition: a smartif tree whose leaves are TemplateLiterals."""
        if isinstance(token, TemplateLiteral):
            # django-stubs declares TemplateLiteral.value as a Literal's value; the template
            # parser stores the FilterExpression it parsed there.
            self.expression(token.value, line)  # type: ignore[arg-type]
            return
        for part in (getattr(token, "first", None), getattr(token, "second", None)):
            if part is not None:
                self.condition(part, line)

    def expression(self, expression: FilterExpression, line: int | None) -> None:
        self.variable(expression.var, line)
        for func, args in expression.filters:
            if func not in _ALLOWED_FILTER_FUNCS:
                name = _FILTER_NAMES.get(func) or getattr(func, "__name__", "")
                self.report("filter_not_allowed", str(name), line)
            for is_variable, arg in args:
                if is_variable:
                    self.variable(arg, line)

    def variable(self, var: object, line: int | None) -> None:
        # A literal ("texto", 3) was resolved at compile time and is not a Variable.
        if not isinstance(var, Variable) or not var.lookups:
            return
        name = var.lookups[0]
        if name not in self.known:
            self.report("unknown_variable", name, line)
        elif len(var.lookups) > 1:
            self.report("attribute_not_allowed", ".".join(var.lookups), line)

    def text(self, text: str, line: int | None) -> None:
        for opener in ("{{", "{%"):
            index = text.find(opener)
            if index >= 0:
                where = None if line is None else line + text[:index].count("\n")
                snippet = text[index : index + 30].splitlines()[0]
                self.report("unclosed_tag", snippet, where)


def _line_of(node: Node) -> int | None:
    token = getattr(node, "token", None)
    line = getattr(token, "lineno", None)
    return line if isinstance(line, int) else None


def _tag_name(node: Node) -> str:
    token = getattr(node, "token", None)
    contents = str(getattr(token, "contents", "")).split()
    return contents[0] if contents else type(node).__name__


# --- Bounded rendering --------------------------------------------------------------------------


def render_bounded(template: Template, values: Mapping[str, Any]) -> str:
    """Render an inspected template node by node, stopping once past `PROMPT_RENDERED_MAX_CHARS`.

    Only the allowed nodes are rendered here (text, variables, comments, `{% if %}`, as
    `IfNode.render` does); Django's own `Template.render` would build the whole output first.
    """
    context = Context(dict(values), autoescape=False)
    output = _Output(PROMPT_RENDERED_MAX_CHARS)
    with context.render_context.push_state(template), context.bind_template(template):
        output.nodes(template.nodelist, context)
    return "".join(output.parts)


class _Output:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.size = 0
        self.parts: list[str] = []

    def nodes(self, nodelist: NodeList, context: Context) -> None:
        for node in nodelist:
            if isinstance(node, IfNode):
                self.branch(node, context)
            elif isinstance(node, (TextNode, VariableNode, CommentNode)):
                self.add(str(node.render_annotated(context)))
            else:
                raise PromptTemplateError(f"tag_not_allowed: {_tag_name(node)}")

    def branch(self, node: IfNode, context: Context) -> None:
        for condition, nodelist in node.conditions_nodelists:
            if condition is None:  # else
                matched = True
            else:
                try:
                    # django-stubs declares a dict; Django's own IfNode passes the Context.
                    matched = bool(condition.eval(context))  # type: ignore[arg-type]
                except VariableDoesNotExist:
                    matched = False
            if matched:
                self.nodes(nodelist, context)
                return

    def add(self, part: str) -> None:
        self.size += len(part)
        if self.size > self.limit:
            raise RenderedTooLongError(f"rendered_too_long: over {self.limit} characters")
        self.parts.append(part)
