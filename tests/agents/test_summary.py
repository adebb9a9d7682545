"""The operational summary: its call, and the tolerant parser on good, partial and bad input."""

import json

import pytest

from agents.llm import ChatMessage, LLMCallResult, LLMTimeoutError
from agents.summary import (
    SUMMARY_FIELDS,
    SUMMARY_INSTRUCTIONS,
    OperationalSummary,
    SummaryFacts,
    SummaryGeneration,
    TranscriptLine,
    build_summary_input,
    generate_operational_summary,
    parse_operational_summary,
)
from tests.helpers.fake_collaborators import FakeLLM

FULL = {
    "motivo_encerramento": "Cliente confirmou os dados",
    "servico_identificado": "AGUA_POTABILIDADE",
    "segmento": "AMBIENTAL",
    "pontos_chave": ["Poço artesiano", "3 amostras"],
    "dados_coletados": {"tipo_amostra": "poço", "quantidade_amostras": 3},
    "proxima_acao": "Enviar orçamento",
    "resumo_texto": "Ana quer analisar 3 amostras de poço.",
}
FULL_SUMMARY = OperationalSummary(
    closing_reason="Cliente confirmou os dados",
    identified_service="AGUA_POTABILIDADE",
    segment="AMBIENTAL",
    key_points=("Poço artesiano", "3 amostras"),
    collected_data={"tipo_amostra": "poço", "quantidade_amostras": 3},
    next_action="Enviar orçamento",
    summary_text="Ana quer analisar 3 amostras de poço.",
)
DEFAULTS = OperationalSummary(
    closing_reason="qualified_lead",
    identified_service="SOLO_METAIS",
    segment="AMBIENTAL",
    collected_data={"nome": "Ana"},
)


def test_the_seven_fields() -> None:
    assert SUMMARY_FIELDS == (
        "motivo_encerramento",
        "servico_identificado",
        "segmento",
        "pontos_chave",
        "dados_coletados",
        "proxima_acao",
        "resumo_texto",
    )


def test_a_complete_summary_is_read_as_is() -> None:
    assert parse_operational_summary(json.dumps(FULL)) == FULL_SUMMARY


@pytest.mark.parametrize(
    "raw",
    [
        f"```json\n{json.dumps(FULL)}\n```",
        f"```\n{json.dumps(FULL, indent=2)}\n```\n",
        f"  \n{json.dumps(FULL)}  ",
        f"Segue o resumo:\n{json.dumps(FULL)}\nQualquer dúvida, avise.",
        f"```json\n{json.dumps(FULL)}",
    ],
    ids=["json-fence", "bare-fence", "whitespace", "prose-around", "unclosed-fence"],
)
def test_fences_and_surrounding_text_are_stripped(raw: str) -> None:
    assert parse_operational_summary(raw) == FULL_SUMMARY


def test_a_partial_summary_takes_the_missing_fields_from_the_defaults() -> None:
    raw = json.dumps({"resumo_texto": "Cliente pediu orçamento.", "servico_identificado": ""})

    assert parse_operational_summary(raw, defaults=DEFAULTS) == OperationalSummary(
        closing_reason="qualified_lead",
        identified_service="SOLO_METAIS",
        segment="AMBIENTAL",
        collected_data={"nome": "Ana"},
        summary_text="Cliente pediu orçamento.",
    )


def test_wrong_types_are_normalised() -> None:
    raw = json.dumps(
        {
            "motivo_encerramento": ["pedido do cliente", "fora do horário"],
            "servico_identificado": None,
            "segmento": 7,
            "pontos_chave": "- Poço artesiano\n- 3 amostras\n\n• Urgente",
            "dados_coletados": "tipo: poço",
            "proxima_acao": {"acao": "ligar"},
            "resumo_texto": True,
        }
    )

    assert parse_operational_summary(raw) == OperationalSummary(
        closing_reason="pedido do cliente; fora do horário",
        identified_service="",
        segment="7",
        key_points=("Poço artesiano", "3 amostras", "Urgente"),
        collected_data={"valor": "tipo: poço"},
        next_action='{"acao": "ligar"}',
        summary_text="sim",
    )


@pytest.mark.parametrize(
    ("points", "expected"),
    [
        (["a", "", None, 3, "  b  "], ("a", "3", "b")),
        ({"amostras": 3, "tipo": "poço"}, ("amostras: 3", "tipo: poço")),
        (42, ("42",)),
        ([f"ponto {i}" for i in range(30)], tuple(f"ponto {i}" for i in range(20))),
    ],
    ids=["mixed-list", "object", "number", "capped-at-20"],
)
def test_key_points_become_a_list_of_texts(points: object, expected: tuple[str, ...]) -> None:
    summary = parse_operational_summary(json.dumps({"pontos_chave": points}))

    assert summary.key_points == expected


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        ("", "invalid summary: no JSON object in the answer"),
        ("Não consegui resumir.", "invalid summary: no JSON object in the answer"),
        ('{"motivo_encerramento": "x",}', "invalid summary: malformed JSON: Expecting property name enclosed in double quotes (char 28)"),
        ('["a", "b"]', "invalid summary: the answer is a JSON list, not an object"),
        ("{}", "invalid summary: none of the summary fields was filled"),
        ('{"s": 1, "texto": "oi"}', "invalid summary: none of the summary fields was filled"),
    ],
    ids=["empty", "prose", "malformed", "array", "empty-object", "foreign-fields"],
)  # fmt: skip
def test_garbage_gives_the_defaults_with_the_error(raw: str, error: str) -> None:
    summary = parse_operational_summary(raw, defaults=DEFAULTS)

    assert summary == OperationalSummary(
        closing_reason="qualified_lead",
        identified_service="SOLO_METAIS",
        segment="AMBIENTAL",
        collected_data={"nome": "Ana"},
        error=error,
    )


def test_the_payload_has_the_portuguese_field_names() -> None:
    assert FULL_SUMMARY.to_payload() == FULL


# --- The call ---------------------------------------------------------------------------------------

FACTS = SummaryFacts(
    handoff_reason="model_requested",
    handoff_detail="reclamacao",
    customer_name="Ana",
    customer_phone="5511912345678",
    segment="AMBIENTAL",
    intent="ORCAMENTO",
    service="AGUA_POTABILIDADE",
    technical_data={"tipo_amostra": "poço"},
    registration_data={"nome": "Ana", "email": "ana@example.com"},
    transcript=(
        TranscriptLine("cliente", "Quero reclamar do prazo"),
        TranscriptLine("assistente", "Entendo."),
    ),
)


def test_the_fallback_is_made_of_the_session_facts() -> None:
    assert FACTS.fallback() == OperationalSummary(
        closing_reason="model_requested — reclamacao",
        identified_service="AGUA_POTABILIDADE",
        segment="AMBIENTAL",
        collected_data={"tipo_amostra": "poço", "nome": "Ana", "email": "ana@example.com"},
    )


def test_generate_calls_the_summary_model_with_the_facts_and_the_conversation() -> None:
    answer = f"```json\n{json.dumps(FULL)}\n```"
    llm = FakeLLM(answer)

    generation = generate_operational_summary(llm=llm, model="gpt-summary", facts=FACTS)

    assert generation == SummaryGeneration(
        summary=FULL_SUMMARY, call=LLMCallResult(answer, "gpt-summary", 100, 10, 5)
    )
    assert llm.calls == [
        {
            "model": "gpt-summary",
            "instructions": SUMMARY_INSTRUCTIONS,
            "messages": [ChatMessage("user", build_summary_input(FACTS))],
            "purpose": "summary",
            "cache_key": "",
        }
    ]


def test_the_summary_input_carries_facts_and_transcript() -> None:
    text = build_summary_input(FACTS)

    assert text.startswith("Dados da sessão:\n{\n")
    assert text.endswith("Conversa:\ncliente: Quero reclamar do prazo\nassistente: Entendo.")
    facts = json.loads(text.split("\n\nConversa:")[0].removeprefix("Dados da sessão:\n"))
    assert facts == {
        "motivo_handoff": "model_requested",
        "detalhe_handoff": "reclamacao",
        "nome_cliente": "Ana",
        "telefone_cliente": "5511912345678",
        "segmento": "AMBIENTAL",
        "intencao": "ORCAMENTO",
        "servico": "AGUA_POTABILIDADE",
        "dados_tecnicos": {"tipo_amostra": "poço"},
        "cadastro": {"nome": "Ana", "email": "ana@example.com"},
    }


def test_a_garbage_answer_still_gives_a_summary_from_the_facts() -> None:
    llm = FakeLLM("desculpe, não sei")

    generation = generate_operational_summary(llm=llm, model="m", facts=FACTS)

    assert generation.summary == OperationalSummary(
        closing_reason="model_requested — reclamacao",
        identified_service="AGUA_POTABILIDADE",
        segment="AMBIENTAL",
        collected_data={"tipo_amostra": "poço", "nome": "Ana", "email": "ana@example.com"},
        error="invalid summary: no JSON object in the answer",
    )


def test_a_failed_call_raises_for_the_caller_to_record() -> None:
    with pytest.raises(LLMTimeoutError):
        generate_operational_summary(
            llm=FakeLLM(LLMTimeoutError("read timeout", attempts=2)), model="m", facts=FACTS
        )


def test_the_summary_prompt_forbids_the_contract_code() -> None:
    assert 'não inclua o campo "s"' in SUMMARY_INSTRUCTIONS
