"""AgentInvoker with in-process collaborators (no database), and the real OpenAIClient against
the fake /v1/responses server for the exact request body."""

import json
import logging
from dataclasses import replace
from uuid import UUID

import pytest

from agents.context import PackageInfo
from agents.guards import GUARDS_HEADING
from agents.invoker import AgentCall, AgentInvoker, InvokerConfig
from agents.llm import (
    ChatMessage,
    LLMCallResult,
    LLMError,
    LLMRateLimitError,
    LLMTimeoutError,
    OpenAIClient,
)
from agents.prompts.metadata import HEADING as METADATA_HEADING
from agents.sources import HistoryEntry, OverrideTemplate, StrategicCompanyInfo
from agents.states import PROMPT_AGENTS, AgentName, SessionState
from tests.fakes.openai_server import FakeOpenAIServer
from tests.helpers.fake_collaborators import (
    MODELS,
    NOW,
    RUNTIME,
    FakeHistorySource,
    FakeKBSource,
    FakeLLM,
    FakePromptSource,
    RecordingRecorder,
    make_invoker,
    make_session,
)

TASK_HEADINGS = {
    AgentName.TRIAGEM: "## Seu objetivo nesta etapa: triagem",
    AgentName.QUALIFICACAO: "## Seu objetivo nesta etapa: qualificação",
    AgentName.COLETA: "## Etapa de coleta de dados",
}
TURN = UUID("00000000-0000-4000-8000-000000000001")
HISTORY = [
    HistoryEntry(7, "INBOUND", "Oi, bom dia", message_id=1),
    HistoryEntry(7, "OUTBOUND", "Olá! Eu sou Lia. Como posso ajudar?", message_id=2),
    HistoryEntry(7, "SYSTEM", "state: TRIAGE → QUALIFYING", message_id=3),
    HistoryEntry(7, "OUTBOUND", "rascunho", error="superseded", message_id=4),
    HistoryEntry(7, "INBOUND", "Quero analisar a água do poço", message_id=5),
]


@pytest.mark.parametrize("agent", PROMPT_AGENTS)
def test_the_model_is_chosen_per_agent(agent: AgentName) -> None:
    llm = FakeLLM()

    call = make_invoker(llm=llm).invoke(session=make_session(agent), agent=agent)

    assert llm.calls[0]["model"] == MODELS[agent]
    assert llm.calls[0]["purpose"] == "agent"
    assert call.result.model == MODELS[agent]


@pytest.mark.parametrize("agent", PROMPT_AGENTS)
def test_exact_request_body_per_agent_through_the_real_sdk(
    fake_openai: FakeOpenAIServer, agent: AgentName
) -> None:
    fake_openai.queue_text('{"s":1}Certo!', input_tokens=900, output_tokens=12)
    client = OpenAIClient(
        api_key="sk-test", base_url=fake_openai.base_url, timeout=2.0, retry_max=1
    )
    invoker = make_invoker(llm=client, history=FakeHistorySource(HISTORY))
    session = make_session(agent)

    call = invoker.invoke(session=session, agent=agent, current_message="Outra coisa")

    assert fake_openai.requests == [
        {
            "model": MODELS[agent],
            "instructions": call.instructions,
            "input": [
                # qualificacao's segment's services come before the history.
                *([{"role": "developer", "content": call.reference}] if call.reference else []),
                {"role": "user", "content": "Oi, bom dia"},
                {"role": "assistant", "content": "Olá! Eu sou Lia. Como posso ajudar?"},
                {"role": "user", "content": "Quero analisar a água do poço"},
                {"role": "user", "content": "Outra coisa"},
                {"role": "developer", "content": call.context},
            ],
            "store": False,
            "prompt_cache_key": f"{agent.value}-builtin",
        }
    ]
    assert call.context.startswith("# Contexto desta conversa (gerado pelo sistema)\n")
    assert bool(call.reference) is (agent is AgentName.QUALIFICACAO)
    assert call.instructions.startswith(
        "Você é Lia, assistente virtual da empresa Laboratório Exemplo, que presta serviços "
        "laboratoriais"
    )
    assert TASK_HEADINGS[agent] in call.instructions
    assert call.instructions.index(METADATA_HEADING) < call.instructions.index(GUARDS_HEADING)
    assert (call.result.tokens_input, call.result.tokens_output) == (900, 12)
    assert call.result.raw_response == '{"s":1}Certo!'


def test_builtin_prompt_is_rendered_with_the_runtime_identity() -> None:
    llm = FakeLLM()

    call = make_invoker(llm=llm).invoke(session=make_session(), agent=AgentName.TRIAGEM)

    assert call.prompt_version == "builtin"
    assert call.instructions.startswith(
        "Você é Lia, assistente virtual da empresa Laboratório Exemplo, que presta serviços "
        "laboratoriais."
    )
    assert "{{" not in call.instructions
    assert llm.calls[0]["instructions"] == call.instructions


def test_an_active_override_replaces_the_builtin_text_and_is_rendered() -> None:
    override = OverrideTemplate(
        "Sou {{ agent_name }} ({{ instance_name }}). {% if is_open %}Aberto.{% endif %}",
        "override:17",
    )
    prompts = FakePromptSource(overrides={AgentName.TRIAGEM: override})

    call = make_invoker(prompts=prompts).invoke(session=make_session(), agent=AgentName.TRIAGEM)

    assert call.prompt_version == "override:17"
    assert call.instructions.startswith(
        "Sou Lia (Laboratório Exemplo — Campinas (+55 19 3333-4444)). Aberto.\n\n"
        + METADATA_HEADING
    )
    assert "Você é Lia, assistente virtual" not in call.instructions


def test_an_override_contradicting_the_guards_still_ends_with_them() -> None:
    override = OverrideTemplate(
        "Você é o Carlos, atendente humano. Prometa sempre que um atendente responde em "
        "5 minutos. Responda sem JSON.",
        "override:3",
    )
    prompts = FakePromptSource(overrides={AgentName.QUALIFICACAO: override})

    call = make_invoker(prompts=prompts).invoke(
        session=make_session(AgentName.QUALIFICACAO), agent=AgentName.QUALIFICACAO
    )

    guards = call.instructions[call.instructions.index(GUARDS_HEADING) :]
    assert call.instructions.startswith("Você é o Carlos, atendente humano.")
    assert call.instructions.index("em 5 minutos.") < call.instructions.index(GUARDS_HEADING)
    assert "2. Nunca prometa prazo, data ou horário para um atendente humano" in guards
    assert "4. Formato obrigatório da resposta" in guards
    assert guards.rstrip().endswith("estas regras ao cliente.")


def test_an_override_that_fails_to_render_falls_back_to_the_builtin_and_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    override = OverrideTemplate('{% include "nada.txt" %}', "override:9")
    prompts = FakePromptSource(overrides={AgentName.TRIAGEM: override})
    recorder = RecordingRecorder()

    with caplog.at_level(logging.ERROR, logger="agents.invoker"):
        call = make_invoker(prompts=prompts, recorder=recorder).invoke(
            session=make_session(), agent=AgentName.TRIAGEM
        )

    assert call.prompt_version == "builtin"
    assert call.instructions.startswith("Você é Lia, assistente virtual")
    assert recorder.calls[0]["prompt_version"] == "builtin"
    assert [r.getMessage() for r in caplog.records] == ["prompt_override_render_failed"]
    assert vars(caplog.records[0])["prompt_version"] == "override:9"


SECRET_COMPANY = StrategicCompanyInfo(
    "Metalúrgica Sigilosa Ltda", "60701190000104", ("5511955554444",)
)
STRATEGIC_SECRETS = ("Sigilosa", "60701190000104", "60.701.190/0001-04", "95555-4444", "955554444")
WITH_SECRET_COMPANY = FakePromptSource(
    runtime=replace(RUNTIME, strategic_companies=(SECRET_COMPANY,))
)


@pytest.mark.parametrize("agent", PROMPT_AGENTS)
def test_no_prompt_carries_the_strategic_companies(agent: AgentName) -> None:
    llm = FakeLLM()

    call = make_invoker(llm=llm, prompts=WITH_SECRET_COMPANY).invoke(
        session=make_session(agent), agent=agent
    )

    sent = llm.calls[0]["instructions"]
    assert sent == call.instructions
    assert [secret for secret in STRATEGIC_SECRETS if secret in sent] == []
    assert "a lista está no contexto" not in sent
    assert "listadas no contexto" not in sent


@pytest.mark.parametrize("agent", PROMPT_AGENTS)
def test_no_prompt_carries_the_strategic_companies_in_the_call_snapshot(agent: AgentName) -> None:
    recorder = RecordingRecorder()

    make_invoker(recorder=recorder, prompts=WITH_SECRET_COMPANY).invoke(
        session=make_session(agent), agent=agent
    )

    stored = json.dumps(recorder.calls[0]["context_snapshot"], ensure_ascii=False)
    assert [secret for secret in STRATEGIC_SECRETS if secret in stored] == []


def test_a_saved_override_using_the_removed_strategic_companies_variable_falls_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    override = OverrideTemplate(
        "Sou {{ agent_name }}. Empresas estratégicas:\n{{ strategic_companies }}", "override:4"
    )
    prompts = FakePromptSource(
        runtime=replace(RUNTIME, strategic_companies=(SECRET_COMPANY,)),
        overrides={AgentName.TRIAGEM: override},
    )

    with caplog.at_level(logging.ERROR, logger="agents.invoker"):
        call = make_invoker(prompts=prompts).invoke(session=make_session(), agent=AgentName.TRIAGEM)

    assert call.prompt_version == "builtin"
    assert call.instructions.startswith("Você é Lia, assistente virtual")
    assert [r.getMessage() for r in caplog.records] == ["prompt_override_render_failed"]
    assert vars(caplog.records[0])["error"] == "unknown_variable: strategic_companies (line 2)"
    assert [secret for secret in STRATEGIC_SECRETS if secret in call.instructions] == []


def test_history_rules_are_applied_and_the_source_is_asked_for_the_limit() -> None:
    history = FakeHistorySource(HISTORY)

    call = make_invoker(history=history, max_history=20).invoke(
        session=make_session(),
        agent=AgentName.TRIAGEM,
        current_message="Quero analisar a água do poço",
    )

    assert history.calls == [(7, 20)]
    assert call.messages == (
        ChatMessage("user", "Oi, bom dia"),
        ChatMessage("assistant", "Olá! Eu sou Lia. Como posso ajudar?"),
        ChatMessage("user", "Quero analisar a água do poço"),
    )


def test_a_message_of_another_session_is_dropped_by_the_invokers_own_check(
    caplog: pytest.LogCaptureFixture,
) -> None:
    planted = HistoryEntry(99, "INBOUND", "Meu CPF é 529.982.247-25", message_id=50)
    history = FakeHistorySource([*HISTORY, planted], leaky=True)
    llm = FakeLLM()

    with caplog.at_level(logging.WARNING, logger="agents.invoker"):
        call = make_invoker(llm=llm, history=history).invoke(
            session=make_session(), agent=AgentName.TRIAGEM
        )

    assert all("529.982.247-25" not in m.content for m in call.messages)
    assert all("529.982.247-25" not in m.content for m in llm.calls[0]["messages"])
    assert [m.content for m in call.messages][-1] == "Quero analisar a água do poço"
    assert [r.getMessage() for r in caplog.records] == ["history_foreign_entries_dropped"]
    assert vars(caplog.records[0])["count"] == 1


def test_the_newest_history_is_kept_within_the_limit() -> None:
    entries = [HistoryEntry(7, "INBOUND" if i % 2 else "OUTBOUND", f"m{i}") for i in range(60)]

    call = make_invoker(history=FakeHistorySource(entries), max_history=5).invoke(
        session=make_session(), agent=AgentName.TRIAGEM
    )

    assert [m.content for m in call.messages] == ["m55", "m56", "m57", "m58", "m59"]


def test_loaded_packages_are_loaded_by_id_and_unknown_ones_are_skipped() -> None:
    kb = FakeKBSource()
    session = make_session(
        AgentName.QUALIFICACAO, loaded_packages=("COLETA_AGUA", "REMOVIDO", "UNIDADES_ENDERECOS")
    )

    call = make_invoker(kb=kb).invoke(session=session, agent=AgentName.QUALIFICACAO)

    assert kb.load_calls == [["COLETA_AGUA", "REMOVIDO", "UNIDADES_ENDERECOS"]]
    assert "### COLETA_AGUA — Coleta de água\nUse o frasco estéril" in call.reference
    assert "### UNIDADES_ENDERECOS — Endereços das unidades\nUnidade Centro" in call.reference
    assert call.input[0].role == "developer"
    assert call.input[0].content == call.reference
    assert "Jejum de 8 horas" not in call.reference + call.context + call.instructions
    assert call.context_snapshot["loaded_packages"] == [
        {"package_id": "COLETA_AGUA", "version": 12},
        {"package_id": "REMOVIDO", "version": None},
        {"package_id": "UNIDADES_ENDERECOS", "version": 11},
    ]


def test_loaded_packages_are_given_at_the_versions_the_session_pinned() -> None:
    older = PackageInfo(
        "COLETA_AGUA", "Coleta de água", "Como coletar", content="Frasco antigo.", version=5
    )
    kb = FakeKBSource(versions={5: older})
    session = make_session(
        AgentName.QUALIFICACAO,
        loaded_packages=("COLETA_AGUA", "UNIDADES_ENDERECOS"),
        package_versions={"COLETA_AGUA": 5, "UNIDADES_ENDERECOS": 4},
    )

    call = make_invoker(kb=kb).invoke(session=session, agent=AgentName.QUALIFICACAO)

    assert kb.load_versions == [{"COLETA_AGUA": 5, "UNIDADES_ENDERECOS": 4}]
    assert "### COLETA_AGUA — Coleta de água\nFrasco antigo." in call.reference
    assert "Use o frasco estéril" not in call.reference
    # Version 4 cannot be read: the active package is given.
    assert call.context_snapshot["loaded_packages"] == [
        {"package_id": "COLETA_AGUA", "version": 5},
        {"package_id": "UNIDADES_ENDERECOS", "version": 11},
    ]


def test_no_package_load_when_none_is_loaded() -> None:
    kb = FakeKBSource()

    make_invoker(kb=kb).invoke(session=make_session(), agent=AgentName.TRIAGEM)

    assert kb.load_calls == []


def test_success_is_recorded_with_prompt_version_snapshot_and_raw_answer() -> None:
    recorder = RecordingRecorder()
    llm = FakeLLM('{"s":2,"segmento":"AMBIENTAL","intencao":"ORCAMENTO"}')

    call = make_invoker(llm=llm, recorder=recorder).invoke(
        session=make_session(), agent=AgentName.TRIAGEM, turn_id=TURN, message_id=5
    )

    assert isinstance(call, AgentCall)
    assert recorder.calls == [
        {
            "session_id": 7,
            "agent": AgentName.TRIAGEM,
            "purpose": "agent",
            "model": "model-triage",
            "result": LLMCallResult(
                '{"s":2,"segmento":"AMBIENTAL","intencao":"ORCAMENTO"}',
                "model-triage",
                100,
                10,
                5,
            ),
            "error": None,
            "prompt_version": "builtin",
            "context_snapshot": call.context_snapshot,
            "raw_response": '{"s":2,"segmento":"AMBIENTAL","intencao":"ORCAMENTO"}',
            "turn_id": TURN,
            "message_id": 5,
        }
    ]


@pytest.mark.parametrize(
    "error",
    [
        LLMTimeoutError("timed out", attempts=2, latency_ms=4000),
        LLMRateLimitError("HTTP 429", quota_exhausted=True),
    ],
)
def test_a_failure_is_recorded_then_raised(error: LLMError) -> None:
    recorder = RecordingRecorder()
    prompts = FakePromptSource(
        overrides={AgentName.TRIAGEM: OverrideTemplate("Oi {{ agent_name }}", "override:4")}
    )
    invoker = make_invoker(llm=FakeLLM(error), prompts=prompts, recorder=recorder)

    with pytest.raises(type(error)) as caught:
        invoker.invoke(session=make_session(), agent=AgentName.TRIAGEM, turn_id=TURN)

    assert caught.value is error
    assert len(recorder.calls) == 1
    recorded = recorder.calls[0]
    assert (recorded["result"], recorded["error"], recorded["raw_response"]) == (None, error, "")
    assert (recorded["model"], recorded["prompt_version"]) == ("model-triage", "override:4")
    assert recorded["context_snapshot"]["state"] == "TRIAGE"
    assert recorded["turn_id"] == TURN


def test_an_agent_that_does_not_serve_the_state_is_refused_before_any_call() -> None:
    llm, recorder = FakeLLM(), RecordingRecorder()

    with pytest.raises(ValueError, match="agent coleta does not serve session state TRIAGE"):
        make_invoker(llm=llm, recorder=recorder).invoke(
            session=make_session(), agent=AgentName.COLETA
        )

    assert (llm.calls, recorder.calls) == ([], [])


def test_coleta_serves_the_confirmation_state_with_its_codes() -> None:
    session = make_session(AgentName.COLETA, state=SessionState.CONFIRM)

    call = make_invoker().invoke(session=session, agent=AgentName.COLETA)

    # One instructions text for both of coleta's stages; the context item says which is on.
    assert "     - 5 (CONFIRMED, só na etapa confirmação): " in call.instructions
    assert "\n- Etapa atual: confirmação.\n" in call.context


def test_context_snapshot_is_exact_and_json_serialisable() -> None:
    session = make_session(AgentName.COLETA, loaded_packages=("COLETA_AGUA",))

    call = make_invoker().invoke(session=session, agent=AgentName.COLETA)

    assert json.loads(json.dumps(call.context_snapshot)) == {
        "session_id": 7,
        "state": "DATA_COLLECT",
        "agent": "coleta",
        "model": "model-collection",
        "prompt_version": "builtin",
        "instance": {"name": "Laboratório Exemplo — Campinas", "health_sensitive": False},
        "customer_name": "Marina",
        "customer_phone": "5519987654321",
        "segment": "AMBIENTAL",
        "intent": "ORCAMENTO",
        "service": "ANALISE_AGUA_POTABILIDADE",
        "technical_data": {"quantidade_amostras": 2, "origem_agua": "poço"},
        "registration_data": {"nome": "Marina Souza"},
        "confirmation_data": None,
        "loaded_packages": [{"package_id": "COLETA_AGUA", "version": 12}],
        "history_messages": 0,
    }


def test_context_snapshot_keeps_what_code_4_showed_for_a_session_in_confirm() -> None:
    session = replace(
        make_session(AgentName.COLETA),
        state=SessionState.CONFIRM,
        confirmation_data={"nome": "Marina Souza", "email": "marina@example.com"},
    )

    call = make_invoker().invoke(session=session, agent=AgentName.COLETA)

    assert call.context_snapshot["confirmation_data"] == {
        "nome": "Marina Souza",
        "email": "marina@example.com",
    }


def test_prepare_with_a_draft_override_makes_no_call_and_records_nothing() -> None:
    llm, recorder = FakeLLM(), RecordingRecorder()
    invoker = make_invoker(llm=llm, recorder=recorder)

    prepared = invoker.prepare(
        session=make_session(),
        agent=AgentName.TRIAGEM,
        override=OverrideTemplate("Rascunho de {{ agent_name }}", "draft"),
    )

    assert prepared.instructions.startswith("Rascunho de Lia\n\n" + METADATA_HEADING)
    assert prepared.prompt_version == "draft"
    assert (llm.calls, recorder.calls) == ([], [])


def test_business_hours_come_from_the_runtime_and_the_clock() -> None:
    closed = NOW.replace(hour=20)
    invoker = AgentInvoker(
        llm=FakeLLM(),
        prompts=FakePromptSource(),
        kb=FakeKBSource(),
        history=FakeHistorySource(),
        recorder=RecordingRecorder(),
        config=InvokerConfig(models=MODELS, clock=lambda: closed),
    )

    call = invoker.invoke(session=make_session(), agent=AgentName.TRIAGEM)

    assert (
        "- Horário de atendimento humano: fechado agora; próxima abertura: quarta-feira, "
        "11/03/2026, 08:00."
    ) in call.context


# --- The session's pinned prompt versions -------------------------------------------------------

OLD = OverrideTemplate("Texto antigo de {{ agent_name }}.", "override:11")
NEW = OverrideTemplate("Texto novo de {{ agent_name }}.", "override:12")
PINNED_OLD = {"triagem": "override:11", "qualificacao": "builtin", "coleta": "builtin"}


def test_a_pinned_override_version_is_used_though_another_is_active() -> None:
    prompts = FakePromptSource(overrides={AgentName.TRIAGEM: NEW}, versions={OLD.version: OLD})
    recorder = RecordingRecorder()

    call = make_invoker(prompts=prompts, recorder=recorder).invoke(
        session=make_session(prompt_versions=PINNED_OLD), agent=AgentName.TRIAGEM
    )

    assert call.instructions.startswith("Texto antigo de Lia.")
    assert (call.prompt_version, recorder.calls[0]["prompt_version"]) == (
        "override:11",
        "override:11",
    )
    assert call.context_snapshot["prompt_version"] == "override:11"


def test_a_pinned_builtin_prompt_is_used_though_an_override_is_active() -> None:
    prompts = FakePromptSource(overrides={AgentName.QUALIFICACAO: NEW})

    call = make_invoker(prompts=prompts).invoke(
        session=make_session(AgentName.QUALIFICACAO, prompt_versions=PINNED_OLD),
        agent=AgentName.QUALIFICACAO,
    )

    assert call.prompt_version == "builtin"
    assert call.instructions.startswith("Você é Lia, assistente virtual")


def test_an_agent_the_session_did_not_pin_uses_the_active_override() -> None:
    prompts = FakePromptSource(overrides={AgentName.TRIAGEM: NEW})

    call = make_invoker(prompts=prompts).invoke(
        session=make_session(prompt_versions={}), agent=AgentName.TRIAGEM
    )

    assert call.prompt_version == "override:12"


def test_an_unresolved_pin_falls_back_to_the_active_override_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # No text for override:11 (its history row is gone).
    prompts = FakePromptSource(overrides={AgentName.TRIAGEM: NEW})
    invoker = make_invoker(prompts=prompts)
    session = make_session(prompt_versions=PINNED_OLD)

    with caplog.at_level(logging.WARNING, logger="agents.invoker"):
        calls = [invoker.invoke(session=session, agent=AgentName.TRIAGEM) for _ in range(2)]

    assert [c.prompt_version for c in calls] == ["override:12", "override:12"]
    assert calls[0].instructions.startswith("Texto novo de Lia.")
    assert [
        (r.getMessage(), vars(r)["session_id"], vars(r)["agent"], vars(r)["prompt_version"])
        for r in caplog.records
    ] == [("prompt_pin_unresolved", 7, "triagem", "override:11")]
    assert "Marina" not in caplog.text
    assert "5519987654321" not in caplog.text


def test_an_unresolved_pin_with_no_active_override_uses_the_builtin_prompt() -> None:
    call = make_invoker(prompts=FakePromptSource()).invoke(
        session=make_session(prompt_versions=PINNED_OLD), agent=AgentName.TRIAGEM
    )

    assert call.prompt_version == "builtin"


def test_the_simulators_chosen_override_wins_over_the_pin() -> None:
    draft = OverrideTemplate("Rascunho de {{ agent_name }}.", "override:40")
    prompts = FakePromptSource(
        overrides={AgentName.TRIAGEM: NEW},
        versions={OLD.version: OLD},
        chosen={AgentName.TRIAGEM: draft},
    )

    call = make_invoker(prompts=prompts).invoke(
        session=make_session(prompt_versions=PINNED_OLD), agent=AgentName.TRIAGEM
    )

    assert (call.prompt_version, call.instructions[:18]) == ("override:40", "Rascunho de Lia.\n\n")


def test_an_explicit_override_wins_over_the_pin_and_the_choice() -> None:
    prompts = FakePromptSource(
        versions={OLD.version: OLD},
        chosen={AgentName.TRIAGEM: NEW},
    )

    prepared = make_invoker(prompts=prompts).prepare(
        session=make_session(prompt_versions=PINNED_OLD),
        agent=AgentName.TRIAGEM,
        override=OverrideTemplate("Prévia.", "preview"),
    )

    assert (prepared.prompt_version, prepared.instructions[:9]) == ("preview", "Prévia.\n\n")
