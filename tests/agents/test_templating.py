"""Prompt templates: the dedicated engine and the checks an override must pass."""

import inspect
import time
from typing import Any

import pytest
from django.template import Engine

from agents.prompts.variables import (
    VARIABLES,
    prompt_variables,
    sample_variables,
    variable_names,
    variables_for,
)
from agents.states import PROMPT_AGENTS, AgentName
from agents.templating import (
    ALLOWED_FILTERS,
    ALLOWED_TAGS,
    MAX_IF_DEPTH,
    PROMPT_TEMPLATE_MAX_CHARS,
    ProblemKind,
    PromptTemplateError,
    TemplateProblem,
    empty_values,
    render_prompt_template,
    validate_prompt_template,
)
from tests.helpers.fake_collaborators import TEMPLATE_ATTACKS, make_inputs, make_session

ALLOWED = {"agent_name", "company_name", "is_open", "customer_name"}
SAMPLES = {"agent_name": "Lia", "company_name": "Lab", "is_open": True, "customer_name": "Ana"}


def check(text: str) -> list[TemplateProblem]:
    return validate_prompt_template(text, ALLOWED, SAMPLES)


def test_rendering_does_not_escape_html_or_quotes() -> None:
    rendered = render_prompt_template(
        '<b>{{ agent_name }}</b> & "{{ company_name }}"',
        {"agent_name": "<Lia & 'Co'>", "company_name": 'Lab "Sul"'},
    )

    assert rendered == '<b><Lia & \'Co\'></b> & "Lab "Sul""'


def test_json_in_a_template_is_plain_text() -> None:
    text = '{"s":3,"servico":"X","qualification_data":{"a":1}}\n{"s":1}Olá, {{ agent_name }}!'

    assert render_prompt_template(text, {"agent_name": "Lia"}) == (
        '{"s":3,"servico":"X","qualification_data":{"a":1}}\n{"s":1}Olá, Lia!'
    )


def test_if_blocks_and_filters_work() -> None:
    text = (
        "{% if is_open %}aberto{% else %}fechado{% endif %} {{ customer_name|default:'cliente' }}"
    )

    assert render_prompt_template(text, {"is_open": False, "customer_name": ""}) == (
        "fechado cliente"
    )


def test_a_variable_not_given_fails_at_runtime() -> None:
    """A saved override naming a variable the agent no longer has falls back, not renders ""."""
    with pytest.raises(PromptTemplateError, match=r"^unknown_variable: nada \(line 1\)$"):
        render_prompt_template("a{{ nada }}b", {})


def test_a_broken_template_raises_prompt_template_error() -> None:
    with pytest.raises(PromptTemplateError, match="TemplateSyntaxError: Unclosed tag on line 1"):
        render_prompt_template("{% if x %}sem fim", {"x": True})


def test_include_cannot_reach_any_file() -> None:
    with pytest.raises(PromptTemplateError, match=r"^tag_not_allowed: include \(line 1\)$"):
        render_prompt_template('{% include "admin/base.html" %}', {})


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Olá, {{ agent_name }} da {{ company_name }}.", []),
        ("{% if is_open %}{{ agent_name|upper }}{% endif %}", []),
        (
            "{% if not is_open %}x{% elif customer_name == 'Ana' %}y{% else %}z{% endif %}",
            [],
        ),
        ("{# comentário #}{{ True }}{% comment %}{% lorem 9 %}{% endcomment %}", []),
        (
            "{{ customer_name|default:'cliente'|capfirst }} {{ is_open|yesno:'sim,não' }}",
            [],
        ),
        (
            "{% for x in 'ab' %}{{ x }}{{ forloop.counter }}{% endfor %}",
            [TemplateProblem("tag_not_allowed", "for", 1)],
        ),
        (
            "{% with nome=customer_name %}{{ nome }}{% endwith %}",
            [TemplateProblem("tag_not_allowed", "with", 1)],
        ),
        (
            "{{ customer_name.upper }}\n{% if agent_name.zfill %}{% endif %}",
            [
                TemplateProblem("attribute_not_allowed", "customer_name.upper", 1),
                TemplateProblem("attribute_not_allowed", "agent_name.zfill", 2),
            ],
        ),
        (
            "{% if agent_name|center:'90000000' %}{% endif %}{{ x|default:y }}",
            [
                TemplateProblem("filter_not_allowed", "center", 1),
                TemplateProblem("unknown_variable", "x", 1),
                TemplateProblem("unknown_variable", "y", 1),
            ],
        ),
        (
            "Linha 1\nOlá {{ nome_do_cliente }}",
            [TemplateProblem("unknown_variable", "nome_do_cliente", 2)],
        ),
        (
            "{% if horario %}x{% endif %}",
            [TemplateProblem("unknown_variable", "horario", 1)],
        ),
        (
            "{{ agent_name|default:apelido }}",
            [TemplateProblem("unknown_variable", "apelido", 1)],
        ),
        (
            "{{ a }} {{ a }} {{ b.c }}",
            [
                TemplateProblem("unknown_variable", "a", 1),
                TemplateProblem("unknown_variable", "b", 1),
            ],
        ),
        (
            "ok\n{% if is_open %}\nsem fim",
            [TemplateProblem("unclosed_block", "if", 2)],
        ),
        (
            "{% endif %}",
            [TemplateProblem("misplaced_tag", "endif", 1)],
        ),
        ("{{ }}", [TemplateProblem("syntax", "Empty variable tag on line 1", 1)]),
        (
            "{% load static %}",
            [TemplateProblem("load_not_allowed", "static", 1)],
        ),
        ("a\n{% lorem2 %}", [TemplateProblem("tag_not_allowed", "lorem2", 2)]),
        ("a\n\n{{ x|nada }}", [TemplateProblem("filter_not_allowed", "nada", 3)]),
        (
            "{% if is_open x %}a{% endif %}",
            [TemplateProblem("syntax", "Unused 'x' at end of if expression.", 1)],
        ),
        ("Olá\n\n{{ agent_name", [TemplateProblem("unclosed_tag", "{{ agent_name", 3)]),
        ("{% if is_open", [TemplateProblem("unclosed_tag", "{% if is_open", 1)]),
        (
            '{% include "x.txt" %}',
            [TemplateProblem("tag_not_allowed", "include", 1)],
        ),
    ],
)
def test_validate_prompt_template(text: str, expected: list[TemplateProblem]) -> None:
    assert check(text) == expected


@pytest.mark.parametrize("agent", PROMPT_AGENTS)
def test_every_variable_of_an_agent_is_accepted_and_documented(agent: AgentName) -> None:
    text = " ".join("{{ " + name + " }}" for name in sorted(variable_names(agent)))

    assert validate_prompt_template(text, variable_names(agent), sample_variables(agent)) == []
    assert all(v.description.strip() for v in variables_for(agent))


@pytest.mark.parametrize(
    ("agent", "names"),
    [
        (AgentName.TRIAGEM, {"segments", "intents"}),
        (
            AgentName.QUALIFICACAO,
            {"segment", "intent", "service", "services", "technical_data"},
        ),
        (
            AgentName.COLETA,
            {
                "segment",
                "intent",
                "service",
                "technical_data",
                "customer_phone",
                "registration_data",
            },
        ),
    ],
)
def test_each_agent_has_the_common_variables_and_its_own(agent: AgentName, names: set[str]) -> None:
    common = {
        "agent_name",
        "company_name",
        "instance_name",
        "brand_context",
        "business_hours",
        "is_open",
        "now",
        "customer_name",
        "kb_catalog",
        "loaded_packages",
    }

    assert variable_names(agent) == common | names


def test_variable_names_are_unique() -> None:
    names = [v.name for v in VARIABLES]

    assert len(names) == len(set(names))


def test_variable_values_for_a_collection_call() -> None:
    values = prompt_variables(make_inputs(AgentName.COLETA, session=make_session(AgentName.COLETA)))

    assert values["agent_name"] == "Lia"
    assert values["is_open"] is True
    assert values["business_hours"] == "aberto agora"
    assert values["customer_phone"] == "+55 19 98765-4321"
    assert values["registration_data"] == "- nome: Marina Souza"
    assert values["service"] == "ANALISE_AGUA_POTABILIDADE — Análise de potabilidade da água"
    assert values["loaded_packages"] == "nenhum pacote carregado"
    assert "segments" not in values


# --- The allow-list and the caps ------------------------------------------------------------------

# Under a second by far: the attacks take minutes or the worker's memory when they run.
FAST_SECONDS = 0.25


@pytest.mark.parametrize(("text", "problem"), TEMPLATE_ATTACKS.values(), ids=TEMPLATE_ATTACKS)
def test_each_attack_is_refused_when_validated_quickly(
    text: str, problem: tuple[ProblemKind, str, int]
) -> None:
    started = time.perf_counter()
    problems = check(text)
    elapsed = time.perf_counter() - started

    assert problems == [TemplateProblem(*problem)]
    assert elapsed < FAST_SECONDS


@pytest.mark.parametrize(("text", "problem"), TEMPLATE_ATTACKS.values(), ids=TEMPLATE_ATTACKS)
def test_each_attack_is_refused_at_render_time_quickly(
    text: str, problem: tuple[str, str, int]
) -> None:
    kind, name, line = problem
    started = time.perf_counter()
    with pytest.raises(PromptTemplateError) as raised:
        render_prompt_template(text, {**SAMPLES, "customer_name": ""})
    elapsed = time.perf_counter() - started

    assert str(raised.value) == f"{kind}: {name} (line {line})"
    assert elapsed < FAST_SECONDS


def test_the_allow_list_is_exactly_this() -> None:
    assert {
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
    } == ALLOWED_FILTERS
    assert ALLOWED_TAGS == ("if", "elif", "else", "endif", "comment", "endcomment")


def _builtin_filters() -> dict[str, Any]:
    engine = Engine(loaders=[])
    return {name: f for lib in engine.template_builtins for name, f in lib.filters.items()}


def _with_arguments(name: str, func: Any) -> str:
    """`{{ agent_name|name }}`, with an argument when the filter takes one."""
    parameters = inspect.signature(func).parameters
    return (
        f'{{{{ agent_name|{name}:"3" }}}}'
        if len(parameters) > 1
        else f"{{{{ agent_name|{name} }}}}"
    )


@pytest.mark.parametrize(
    "name", sorted(set(_builtin_filters()) - ALLOWED_FILTERS), ids=lambda name: name
)
def test_every_other_builtin_filter_is_refused(name: str) -> None:
    text = _with_arguments(name, _builtin_filters()[name])

    assert check(text) == [TemplateProblem("filter_not_allowed", name, 1)]
    with pytest.raises(PromptTemplateError, match=f"^filter_not_allowed: {name} "):
        render_prompt_template(text, SAMPLES)


@pytest.mark.parametrize("name", sorted(ALLOWED_FILTERS))
def test_every_allowed_filter_is_accepted(name: str) -> None:
    assert check(_with_arguments(name, _builtin_filters()[name])) == []


# One use of every built-in tag Django offers besides if/comment (a new Django tag fails the
# coverage assertion below until it is listed and refused here).
REFUSED_TAGS = {
    "autoescape": "{% autoescape off %}{{ agent_name }}{% endautoescape %}",
    "block": "{% block a %}x{% endblock %}",
    "csrf_token": "{% csrf_token %}",
    "cycle": "{% cycle 'a' 'b' %}",
    "debug": "{% debug %}",
    "extends": '{% extends "base.html" %}',
    "filter": "{% filter upper %}x{% endfilter %}",
    "firstof": "{% firstof agent_name company_name %}",
    "for": "{% for c in agent_name %}{{ c }}{% endfor %}",
    "ifchanged": "{% ifchanged %}x{% endifchanged %}",
    "include": '{% include "x.txt" %}',
    "load": "{% load %}",
    "lorem": "{% lorem 2000000 w %}",
    "now": '{% now "Y" %}',
    "querystring": "{% querystring %}",
    "regroup": "{% regroup agent_name by x as y %}",
    "resetcycle": "{% cycle 'a' 'b' %}{% resetcycle %}",
    "spaceless": "{% spaceless %}x{% endspaceless %}",
    "templatetag": "{% templatetag openblock %}",
    "url": '{% url "admin:index" %}',
    "verbatim": "{% verbatim %}{{ x }}{% endverbatim %}",
    "widthratio": "{% widthratio 1 1 100000000 %}",
    "with": "{% with a=agent_name %}{{ a }}{% endwith %}",
}


def test_the_refused_tags_table_covers_every_builtin_tag() -> None:
    engine = Engine(loaders=[])
    tags = {name for lib in engine.template_builtins for name in lib.tags}

    assert tags - set(REFUSED_TAGS) == {"if", "comment"}


@pytest.mark.parametrize(("name", "text"), REFUSED_TAGS.items(), ids=REFUSED_TAGS)
def test_every_other_builtin_tag_is_refused(name: str, text: str) -> None:
    problems = check(text)

    # resetcycle needs a cycle before it, which is refused too.
    assert problems[-1] == TemplateProblem("tag_not_allowed", name, 1)
    assert {p.kind for p in problems} == {"tag_not_allowed"}
    with pytest.raises(PromptTemplateError, match=f"^tag_not_allowed: {problems[0].detail} "):
        render_prompt_template(text, SAMPLES)


def test_if_blocks_nested_too_deep_are_refused() -> None:
    allowed = "{% if is_open %}" * MAX_IF_DEPTH + "x" + "{% endif %}" * MAX_IF_DEPTH
    deeper = "{% if is_open %}" * (MAX_IF_DEPTH + 1) + "x" + "{% endif %}" * (MAX_IF_DEPTH + 1)

    assert check(allowed) == []
    assert check(deeper) == [TemplateProblem("too_deep", "10", 1)]
    assert render_prompt_template(allowed, SAMPLES) == "x"
    with pytest.raises(PromptTemplateError, match=r"^too_deep: 10 \(line 1\)$"):
        render_prompt_template(deeper, SAMPLES)


def test_thousands_of_nested_blocks_are_refused_without_a_crash() -> None:
    text = "{%if is_open%}" * 1_300 + "{%endif%}" * 1_300

    # The parser itself gives up (RecursionError) before the allow-list walks the blocks.
    assert [(p.kind, p.detail) for p in check(text)] == [("too_deep", "10")]
    with pytest.raises(PromptTemplateError, match=r"^too_deep: 10"):
        render_prompt_template(text, SAMPLES)


def test_a_template_over_the_length_cap_is_refused_before_it_is_compiled() -> None:
    at_cap = "{{ agent_name }}" + "x" * (PROMPT_TEMPLATE_MAX_CHARS - 16)
    over = at_cap + "x"

    assert check(at_cap) == []
    assert check(over) == [TemplateProblem("too_long", str(PROMPT_TEMPLATE_MAX_CHARS + 1))]
    with pytest.raises(PromptTemplateError, match=r"^too_long: 30001 characters, over 30000$"):
        render_prompt_template(over, SAMPLES)


def test_rendering_stops_at_the_rendered_cap() -> None:
    text = "{{ agent_name }}\n" * 1_000
    values = {**SAMPLES, "agent_name": "x" * 59}  # 60 characters per line

    assert render_prompt_template(text, values) == ("x" * 59 + "\n") * 1_000
    started = time.perf_counter()
    with pytest.raises(PromptTemplateError, match=r"^rendered_too_long: over 60000 characters$"):
        render_prompt_template(text, {**SAMPLES, "agent_name": "x" * 10_000_000})
    assert time.perf_counter() - started < FAST_SECONDS


def test_validation_renders_with_the_samples_past_the_cap() -> None:
    text = "{{ agent_name }}" * 1_000

    problems = validate_prompt_template(text, ALLOWED, {**SAMPLES, "agent_name": "x" * 61})

    assert problems == [TemplateProblem("rendered_too_long", "60000")]


def test_validation_renders_again_with_empty_values() -> None:
    """The branch only empty values take passes the cap (upper turns "ﬃ" into "FFI")."""
    text = (
        '{% if customer_name == "" %}{{ customer_name|default:"'
        + "ﬃ" * 25_000
        + '"|upper }}{% endif %}'
    )

    assert render_prompt_template(text, SAMPLES) == ""
    assert check(text) == [TemplateProblem("rendered_too_long", "60000")]


def test_empty_values_keep_booleans_boolean() -> None:
    assert empty_values(SAMPLES) == {
        "agent_name": "",
        "company_name": "",
        "is_open": False,
        "customer_name": "",
    }
