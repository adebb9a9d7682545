"""The built-in prompts: real templates, examples generated from the code table."""

import ast
import json
import re
from pathlib import Path

import pytest
from django.template import Engine

from agents.codes import CODE_TABLE, Code, MessageRule, states_of
from agents.contract import parse_llm_response
from agents.prompts import BUILTIN_TEMPLATES, builtin_template, coleta, qualificacao, triagem
from agents.prompts.common import (
    MOTIVE_GUIDE,
    Example,
    agent_codes,
    examples_section,
    format_answer,
    handoff_section,
)
from agents.prompts.variables import prompt_variables, sample_variables, variable_names
from agents.states import PROMPT_AGENTS, AgentName, HandoffMotive
from agents.templating import (
    PROMPT_RENDERED_MAX_CHARS,
    PROMPT_TEMPLATE_MAX_CHARS,
    inspect_nodelist,
    render_prompt_template,
    validate_prompt_template,
)
from tests.helpers.fake_collaborators import make_inputs

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = {
    AgentName.TRIAGEM: triagem.EXAMPLES,
    AgentName.QUALIFICACAO: qualificacao.EXAMPLES,
    AgentName.COLETA: coleta.EXAMPLES,
}


def test_every_prompt_agent_has_a_builtin_template() -> None:
    assert set(BUILTIN_TEMPLATES) == set(PROMPT_AGENTS)
    with pytest.raises(KeyError):
        builtin_template(AgentName.SUMMARY)


@pytest.mark.parametrize("agent", PROMPT_AGENTS)
def test_builtin_template_is_a_valid_template_with_only_the_agents_variables(
    agent: AgentName,
) -> None:
    problems = validate_prompt_template(
        builtin_template(agent), variable_names(agent), sample_variables(agent)
    )

    assert problems == []


@pytest.mark.parametrize("agent", PROMPT_AGENTS)
def test_builtin_template_passes_the_allow_list_and_renders_under_the_caps(
    agent: AgentName,
) -> None:
    text = builtin_template(agent)
    compiled = Engine(autoescape=False, loaders=[]).from_string(text)

    problems = inspect_nodelist(compiled.nodelist, variable_names(agent))
    rendered = render_prompt_template(text, prompt_variables(make_inputs(agent)))

    assert problems == []
    assert len(text) < PROMPT_TEMPLATE_MAX_CHARS
    assert len(rendered) < PROMPT_RENDERED_MAX_CHARS
    assert "{{" not in rendered


def test_triagem_does_not_point_the_model_at_a_list_of_strategic_companies() -> None:
    text = builtin_template(AgentName.TRIAGEM) + handoff_section()

    assert "a lista está no contexto" not in text
    assert "listadas no contexto" not in text
    assert "Nunca diga, confirme nem suponha quais empresas são essas." in text
    assert "{{ strategic_companies }}" not in text


@pytest.mark.parametrize("agent", PROMPT_AGENTS)
def test_builtin_examples_cover_exactly_the_codes_the_agent_may_use(agent: AgentName) -> None:
    allowed = {
        spec.code for spec in CODE_TABLE.values() if spec.allowed_states & set(states_of(agent))
    }

    assert set(EXAMPLES[agent]) == allowed
    assert [spec.code for spec in agent_codes(agent)] == sorted(allowed)


@pytest.mark.parametrize(
    ("agent", "codes"),
    [
        (AgentName.TRIAGEM, [1, 2, 8, 98, 99]),
        (AgentName.QUALIFICACAO, [1, 3, 7, 8, 98, 99]),
        (AgentName.COLETA, [1, 4, 5, 6, 7, 8, 98, 99]),
    ],
)
def test_rendered_examples_are_valid_contract_answers_for_the_agents_codes(
    agent: AgentName, codes: list[int]
) -> None:
    rendered = render_prompt_template(
        builtin_template(agent), {**sample_variables(agent), "agent_name": "Lia"}
    )
    section = rendered.split("## Exemplos de respostas válidas", 1)[1]
    # An answer starts with `{"s":` at the start of a line and runs to the next blank line.
    answers = re.findall(r'^(\{"s":.*?)(?=\n\n|\n###|\Z)', section, re.MULTILINE | re.DOTALL)

    parsed = [parse_llm_response(answer) for answer in answers]

    assert sorted({p.s for p in parsed}) == codes
    for answer in parsed:
        spec = CODE_TABLE[Code(answer.s)]
        if spec.message is MessageRule.IGNORED:
            assert answer.message == ""
        else:
            assert answer.message.strip() != ""
        for field_text in spec.required_fields:
            key = re.match(r'"(\w+)"', field_text)
            assert key is not None
            assert key.group(1) in answer.json_part


def test_handoff_examples_use_only_known_motives() -> None:
    motives = {m.value for m in HandoffMotive}
    for examples in EXAMPLES.values():
        for example in examples[Code.HANDOFF]:
            assert example.data["motivo"] in motives


def test_the_handoff_section_explains_every_motive() -> None:
    section = handoff_section()

    assert set(MOTIVE_GUIDE) == set(HandoffMotive)
    for motive in HandoffMotive:
        assert f'- "{motive.value}": ' in section


@pytest.mark.parametrize("agent", PROMPT_AGENTS)
def test_builtin_prompts_teach_the_kb_request_and_the_tone(agent: AgentName) -> None:
    text = builtin_template(agent)

    assert "## Base de conhecimento (código 99)" in text
    assert '"context_needed"' in text
    assert "Faça uma pergunta por vez" in text
    assert "Não invente nada." in text
    assert "{{ agent_name }}" in text


def test_format_answer_writes_compact_json_then_the_message() -> None:
    spec = CODE_TABLE[Code.RESPOND]

    answer = format_answer(spec, Example("x", {"segmento": "AMBIENTAL"}, "Olá!"))

    assert answer == '{"s":1,"segmento":"AMBIENTAL"}Olá!'
    assert json.loads(answer[: answer.index("}") + 1]) == {"s": 1, "segmento": "AMBIENTAL"}


@pytest.mark.parametrize(
    ("code", "example", "error"),
    [
        (Code.RESPOND, Example("x"), "example for code 1 needs a message"),
        (Code.HANDOFF, Example("x", {"motivo": "outro"}, "Tchau"), "must end at the JSON"),
    ],
)
def test_format_answer_refuses_an_example_the_code_table_forbids(
    code: Code, example: Example, error: str
) -> None:
    with pytest.raises(ValueError, match=error):
        format_answer(CODE_TABLE[code], example)


def test_examples_section_refuses_a_missing_or_a_forbidden_code() -> None:
    complete: dict[Code, tuple[Example, ...]] = dict(triagem.EXAMPLES)
    missing: dict[Code, tuple[Example, ...]] = {
        k: v for k, v in complete.items() if k is not Code.END
    }
    forbidden = {**complete, Code.TO_COLLECTION: (Example("x", {"servico": "X"}),)}

    with pytest.raises(ValueError, match="no example for code 8"):
        examples_section(AgentName.TRIAGEM, missing)
    with pytest.raises(ValueError, match=r"codes it may not use: \[<Code.TO_COLLECTION: 3>\]"):
        examples_section(AgentName.TRIAGEM, forbidden)


def test_coleta_examples_name_the_stage_of_each_code() -> None:
    text = builtin_template(AgentName.COLETA)

    assert "### Código 4 (etapa: coleta de dados): " in text
    assert "### Código 5 (etapa: confirmação): " in text
    assert "### Código 1 (etapa: coleta de dados ou confirmação): " in text


PURE_MODULES = [
    "agents/business_hours.py",
    "agents/guards.py",
    "agents/history.py",
    "agents/sources.py",
    "agents/strategic_companies.py",
    *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "agents" / "prompts").glob("*.py")),
]


@pytest.mark.parametrize("path", PURE_MODULES)
def test_the_prompt_core_does_not_import_django(path: str) -> None:
    tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
    imported = {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    } | {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}

    assert (
        sorted(name for name in imported if name.split(".")[0] in {"django", "conversations"}) == []
    )
