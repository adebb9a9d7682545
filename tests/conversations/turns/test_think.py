"""`conversations.turns.think`: the strict parse and its one repair call, the contract, the model's
errors and the routing and enrichment limits, each failure a handoff with the fixed text."""

import logging
from datetime import timedelta
from typing import Any

import pytest

from agents.llm import LLMError, LLMProviderError, LLMRateLimitError, LLMTimeoutError
from conversations.labels import event_text
from conversations.models import Direction, Instance, Lead, LLMCall
from tests.helpers.fake_collaborators import NOW
from tests.helpers.pipeline import (
    CLOSED_TEXT,
    INVALID_FORMAT_TEXT,
    OPEN_TEXT,
    PACKAGE_TEXT,
    QUALIFYING,
    SUMMARY_MODEL,
    S,
    events,
    inbound,
    llm_calls,
    make_session,
    outbound,
    pending,
    pipeline,
)

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("catalog")]


# --- Parse, repair and the seed's named behaviours ---------------------------------------------------


def test_text_before_json_gets_one_format_repair(
    instance: Instance, capture: Any, caplog: pytest.LogCaptureFixture
) -> None:
    session = make_session(instance)
    inbound(session, "Oi")
    raw = 'Claro! Aqui vai:\n```json\n{"s":1}Olá! Como posso ajudar?\n```'
    run = pipeline(raw, '{"s":1}Olá! Como posso ajudar?')
    caplog.set_level(logging.INFO, logger="conversations")

    run.run(session, capture=capture)

    assert [c["purpose"] for c in run.llm.calls] == ["agent", "repair"]
    repair = run.llm.calls[1]
    assert repair["model"] == SUMMARY_MODEL
    assert [m.content for m in repair["messages"]] == [raw]
    [reply] = outbound(session)
    assert reply.content == "Olá! Como posso ajudar?"
    assert reply.raw_response == '{"s":1}Olá! Como posso ajudar?'
    assert llm_calls(session) == [
        ("agent", "triagem", "gpt-4o-mini", "ok"),
        ("repair", "triagem", SUMMARY_MODEL, "ok"),
    ]
    assert LLMCall.objects.get(purpose="repair").raw_response == '{"s":1}Olá! Como posso ajudar?'
    logged = [r.getMessage() for r in caplog.records if r.name == "conversations.turns.think"]
    assert "llm_response_parse_retry" in logged
    assert "llm_response_repair_success" in logged
    assert "llm_failure_handoff" not in logged
    session.refresh_from_db()
    assert session.state == "TRIAGE"


def test_invalid_json_triggers_handoff_with_fixed_message(
    instance: Instance, capture: Any, caplog: pytest.LogCaptureFixture
) -> None:
    session = make_session(instance)
    message = inbound(session, "Oi")
    run = pipeline("Desculpe, não sei responder nesse formato.", "INVALID_FORMAT")
    caplog.set_level(logging.INFO, logger="conversations")

    run.run(session, capture=capture)

    session.refresh_from_db()
    assert (session.state, session.handoff_reason, session.handed_off_at) == (
        "HUMAN",
        "llm_invalid_json",
        NOW,
    )
    assert session.handoff_detail.startswith(
        "triagem: text before the JSON: the answer must start with '{'"
    )
    assert session.handoff_detail.endswith("the repair answered INVALID_FORMAT")
    [reply] = outbound(session)
    assert (reply.content, reply.action, reply.code, reply.agent) == (
        INVALID_FORMAT_TEXT,
        "llm_invalid_json",
        None,
        "",
    )
    assert events(session) == [("handoff", "llm_invalid_json")]
    handoff = session.messages.get(direction=Direction.SYSTEM)
    assert handoff.raw_response == "Desculpe, não sei responder nesse formato."
    assert handoff.agent == "triagem"
    assert run.sent == [reply.pk]
    assert run.summaries == [session.pk]
    message.refresh_from_db()
    assert message.processed_at == NOW
    assert llm_calls(session) == [
        ("agent", "triagem", "gpt-4o-mini", "ok"),
        ("repair", "triagem", SUMMARY_MODEL, "ok"),
    ]
    logged = [r.getMessage() for r in caplog.records if r.name == "conversations.turns.think"]
    assert [e for e in logged if e.startswith("llm_")] == [
        "llm_response_parse_retry",
        "llm_response_repair_failed",
        "llm_failure_handoff",
    ]


def test_a_repair_that_still_does_not_parse_hands_off(instance: Instance, capture: Any) -> None:
    session = make_session(instance)
    inbound(session, "Oi")
    run = pipeline('Oi {"s":1}', 'Resposta: {"s":1}Oi')

    run.run(session, capture=capture)

    session.refresh_from_db()
    assert session.handoff_reason == "llm_invalid_json"
    assert [m.content for m in outbound(session)] == [INVALID_FORMAT_TEXT]
    assert len(run.llm.calls) == 2


def test_a_parse_retry_logs_and_stores_where_the_json_starts_not_the_model_s_words(
    instance: Instance, capture: Any, caplog: pytest.LogCaptureFixture
) -> None:
    session = make_session(instance)
    inbound(session, "Oi")
    raw = 'Anotei o CPF 529.982.247-25 e ana@x.com.br {"s":1}Certo?'
    run = pipeline(raw, raw)
    caplog.set_level(logging.INFO, logger="conversations")

    run.run(session, capture=capture)

    error = "text before the JSON: the answer must start with '{' (43 character(s) before the first '{')"
    [retry] = [r for r in caplog.records if r.getMessage() == "llm_response_parse_retry"]
    assert vars(retry)["error"] == error
    session.refresh_from_db()
    assert session.handoff_detail == f"triagem: {error}; repaired answer: {error}"


def test_an_unavailable_repair_hands_off_and_records_the_failed_call(
    instance: Instance, capture: Any, caplog: pytest.LogCaptureFixture
) -> None:
    session = make_session(instance)
    inbound(session, "Oi")
    run = pipeline('```json\n{"s":1}Oi```', LLMProviderError("HTTP 500", attempts=2))
    caplog.set_level(logging.INFO, logger="conversations")

    run.run(session, capture=capture)

    session.refresh_from_db()
    assert session.handoff_reason == "llm_invalid_json"
    assert session.handoff_detail.endswith("repair unavailable: HTTP 500")
    assert llm_calls(session) == [
        ("agent", "triagem", "gpt-4o-mini", "ok"),
        ("repair", "triagem", SUMMARY_MODEL, "provider_error"),
    ]
    assert LLMCall.objects.get(purpose="repair").attempts == 2
    logged = [r.getMessage() for r in caplog.records if r.name == "conversations.turns.think"]
    assert "llm_response_repair_unavailable" in logged
    assert "llm_failure_handoff" in logged


def test_a_repaired_answer_is_still_validated(instance: Instance, capture: Any) -> None:
    session = make_session(instance)
    inbound(session, "Oi")
    run = pipeline('Ok: {"s":5}Feito', '{"s":5}Feito')

    run.run(session, capture=capture)

    session.refresh_from_db()
    assert (session.state, session.handoff_reason) == ("HUMAN", "llm_invalid_contract")
    assert [m.content for m in outbound(session)] == [OPEN_TEXT]
    assert not Lead.objects.exists()


def test_invalid_model_contract_fails_into_visible_handoff(
    instance: Instance, capture: Any
) -> None:
    session = make_session(instance)
    inbound(session, "Quero análise de água")
    # Valid JSON, but code 3 is not allowed in TRIAGE: never "accepted because the JSON is valid".
    raw = '{"s":3,"servico":"AGUA_POTABILIDADE"}Vamos coletar seus dados!'
    run = pipeline(raw)

    run.run(session, capture=capture)

    session.refresh_from_db()
    assert (session.state, session.handoff_reason, session.handoff_detail) == (
        "HUMAN",
        "llm_invalid_contract",
        "triagem: code 3 (TO_COLLECTION) is not allowed for triagem in state TRIAGE",
    )
    assert session.service == ""
    handoff = session.messages.get(direction=Direction.SYSTEM)
    assert (handoff.message_type, handoff.action, handoff.content, handoff.json_part) == (
        "handoff",
        "llm_invalid_contract",
        "",
        {
            "reason": "llm_invalid_contract",
            "detail": "triagem: code 3 (TO_COLLECTION) is not allowed for triagem in state TRIAGE",
            "motive": "",
        },
    )
    # Staff read a pt-BR sentence, the machine detail stays in the row's parameters.
    assert event_text(handoff) == (
        "Transferido para atendimento humano: resposta do modelo fora do contrato. "
        "A resposta do modelo não seguiu as regras do atendimento (código ou campo não "
        "permitido)."
    )
    assert handoff.raw_response == raw
    # The fixed text, never the model's.
    assert [m.content for m in outbound(session)] == [OPEN_TEXT]
    assert run.summaries == [session.pk]


@pytest.mark.parametrize(
    ("error", "reason", "outcome"),
    [
        (LLMTimeoutError("read timed out", attempts=2), "llm_timeout", "timeout"),
        (LLMRateLimitError("429", quota_exhausted=True), "llm_rate_limited", "quota_exceeded"),
        (LLMRateLimitError("429"), "llm_rate_limited", "rate_limited"),
        (LLMProviderError("HTTP 400 bad request"), "llm_provider_error", "provider_error"),
    ],
)
def test_model_errors_hand_off_with_their_precise_reason(
    instance: Instance, capture: Any, error: LLMError, reason: str, outcome: str
) -> None:
    session = make_session(instance)
    inbound(session, "Oi")
    run = pipeline(error)

    run.run(session, capture=capture)

    session.refresh_from_db()
    assert (session.state, session.handoff_reason, session.handoff_detail) == (
        "HUMAN",
        reason,
        f"triagem: {error}",
    )
    assert [m.content for m in outbound(session)] == [OPEN_TEXT]
    assert llm_calls(session) == [("agent", "triagem", "gpt-4o-mini", outcome)]
    assert pending(session) == 0
    assert run.summaries == [session.pk]


def test_out_of_business_hours_the_fixed_text_says_so(instance: Instance, capture: Any) -> None:
    session = make_session(instance)
    inbound(session, "Oi")
    run = pipeline('{"s":98,"motivo":"pedido_cliente"}')
    run.clock = lambda: NOW.replace(hour=22)  # Tuesday 22:00

    run.run(session, capture=capture)

    assert [m.content for m in outbound(session)] == [CLOSED_TEXT]


def test_out_of_business_hours_a_format_failure_also_gets_the_closed_text(
    instance: Instance, capture: Any
) -> None:
    session = make_session(instance)
    inbound(session, "Oi")
    run = pipeline("sem json", "INVALID_FORMAT")
    run.clock = lambda: NOW + timedelta(days=5)  # Sunday

    run.run(session, capture=capture)

    assert [m.content for m in outbound(session)] == [CLOSED_TEXT]


# --- Enrichment and routing limits -----------------------------------------------------------------


def test_code_99_loads_the_package_and_the_second_call_carries_its_content(
    instance: Instance, capture: Any
) -> None:
    session = make_session(instance, S.QUALIFYING, **QUALIFYING)
    inbound(session, "Como devo coletar a água?")
    run = pipeline(
        '{"s":99,"context_needed":"COLETA_DE_AMOSTRAS"}',
        '{"s":1}Use o frasco estéril que enviamos e não enxágue o frasco.',
    )

    run.run(session, capture=capture)

    first, second = run.llm.calls
    # The content comes in the first input item, before the history.
    assert PACKAGE_TEXT not in "".join(m.content for m in first["messages"])
    assert PACKAGE_TEXT not in first["instructions"] + second["instructions"]
    assert second["messages"][0].role == "developer"
    assert PACKAGE_TEXT in second["messages"][0].content
    session.refresh_from_db()
    assert (session.state, session.loaded_packages) == ("QUALIFYING", ["COLETA_DE_AMOSTRAS"])
    assert events(session) == [("context_loaded", "context_needed")]
    assert [m.content for m in outbound(session)] == [
        "Use o frasco estéril que enviamos e não enxágue o frasco."
    ]
    call = LLMCall.objects.order_by("id").last()
    assert call is not None
    snapshot = call.context_snapshot
    assert snapshot is not None
    assert [p["package_id"] for p in snapshot["loaded_packages"]] == ["COLETA_DE_AMOSTRAS"]


def test_enrichment_beyond_the_limit_hands_off(instance: Instance, capture: Any) -> None:
    session = make_session(instance)
    inbound(session, "Quem são vocês?")
    run = pipeline(
        '{"s":99,"context_needed":"COMPANY_INFO"}',
        '{"s":99,"context_needed":"COLETA_DE_AMOSTRAS"}',
        '{"s":99,"context_needed":["COMPANY_INFO"]}',
    )

    run.run(session, capture=capture)

    assert len(run.llm.calls) == 3
    session.refresh_from_db()
    assert (session.state, session.handoff_reason, session.handoff_detail) == (
        "HUMAN",
        "enrichment_limit",
        "triagem: code 99 after 2 package loads in one turn",
    )
    # The loads that happened are kept; the one over the limit is not.
    assert session.loaded_packages == ["COMPANY_INFO", "COLETA_DE_AMOSTRAS"]
    assert events(session) == [
        ("context_loaded", "context_needed"),
        ("context_loaded", "context_needed"),
        ("handoff", "enrichment_limit"),
    ]
    assert [m.content for m in outbound(session)] == [OPEN_TEXT]


@pytest.mark.parametrize("package", ["TABELA_PRECOS", "PACOTE_ANTIGO"], ids=["unknown", "inactive"])
def test_an_unknown_or_inactive_package_hands_off(
    instance: Instance, capture: Any, package: str
) -> None:
    session = make_session(instance)
    inbound(session, "Qual o preço?")
    run = pipeline(f'{{"s":99,"context_needed":["COMPANY_INFO","{package}"]}}')

    run.run(session, capture=capture)

    assert len(run.llm.calls) == 1
    session.refresh_from_db()
    assert (session.handoff_reason, session.handoff_detail) == (
        "unknown_package",
        f"triagem: code 99: unknown or inactive package '{package}'",
    )
    assert session.loaded_packages == []
    assert [m.content for m in outbound(session)] == [OPEN_TEXT]


def test_routing_beyond_the_hop_limit_hands_off(instance: Instance, capture: Any) -> None:
    session = make_session(instance)
    inbound(session, "Oi")
    to_qualification = '{"s":2,"segmento":"AMBIENTAL","intencao":"ORCAMENTO"}'
    run = pipeline(to_qualification, '{"s":7}', to_qualification, '{"s":7}')

    run.run(session, capture=capture)

    assert [c["purpose"] for c in run.llm.calls] == ["agent"] * 4
    session.refresh_from_db()
    assert (session.state, session.handoff_reason, session.handoff_detail) == (
        "HUMAN",
        "routing_loop",
        "qualificacao: code 7 after 3 agent changes in one turn",
    )
    assert events(session) == [
        ("state_changed", "to_qualification"),
        ("state_changed", "change_subject"),
        ("state_changed", "to_qualification"),
        ("handoff", "routing_loop"),
    ]
    assert [m.content for m in outbound(session)] == [OPEN_TEXT]


def test_a_failure_after_a_hop_keeps_what_the_first_agent_found(
    instance: Instance, capture: Any
) -> None:
    session = make_session(instance)
    inbound(session, "Quero orçamento de água")
    run = pipeline('{"s":2,"segmento":"AMBIENTAL","intencao":"ORCAMENTO"}', LLMTimeoutError("t"))

    run.run(session, capture=capture)

    session.refresh_from_db()
    assert (session.state, session.segment, session.handoff_reason) == (
        "HUMAN",
        "AMBIENTAL",
        "llm_timeout",
    )
    assert events(session) == [("state_changed", "to_qualification"), ("handoff", "llm_timeout")]
