"""Prompt templates: the dedicated engine and the checks an override must pass."""

import pytest

from agents.prompts.variables import (
    VARIABLES,
    prompt_variables,
    sample_variables,
    variable_names,
    variables_for,
)
from agents.states import PROMPT_AGENTS, AgentName
from agents.templating import (
    PromptTemplateError,
    TemplateProblem,
    render_prompt_template,
    validate_prompt_template,
)
from tests.agents.support import make_inputs, make_session

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


def test_an_unknown_variable_renders_empty_at_runtime() -> None:
    assert render_prompt_template("a{{ nada }}b", {}) == "ab"


def test_a_broken_template_raises_prompt_template_error() -> None:
    with pytest.raises(PromptTemplateError, match="TemplateSyntaxError: Unclosed tag on line 1"):
        render_prompt_template("{% if x %}sem fim", {})


def test_include_cannot_reach_any_file() -> None:
    with pytest.raises(PromptTemplateError, match=r"TemplateDoesNotExist: admin/base\.html"):
        render_prompt_template('{% include "admin/base.html" %}', {})


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Olá, {{ agent_name }} da {{ company_name }}.", []),
        ("{% if is_open %}{{ agent_name|upper }}{% endif %}", []),
        ("{% for x in 'ab' %}{{ x }}{{ forloop.counter }}{% endfor %}", []),
        ("{% with nome=customer_name %}{{ nome }}{% endwith %}", []),
        ("{# comentário #}{{ True }}", []),
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
            [
                TemplateProblem(
                    "syntax",
                    "Unclosed tag on line 2: 'if'. Looking for one of: elif, else, endif.",
                    2,
                )
            ],
        ),
        (
            "{% endif %}",
            [
                TemplateProblem(
                    "syntax",
                    "Invalid block tag on line 1: 'endif'. Did you forget to register or load "
                    "this tag?",
                    1,
                )
            ],
        ),
        ("{{ }}", [TemplateProblem("syntax", "Empty variable tag on line 1", 1)]),
        (
            "{% load static %}",
            [
                TemplateProblem(
                    "syntax", "'static' is not a registered tag library. Must be one of:\n", 1
                )
            ],
        ),
        ("Olá\n\n{{ agent_name", [TemplateProblem("unclosed_tag", "{{ agent_name", 3)]),
        ("{% if is_open", [TemplateProblem("unclosed_tag", "{% if is_open", 1)]),
        (
            '{% include "x.txt" %}',
            [TemplateProblem("render", "TemplateDoesNotExist: x.txt")],
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
        (
            AgentName.TRIAGEM,
            {"segments", "intents", "strategic_companies"},
        ),
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
