"""The message pipeline, turn by turn, on the database with a fake model (DESIGN.md §4, §7, §8).

The real invoker, prompt assembly, history, recorder and catalog run; only the model is faked, by
an in-process `FakeLLM` (tests/agents/support.py) whose calls are asserted exactly.
"""

import logging
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any
from uuid import uuid4

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from model_bakery import baker

from agents.llm import LLMError, LLMProviderError, LLMRateLimitError, LLMTimeoutError
from agents.states import SessionState
from conversations.labels import event_text
from conversations.models import (
    SUPERSEDED,
    CrmStatus,
    DeliveryStatus,
    Direction,
    Instance,
    Lead,
    LLMCall,
    Message,
    Session,
)
from conversations.pipeline import (
    PipelineConfig,
    PipelineDeps,
    ProcessOutcome,
    ProcessReport,
    session_process,
)
from tests.agents.support import NOW, FakeLLM

S = SessionState
CUSTOMER_PHONE = "5511988887777"
VALID_CPF = "52998224725"
OPEN_TEXT = "Vou transferir você para um especialista da equipe."
CLOSED_TEXT = "Estamos fora do horário; a equipe continua por aqui quando retomarmos."
INVALID_FORMAT_TEXT = "Tive um problema para processar sua mensagem. Vou transferir você."
SUMMARY_MODEL = "model-summary"

pytestmark = pytest.mark.django_db


# --- Harness ---------------------------------------------------------------------------------------


@dataclass
class Pipeline:
    """The pipeline with its collaborators: the real ones, a fake model and recording seams."""

    llm: FakeLLM
    sent: list[int] = field(default_factory=list)
    summaries: list[int] = field(default_factory=list)
    read: list[int] = field(default_factory=list)
    config: PipelineConfig = field(
        default_factory=lambda: PipelineConfig(
            max_agent_hops=3,
            max_enrichments=2,
            repair_model=SUMMARY_MODEL,
            lease_ttl=timedelta(minutes=3),
        )
    )
    clock: Any = lambda: NOW

    def deps(self) -> PipelineDeps:
        return build_test_deps(self)

    def run(
        self,
        session: Session,
        *,
        capture: Any,
        deadline_errors: tuple[type[BaseException], ...] = (),
    ) -> ProcessReport:
        with capture(execute=True):
            return session_process(
                session_id=session.pk,
                deps=self.deps(),
                config=self.config,
                deadline_errors=deadline_errors,
            )


def build_test_deps(pipeline: Pipeline) -> PipelineDeps:
    from conversations.pipeline_tasks import build_pipeline_deps

    deps = build_pipeline_deps(llm=pipeline.llm)
    return replace(
        deps,
        send=pipeline.sent.append,
        enqueue_summary=pipeline.summaries.append,
        mark_read=pipeline.read.append,
        clock=pipeline.clock,
    )


# --- Data ------------------------------------------------------------------------------------------

WATER_SCHEMA = [
    {"name": "tipo_amostra", "label": "Tipo de amostra", "type": "text", "required": True},
    {"name": "quantidade_amostras", "label": "Quantidade", "type": "integer", "required": True},
    {"name": "cidade_coleta", "label": "Cidade da coleta", "type": "text"},
]
PACKAGE_TEXT = "Use o frasco estéril fornecido pelo laboratório; não enxágue o frasco."


@pytest.fixture(autouse=True)
def catalog(db: None) -> None:
    from knowledge_base.models import Intent, KBPackage, Segment, Service
    from prompts_admin.models import RuntimeConfig

    ambiental = Segment.objects.create(code="AMBIENTAL", label="Ambiental")
    Segment.objects.create(code="HUMANO", label="Saúde humana", health_sensitive=True)
    Intent.objects.create(code="ORCAMENTO", label="Orçamento")
    Service.objects.create(
        code="AGUA_POTABILIDADE",
        label="Potabilidade da água",
        segment=ambiental,
        parameter_schema=WATER_SCHEMA,
    )
    KBPackage.objects.create(
        package_id="COLETA_DE_AMOSTRAS",
        title="Coleta de amostras",
        description="Como coletar amostras",
        content=PACKAGE_TEXT,
    )
    KBPackage.objects.create(
        package_id="COMPANY_INFO", title="Empresa", description="Quem somos", content="Desde 1990."
    )
    KBPackage.objects.create(
        package_id="PACOTE_ANTIGO",
        title="Antigo",
        description="Inativo",
        content="x",
        is_active=False,
    )
    config = RuntimeConfig.load()
    config.handoff_message_open = OPEN_TEXT
    config.handoff_message_closed = CLOSED_TEXT
    config.invalid_format_message = INVALID_FORMAT_TEXT
    config.save()


def make_instance() -> Instance:
    return baker.make(Instance, phone_number_id="100000000000001", name="Laboratório Demo")


@pytest.fixture
def instance() -> Instance:
    return make_instance()


def make_session(instance: Instance, state: SessionState = S.TRIAGE, **fields: Any) -> Session:
    return Session.objects.create(
        instance=instance, customer_phone=CUSTOMER_PHONE, state=state.value, **fields
    )


_seconds = iter(range(1, 10_000))


def inbound(session: Session, text: str, *, at: int | None = None) -> Message:
    """A pending INBOUND text as the webhook stores it; `at` = seconds after NOW."""
    second = at if at is not None else next(_seconds)
    return Message.objects.create(
        session=session,
        direction=Direction.INBOUND,
        content=text,
        wa_message_id=f"wamid.{uuid4().hex}",
        wa_timestamp=NOW + timedelta(seconds=second),
    )


@pytest.fixture
def capture(django_capture_on_commit_callbacks: Any) -> Any:
    return django_capture_on_commit_callbacks


def pipeline(*answers: str | LLMError, **config: Any) -> Pipeline:
    result = Pipeline(llm=FakeLLM(*answers))
    if config:
        result.config = replace(result.config, **config)
    return result


def outbound(session: Session) -> list[Message]:
    return list(session.messages.filter(direction=Direction.OUTBOUND).order_by("id"))


def events(session: Session) -> list[tuple[str, str]]:
    return list(
        session.messages.filter(direction=Direction.SYSTEM)
        .order_by("id")
        .values_list("message_type", "action")
    )


def llm_calls(session: Session) -> list[tuple[str, str, str, str]]:
    return list(
        LLMCall.objects.filter(session=session)
        .order_by("id")
        .values_list("purpose", "agent", "model", "outcome")
    )


def pending(session: Session) -> int:
    return session.messages.filter(direction=Direction.INBOUND, processed_at=None).count()


# --- A RESPOND turn ---------------------------------------------------------------------------------


def test_a_respond_turn_sends_the_formatted_answer_once(instance: Instance, capture: Any) -> None:
    session = make_session(instance)
    message = inbound(session, "Oi, bom dia")
    run = pipeline('{"s":1}Olá! Sou a **Lia**. Como posso ajudar?')

    report = run.run(session, capture=capture)

    assert report == ProcessReport(ProcessOutcome.DRAINED, turns=1)
    [reply] = outbound(session)
    assert reply.content == "Olá! Sou a *Lia*. Como posso ajudar?"
    assert (reply.agent, reply.code, reply.action, reply.part_index) == ("triagem", 1, "respond", 0)
    assert (reply.raw_response, reply.json_part) == (
        '{"s":1}Olá! Sou a **Lia**. Como posso ajudar?',
        {"s": 1},
    )
    assert (reply.delivery_status, reply.error) == (DeliveryStatus.PENDING, "")
    message.refresh_from_db()
    assert message.processed_at == NOW
    assert message.turn_id == reply.turn_id
    assert run.sent == [reply.pk]
    assert run.read == [message.pk]
    assert run.summaries == []
    session.refresh_from_db()
    assert (session.state, session.lease_token, session.lease_expires_at) == ("TRIAGE", None, None)
    assert llm_calls(session) == [("agent", "triagem", "gpt-4o-mini", "ok")]
    assert events(session) == []


def test_a_burst_of_messages_is_one_turn_answered_once(instance: Instance, capture: Any) -> None:
    session = make_session(instance)
    # Stored out of order: the turn follows WhatsApp's timestamps.
    third = inbound(session, "análise de água", at=30)
    first = inbound(session, "Oi", at=10)
    second = inbound(session, "queria um orçamento", at=20)
    run = pipeline('{"s":1}Claro! Qual a origem da água?')

    run.run(session, capture=capture)

    assert len(run.llm.calls) == 1
    seen = [m.content for m in run.llm.calls[0]["messages"]]
    assert sorted(seen) == ["Oi", "análise de água", "queria um orçamento"]
    # The newest by WhatsApp timestamp is the turn's message (marked read, linked to the calls).
    assert run.read == [third.pk]
    assert list(LLMCall.objects.values_list("message_id", flat=True)) == [third.pk]
    assert len(outbound(session)) == 1
    assert pending(session) == 0
    assert {m.turn_id for m in (first, second, third) if m.refresh_from_db() is None} == {
        outbound(session)[0].turn_id
    }


def test_a_long_answer_is_split_into_parts_sent_in_order(instance: Instance, capture: Any) -> None:
    session = make_session(instance)
    inbound(session, "Me conte tudo")
    paragraph = "Texto " * 500  # 3,000 characters
    run = pipeline('{"s":1}' + f"{paragraph.strip()}\n\n{paragraph.strip()}")

    run.run(session, capture=capture)

    parts = outbound(session)
    assert [p.part_index for p in parts] == [0, 1]
    assert [len(p.content) for p in parts] == [2999, 2999]
    assert run.sent == [p.pk for p in parts]
    assert parts[0].raw_response.startswith('{"s":1}Texto')
    assert (parts[1].raw_response, parts[1].json_part) == ("", None)
    assert len({p.turn_id for p in parts}) == 1


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
    logged = [r.getMessage() for r in caplog.records if r.name == "conversations.pipeline"]
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
    logged = [r.getMessage() for r in caplog.records if r.name == "conversations.pipeline"]
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
    assert retry.error == error
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
    logged = [r.getMessage() for r in caplog.records if r.name == "conversations.pipeline"]
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


# --- Every code's effect ------------------------------------------------------------------------------

QUALIFYING = {"segment": "AMBIENTAL", "intent": "ORCAMENTO"}
COLLECTING = {
    **QUALIFYING,
    "service": "AGUA_POTABILIDADE",
    "technical_data": {"tipo_amostra": "poço", "quantidade_amostras": 2},
}
REGISTRATION = {"nome": "Ana Lima", "documento": VALID_CPF, "email": "ana@example.com"}


def test_routing_2_invokes_qualificacao_in_the_same_turn_with_one_reply(
    instance: Instance, capture: Any
) -> None:
    session = make_session(instance)
    inbound(session, "Quero um orçamento de análise de água")
    run = pipeline(
        '{"s":2,"segmento":"AMBIENTAL","intencao":"ORCAMENTO"}Vou te passar para a qualificação!',
        '{"s":1}Qual é a origem da água: poço ou rede pública?',
    )

    run.run(session, capture=capture)

    assert [c["model"] for c in run.llm.calls] == ["gpt-4o-mini", "gpt-4o-mini"]
    assert "qualificação" in run.llm.calls[1]["instructions"]
    assert "AMBIENTAL" in run.llm.calls[1]["instructions"]
    [reply] = outbound(session)
    assert (reply.content, reply.agent, reply.code) == (
        "Qual é a origem da água: poço ou rede pública?",
        "qualificacao",
        1,
    )
    assert run.sent == [reply.pk]
    session.refresh_from_db()
    assert (session.state, session.segment, session.intent) == (
        "QUALIFYING",
        "AMBIENTAL",
        "ORCAMENTO",
    )
    assert events(session) == [("state_changed", "to_qualification")]
    assert event_text(session.messages.get(direction=Direction.SYSTEM)) == (
        "Mudou para Qualificação (código 2)."
    )
    assert llm_calls(session) == [
        ("agent", "triagem", "gpt-4o-mini", "ok"),
        ("agent", "qualificacao", "gpt-4o-mini", "ok"),
    ]
    assert len({c.turn_id for c in LLMCall.objects.all()} | {reply.turn_id}) == 1


def test_routing_3_types_the_parameters_and_invokes_coleta(
    instance: Instance, capture: Any
) -> None:
    session = make_session(instance, S.QUALIFYING, **QUALIFYING)
    inbound(session, "São 3 amostras de poço")
    run = pipeline(
        '{"s":3,"servico":"AGUA_POTABILIDADE","qualification_data":'
        '{"tipo_amostra":"poço","quantidade_amostras":"3","cor":"turva"}}',
        '{"s":1}Ótimo! Qual é o seu nome completo?',
    )

    run.run(session, capture=capture)

    session.refresh_from_db()
    assert (session.state, session.service) == ("DATA_COLLECT", "AGUA_POTABILIDADE")
    assert session.technical_data == {"tipo_amostra": "poço", "quantidade_amostras": 3}
    assert session.technical_extras == {"cor": "turva"}
    assert [(m.agent, m.content) for m in outbound(session)] == [
        ("coleta", "Ótimo! Qual é o seu nome completo?")
    ]
    assert events(session) == [("state_changed", "to_collection")]


def test_code_4_asks_confirmation_and_syncs_name_and_document(
    instance: Instance, capture: Any
) -> None:
    session = make_session(instance, S.DATA_COLLECT, **COLLECTING)
    inbound(session, "ana@example.com")
    run = pipeline(
        '{"s":4,"cadastro":{"nome":"Ana Lima","documento":"529.982.247-25",'
        '"email":"ana@example.com","setor":"qualidade"}}Confere: **Ana Lima**, CPF 529.982.247-25?'
    )

    run.run(session, capture=capture)

    session.refresh_from_db()
    assert session.state == "CONFIRM"
    assert session.registration_data == REGISTRATION
    assert session.confirmation_data == REGISTRATION
    assert session.registration_extras == {"setor": "qualidade"}
    assert (session.customer_name, session.customer_document) == ("Ana Lima", VALID_CPF)
    assert [m.content for m in outbound(session)] == ["Confere: *Ana Lima*, CPF 529.982.247-25?"]
    assert events(session) == [("state_changed", "ask_confirmation")]


def test_code_5_creates_the_lead_and_hands_off_with_the_model_message(
    instance: Instance, capture: Any
) -> None:
    session = confirming(instance)
    inbound(session, "Sim, está tudo certo")
    run = pipeline('{"s":5}Perfeito, Ana! Sua solicitação foi registrada.')

    run.run(session, capture=capture)

    session.refresh_from_db()
    assert (session.state, session.handoff_reason, session.handoff_detail) == (
        "HUMAN",
        "qualified_lead",
        "",
    )
    lead = Lead.objects.get(session=session)
    assert lead.crm_status == CrmStatus.PENDING
    assert lead.data == {
        "nome_cliente": "Ana Lima",
        "telefone": CUSTOMER_PHONE,
        "segmento": "AMBIENTAL",
        "intencao": "ORCAMENTO",
        "servico": "AGUA_POTABILIDADE",
        "qualification_data": {"tipo_amostra": "poço", "quantidade_amostras": 2},
        "cadastro": REGISTRATION,
    }
    assert [m.content for m in outbound(session)] == [
        "Perfeito, Ana! Sua solicitação foi registrada."
    ]
    assert events(session) == [("lead_created", "confirmed"), ("handoff", "qualified_lead")]
    assert run.summaries == [session.pk]


def confirming(instance: Instance) -> Session:
    """A session in CONFIRM after a code 4 that showed REGISTRATION to the customer."""
    return make_session(
        instance,
        S.CONFIRM,
        **COLLECTING,
        registration_data=REGISTRATION,
        confirmation_data=REGISTRATION,
        customer_name="Ana Lima",
    )


def test_code_5_with_the_confirmed_data_repeated_creates_the_lead_with_it(
    instance: Instance, capture: Any
) -> None:
    session = confirming(instance)
    inbound(session, "Sim, pode registrar")
    run = pipeline(
        '{"s":5,"cadastro":{"nome":"Ana Lima","documento":"529.982.247-25",'
        '"email":"ana@example.com"}}Perfeito, Ana! Sua solicitação foi registrada.'
    )

    run.run(session, capture=capture)

    assert Lead.objects.get(session=session).data["cadastro"] == REGISTRATION
    session.refresh_from_db()
    assert (session.state, session.handoff_reason) == ("HUMAN", "qualified_lead")


def test_code_5_with_a_changed_e_mail_creates_no_lead_and_asks_to_confirm_the_new_data(
    instance: Instance, capture: Any
) -> None:
    session = confirming(instance)
    inbound(session, "Sim! Ah, use o e-mail novo: ana.lima@novo.com.br")
    run = pipeline(
        '{"s":5,"cadastro":{"email":"ana.lima@novo.com.br"}}Perfeito! Solicitação registrada.',
        '{"s":4,"cadastro":{}}Confere: *Ana Lima*, CPF 529.982.247-25, e-mail '
        "ana.lima@novo.com.br?",
    )

    run.run(session, capture=capture)

    assert not Lead.objects.exists()
    new_registration = REGISTRATION | {"email": "ana.lima@novo.com.br"}
    session.refresh_from_db()
    assert (session.state, session.handoff_reason) == ("CONFIRM", "")
    assert session.registration_data == new_registration
    assert session.confirmation_data == new_registration
    assert [m.content for m in outbound(session)] == [
        "Confere: *Ana Lima*, CPF 529.982.247-25, e-mail ana.lima@novo.com.br?"
    ]
    assert events(session) == [
        ("confirmation_changed", "confirmed"),
        ("state_changed", "confirmed"),
        ("state_changed", "ask_confirmation"),
    ]
    assert [call[1] for call in llm_calls(session)] == ["coleta", "coleta"]
    assert run.summaries == []


def test_a_change_made_after_code_4_must_be_confirmed_before_a_lead_exists(
    instance: Instance, capture: Any
) -> None:
    session = confirming(instance)
    inbound(session, "Troca o e-mail para ana.lima@novo.com.br")
    pipeline('{"s":1,"cadastro":{"email":"ana.lima@novo.com.br"}}Anotado! Posso registrar?').run(
        session, capture=capture
    )
    inbound(session, "Pode")
    run = pipeline(
        '{"s":5}Perfeito! Solicitação registrada.',
        '{"s":4}Confere o e-mail novo: ana.lima@novo.com.br?',
    )

    run.run(session, capture=capture)

    assert not Lead.objects.exists()
    session.refresh_from_db()
    assert session.state == "CONFIRM"
    assert session.confirmation_data == REGISTRATION | {"email": "ana.lima@novo.com.br"}
    inbound(session, "Isso")
    pipeline('{"s":5}Registrado!').run(session, capture=capture)
    assert Lead.objects.get(session=session).data["cadastro"] == REGISTRATION | {
        "email": "ana.lima@novo.com.br"
    }


def test_code_6_goes_back_to_data_collection(instance: Instance, capture: Any) -> None:
    session = confirming(instance)
    inbound(session, "O e-mail está errado")
    run = pipeline('{"s":6}Sem problema! Qual é o e-mail correto?')

    run.run(session, capture=capture)

    session.refresh_from_db()
    assert (session.state, session.confirmation_data) == ("DATA_COLLECT", None)
    assert session.registration_data == REGISTRATION
    assert [m.content for m in outbound(session)] == ["Sem problema! Qual é o e-mail correto?"]


def test_code_7_clears_the_subject_keeps_the_registration_and_invokes_triagem(
    instance: Instance, capture: Any
) -> None:
    session = make_session(
        instance,
        S.DATA_COLLECT,
        **COLLECTING,
        technical_extras={"cor": "turva"},
        registration_data=REGISTRATION,
        loaded_packages=["COMPANY_INFO"],
    )
    inbound(session, "Na verdade quero falar de outra coisa")
    run = pipeline('{"s":7}', '{"s":1}Claro! Sobre o que você quer falar?')

    run.run(session, capture=capture)

    session.refresh_from_db()
    assert (session.state, session.segment, session.intent, session.service) == (
        "TRIAGE",
        "",
        "",
        "",
    )
    assert (session.technical_data, session.technical_extras) == ({}, {})
    assert session.registration_data == REGISTRATION
    assert session.loaded_packages == ["COMPANY_INFO"]
    assert [(m.agent, m.content) for m in outbound(session)] == [
        ("triagem", "Claro! Sobre o que você quer falar?")
    ]
    assert events(session) == [("state_changed", "change_subject")]


def test_code_8_closes_the_session_with_the_goodbye(instance: Instance, capture: Any) -> None:
    session = make_session(instance)
    inbound(session, "Era só isso, obrigado")
    run = pipeline('{"s":8}Por nada! Até logo.')

    run.run(session, capture=capture)

    session.refresh_from_db()
    assert (session.state, session.closed_at, session.handoff_reason) == ("CLOSED", NOW, "")
    assert [m.content for m in outbound(session)] == ["Por nada! Até logo."]
    assert events(session) == [("session_closed", "end")]
    assert run.summaries == []


def test_code_98_hands_off_with_the_motive_and_the_fixed_text(
    instance: Instance, capture: Any
) -> None:
    session = make_session(instance, S.QUALIFYING, **QUALIFYING)
    inbound(session, "Quero reclamar do último laudo")
    run = pipeline('{"s":98,"motivo":"reclamacao"}Já vou chamar alguém em 5 minutos!')

    run.run(session, capture=capture)

    session.refresh_from_db()
    assert (session.state, session.handoff_reason, session.handoff_detail) == (
        "HUMAN",
        "model_requested",
        "reclamacao",
    )
    # The model's text (with its promise of a time) is never sent.
    assert [(m.content, m.action) for m in outbound(session)] == [(OPEN_TEXT, "model_requested")]
    handoff = session.messages.get(direction=Direction.SYSTEM)
    assert (handoff.agent, handoff.json_part) == (
        "qualificacao",
        {"reason": "model_requested", "detail": "reclamacao", "motive": "reclamacao"},
    )
    assert run.summaries == [session.pk]


def test_rejected_values_are_logged_and_not_merged(instance: Instance, capture: Any) -> None:
    session = make_session(instance, S.DATA_COLLECT, **COLLECTING)
    inbound(session, "meu email é ana arroba exemplo")
    run = pipeline(
        '{"s":1,"cadastro":{"nome":"Ana","email":"ana arroba exemplo"}}Pode confirmar o e-mail?'
    )

    run.run(session, capture=capture)

    session.refresh_from_db()
    assert session.registration_data == {"nome": "Ana"}
    assert events(session) == [("data_rejected", "respond")]
    event = session.messages.get(direction=Direction.SYSTEM)
    # The field and the rule, not the value: the event's details are shown and logged.
    assert (event.content, event.json_part) == (
        "",
        {"cadastro.email": {"error": "email inválido: não tem a forma nome@domínio"}},
    )
    assert event_text(event) == (
        "Valores recusados (não gravados): cadastro.email "
        "(email inválido: não tem a forma nome@domínio)."
    )
    assert [m.content for m in outbound(session)] == ["Pode confirmar o e-mail?"]


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
    assert PACKAGE_TEXT not in first["instructions"]
    assert PACKAGE_TEXT in second["instructions"]
    session.refresh_from_db()
    assert (session.state, session.loaded_packages) == ("QUALIFYING", ["COLETA_DE_AMOSTRAS"])
    assert events(session) == [("context_loaded", "context_needed")]
    assert [m.content for m in outbound(session)] == [
        "Use o frasco estéril que enviamos e não enxágue o frasco."
    ]
    snapshot = LLMCall.objects.order_by("id").last().context_snapshot
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


# --- Sessions the bot does not answer ----------------------------------------------------------------


@pytest.mark.parametrize("state", [S.HUMAN, S.CLOSED])
def test_human_and_closed_sessions_call_and_send_nothing(
    instance: Instance, capture: Any, state: SessionState
) -> None:
    session = make_session(instance, state)
    message = inbound(session, "Alguém aí?")
    run = pipeline()

    report = run.run(session, capture=capture)

    assert report.outcome is ProcessOutcome.DRAINED
    assert run.llm.calls == []
    assert (outbound(session), run.sent, run.read, run.summaries) == ([], [], [], [])
    message.refresh_from_db()
    assert message.processed_at == NOW
    assert LLMCall.objects.count() == 0


@pytest.mark.parametrize(
    ("phones", "cnpj", "session_fields"),
    [
        ("+55 11 98888-7777", "", {}),
        ("", "11222333000181", {"customer_document": "11222333000181"}),
    ],
    ids=["by-phone", "by-cnpj"],
)
def test_a_strategic_company_is_handed_off_before_any_model_call(
    instance: Instance, capture: Any, phones: str, cnpj: str, session_fields: dict[str, str]
) -> None:
    from prompts_admin.models import StrategicCompany

    StrategicCompany.objects.create(name="Indústria Parceira", cnpj=cnpj, phone_numbers=phones)
    session = make_session(instance, **session_fields)
    inbound(session, "Oi")
    run = pipeline()

    run.run(session, capture=capture)

    assert run.llm.calls == []
    session.refresh_from_db()
    assert (session.state, session.handoff_reason, session.handoff_detail) == (
        "HUMAN",
        "strategic_company",
        "Indústria Parceira",
    )
    assert [m.content for m in outbound(session)] == [OPEN_TEXT]
    assert events(session) == [("handoff", "strategic_company")]
    assert run.summaries == [session.pk]


def test_an_inactive_strategic_company_does_not_count(instance: Instance, capture: Any) -> None:
    from prompts_admin.models import StrategicCompany

    StrategicCompany.objects.create(
        name="Antiga", phone_numbers="+55 11 98888-7777", is_active=False
    )
    session = make_session(instance)
    inbound(session, "Oi")
    run = pipeline('{"s":1}Olá!')

    run.run(session, capture=capture)

    assert len(run.llm.calls) == 1
    session.refresh_from_db()
    assert session.state == "TRIAGE"


def test_a_strategic_cnpj_given_in_the_turn_hands_off_instead_of_the_reply(
    instance: Instance, capture: Any
) -> None:
    from prompts_admin.models import StrategicCompany

    StrategicCompany.objects.create(name="Indústria Parceira", cnpj="11222333000181")
    session = make_session(instance, S.DATA_COLLECT, **COLLECTING)
    # Written so that only the model reads it as a CNPJ: the rule after the model call decides.
    inbound(session, "O CNPJ é 11.222.333 barra 0001-81")
    run = pipeline('{"s":1,"cadastro":{"documento":"11.222.333/0001-81"}}E o nome da empresa?')

    run.run(session, capture=capture)

    assert len(run.llm.calls) == 1
    session.refresh_from_db()
    assert (session.state, session.handoff_reason, session.customer_document) == (
        "HUMAN",
        "strategic_company",
        "11222333000181",
    )
    assert [m.content for m in outbound(session)] == [OPEN_TEXT]


def test_a_strategic_cnpj_written_in_the_turn_hands_off_before_any_model_call(
    instance: Instance, capture: Any
) -> None:
    from prompts_admin.models import StrategicCompany

    StrategicCompany.objects.create(name="Indústria Parceira", cnpj="11222333000181")
    session = make_session(instance, S.DATA_COLLECT, **COLLECTING)
    inbound(session, "CNPJ 11.222.333/0001-81")
    run = pipeline('{"s":1}E o nome da empresa?')

    run.run(session, capture=capture)

    assert run.llm.calls == []
    session.refresh_from_db()
    assert (session.state, session.handoff_reason, session.handoff_detail) == (
        "HUMAN",
        "strategic_company",
        "Indústria Parceira",
    )
    assert [m.content for m in outbound(session)] == [OPEN_TEXT]
    assert LLMCall.objects.count() == 0


@pytest.mark.parametrize(
    "texts",
    [
        ["aqui é da acme"],
        ["Bom dia!", "Falo pela ACMÉ, do setor de qualidade"],
        ["Oi! Aqui é o Pedro, do setor de compras da Acme."],
    ],
)
def test_a_strategic_company_named_by_the_customer_is_handed_off_before_any_model_call(
    instance: Instance, capture: Any, texts: list[str]
) -> None:
    from prompts_admin.models import StrategicCompany

    StrategicCompany.objects.create(name="ACME S.A.", cnpj="11222333000181")
    session = make_session(instance)
    for text in texts:
        inbound(session, text)
    run = pipeline('{"s":1}Olá!')

    run.run(session, capture=capture)

    assert run.llm.calls == []
    session.refresh_from_db()
    assert (session.state, session.handoff_reason, session.handoff_detail) == (
        "HUMAN",
        "strategic_company",
        "ACME S.A.",
    )
    assert [m.content for m in outbound(session)] == [OPEN_TEXT]
    assert events(session) == [("handoff", "strategic_company")]
    assert run.summaries == [session.pk]
    assert LLMCall.objects.count() == 0


def test_a_name_inside_another_word_is_not_a_strategic_company(
    instance: Instance, capture: Any
) -> None:
    from prompts_admin.models import StrategicCompany

    StrategicCompany.objects.create(name="Alfa Ltda", cnpj="11222333000181")
    session = make_session(instance)
    inbound(session, "Oi, quero analisar a água da escola Alfabeto")
    run = pipeline('{"s":1}Olá! Como posso ajudar?')

    run.run(session, capture=capture)

    assert len(run.llm.calls) == 1
    session.refresh_from_db()
    assert (session.state, session.handoff_reason) == ("TRIAGE", "")
    assert [m.content for m in outbound(session)] == ["Olá! Como posso ajudar?"]


def test_a_strategic_company_collected_as_empresa_hands_off_instead_of_the_reply(
    instance: Instance, capture: Any
) -> None:
    from prompts_admin.models import StrategicCompany

    StrategicCompany.objects.create(name="Indústria Parceira Ltda-ME", cnpj="11222333000181")
    session = make_session(instance, S.DATA_COLLECT, **COLLECTING)
    inbound(session, "É a IP, Indústria Parceria")  # misspelt: only the model recognises it
    run = pipeline('{"s":1,"cadastro":{"empresa":"industria parceira"}}Qual é o CNPJ?')

    run.run(session, capture=capture)

    assert len(run.llm.calls) == 1
    session.refresh_from_db()
    assert (session.state, session.handoff_reason, session.handoff_detail) == (
        "HUMAN",
        "strategic_company",
        "Indústria Parceira Ltda-ME",
    )
    assert session.registration_data["empresa"] == "industria parceira"
    assert [m.content for m in outbound(session)] == [OPEN_TEXT]


def test_a_strategic_company_already_collected_as_empresa_hands_off_on_the_next_turn(
    instance: Instance, capture: Any
) -> None:
    from prompts_admin.models import StrategicCompany

    session = make_session(
        instance, S.DATA_COLLECT, **COLLECTING, registration_data={"empresa": "Parceira"}
    )
    # Registered after the customer named it (or activated again).
    StrategicCompany.objects.create(name="PARCEIRA EIRELI")
    inbound(session, "Pode seguir")
    run = pipeline('{"s":1}Qual é o CNPJ?')

    run.run(session, capture=capture)

    assert run.llm.calls == []
    session.refresh_from_db()
    assert (session.state, session.handoff_reason) == ("HUMAN", "strategic_company")


# --- Superseded drafts, the lease, the deadline ------------------------------------------------------


class DuringCall(FakeLLM):
    """A FakeLLM that runs `hooks[n]` while the n-th call is "thinking"."""

    def __init__(self, *answers: str | LLMError, hooks: dict[int, Any]) -> None:
        super().__init__(*answers)
        self.hooks = hooks

    def chat(self, **kwargs: Any) -> Any:
        hook = self.hooks.get(len(self.calls))
        if hook is not None:
            hook()
        return super().chat(**kwargs)


def test_a_message_arriving_during_the_model_call_supersedes_the_draft(
    instance: Instance, capture: Any
) -> None:
    session = make_session(instance)
    first = inbound(session, "Oi")
    late: list[Message] = []
    run = Pipeline(
        llm=DuringCall(
            '{"s":1}Olá! Como posso ajudar?',
            '{"s":1}Olá! Claro, vamos falar da análise de água.',
            hooks={0: lambda: late.append(inbound(session, "quero falar de análise de água"))},
        )
    )

    report = run.run(session, capture=capture)

    assert report == ProcessReport(ProcessOutcome.DRAINED, turns=1, superseded=1)
    draft, answer = outbound(session)
    assert (draft.content, draft.error, draft.delivery_status) == (
        "Olá! Como posso ajudar?",
        SUPERSEDED,
        "",
    )
    assert (answer.content, answer.error) == ("Olá! Claro, vamos falar da análise de água.", "")
    assert run.sent == [answer.pk]
    # The second call saw both messages, and not the superseded draft.
    assert [m.content for m in run.llm.calls[1]["messages"]] == [
        "Oi",
        "quero falar de análise de água",
    ]
    assert draft.turn_id != answer.turn_id
    for message in (first, late[0]):
        message.refresh_from_db()
        assert (message.processed_at, message.turn_id) == (NOW, answer.turn_id)


def test_a_superseded_turn_changes_nothing_in_the_session(instance: Instance, capture: Any) -> None:
    session = confirming(instance)
    inbound(session, "Sim")
    run = Pipeline(
        llm=DuringCall(
            '{"s":5}Registrado!',
            '{"s":6}Claro, o que deseja corrigir?',
            hooks={0: lambda: inbound(session, "Não, espera, o e-mail está errado")},
        )
    )

    run.run(session, capture=capture)

    assert not Lead.objects.exists()
    session.refresh_from_db()
    assert (session.state, session.handoff_reason) == ("DATA_COLLECT", "")
    assert [(m.content, m.error) for m in outbound(session)] == [
        ("Registrado!", SUPERSEDED),
        ("Claro, o que deseja corrigir?", ""),
    ]
    assert run.summaries == []


def test_a_handoff_is_committed_even_when_a_message_arrives_meanwhile(
    instance: Instance, capture: Any
) -> None:
    session = make_session(instance)
    inbound(session, "Quero falar com uma pessoa")
    run = Pipeline(
        llm=DuringCall(
            '{"s":98,"motivo":"pedido_cliente"}',
            hooks={0: lambda: inbound(session, "urgente!")},
        )
    )

    report = run.run(session, capture=capture)

    assert report == ProcessReport(ProcessOutcome.DRAINED, turns=2)
    assert len(run.llm.calls) == 1
    session.refresh_from_db()
    assert session.state == "HUMAN"
    assert [m.content for m in outbound(session)] == [OPEN_TEXT]
    assert pending(session) == 0


def test_staff_taking_the_session_during_the_call_discards_the_draft(
    instance: Instance, capture: Any
) -> None:
    session = make_session(instance)
    inbound(session, "Oi")

    def staff_takes_over() -> None:
        Session.objects.filter(pk=session.pk).update(state=S.HUMAN, handoff_reason="staff_takeover")

    run = Pipeline(llm=DuringCall('{"s":1}Olá!', hooks={0: staff_takes_over}))

    run.run(session, capture=capture)

    assert [(m.content, m.error) for m in outbound(session)] == [("Olá!", SUPERSEDED)]
    assert run.sent == []
    assert pending(session) == 0
    assert len(run.llm.calls) == 1


def test_a_held_lease_makes_the_second_worker_exit(instance: Instance, capture: Any) -> None:
    holder = uuid4()
    session = make_session(
        instance, lease_token=holder, lease_expires_at=NOW + timedelta(minutes=1)
    )
    inbound(session, "Oi")
    run = pipeline()

    report = run.run(session, capture=capture)

    assert report == ProcessReport(ProcessOutcome.BUSY)
    assert run.llm.calls == []
    assert pending(session) == 1
    session.refresh_from_db()
    assert session.lease_token == holder


def test_an_expired_lease_is_taken_over(instance: Instance, capture: Any) -> None:
    session = make_session(
        instance, lease_token=uuid4(), lease_expires_at=NOW - timedelta(seconds=1)
    )
    inbound(session, "Oi")
    run = pipeline('{"s":1}Olá!')

    report = run.run(session, capture=capture)

    assert report == ProcessReport(ProcessOutcome.DRAINED, turns=1)
    assert [m.content for m in outbound(session)] == ["Olá!"]
    session.refresh_from_db()
    assert (session.lease_token, session.lease_expires_at) == (None, None)


def test_a_worker_that_lost_its_lease_writes_and_sends_nothing(
    instance: Instance, capture: Any
) -> None:
    session = make_session(instance)
    message = inbound(session, "Oi")
    other = uuid4()

    def another_worker_takes_over() -> None:
        Session.objects.filter(pk=session.pk).update(lease_token=other)

    run = Pipeline(llm=DuringCall('{"s":1}Olá!', hooks={0: another_worker_takes_over}))

    report = run.run(session, capture=capture)

    assert report == ProcessReport(ProcessOutcome.LEASE_LOST)
    assert outbound(session) == []
    assert run.sent == []
    message.refresh_from_db()
    assert message.processed_at is None
    session.refresh_from_db()
    assert session.lease_token == other
    # The call itself happened and is recorded: its cost is real.
    assert llm_calls(session) == [("agent", "triagem", "gpt-4o-mini", "ok")]


@pytest.mark.django_db(transaction=True)
def test_the_holder_drains_messages_that_arrive_after_its_turn(instance: Instance) -> None:
    session = make_session(instance)
    inbound(session, "Oi")
    run = pipeline('{"s":1}Olá!', '{"s":1}Claro!')

    def send_then_receive(message_id: int) -> None:
        # Runs right after the first turn's commit (no test transaction around it here).
        run.sent.append(message_id)
        if len(run.sent) == 1:
            inbound(session, "Tenho uma dúvida")

    deps = replace(run.deps(), send=send_then_receive)

    report = session_process(session_id=session.pk, deps=deps, config=run.config)

    assert report == ProcessReport(ProcessOutcome.DRAINED, turns=2)
    assert [m.content for m in outbound(session)] == ["Olá!", "Claro!"]
    assert run.sent == [m.pk for m in outbound(session)]
    assert pending(session) == 0


class OutOfTime(Exception):
    """Stands for Celery's SoftTimeLimitExceeded."""


def test_the_deadline_ends_the_turn_in_a_timeout_handoff_and_releases_the_lease(
    instance: Instance, capture: Any
) -> None:
    session = make_session(instance)
    message = inbound(session, "Oi")

    def deadline() -> None:
        raise OutOfTime

    run = Pipeline(llm=DuringCall('{"s":1}nunca', hooks={0: deadline}))

    report = run.run(session, capture=capture, deadline_errors=(OutOfTime,))

    assert report == ProcessReport(ProcessOutcome.DRAINED, turns=1)
    session.refresh_from_db()
    assert (session.state, session.handoff_reason, session.handoff_detail) == (
        "HUMAN",
        "llm_timeout",
        "task time limit exceeded",
    )
    assert (session.lease_token, session.lease_expires_at) == (None, None)
    assert [m.content for m in outbound(session)] == [OPEN_TEXT]
    message.refresh_from_db()
    assert message.processed_at == NOW
    assert run.summaries == [session.pk]


def test_an_unexpected_error_releases_the_lease_and_keeps_the_message_pending(
    instance: Instance, capture: Any
) -> None:
    session = make_session(instance)
    inbound(session, "Oi")

    def bug() -> None:
        raise RuntimeError("bug")

    run = Pipeline(llm=DuringCall('{"s":1}Olá', hooks={0: bug}))

    with pytest.raises(RuntimeError, match="bug"):
        run.run(session, capture=capture)

    session.refresh_from_db()
    assert (session.lease_token, pending(session), outbound(session)) == (None, 1, [])


# --- Query counts ----------------------------------------------------------------------------------

# Read once per task and shared by the pipeline and the invoker (`agents.sources.TaskScoped*`):
# runtime settings (2: RuntimeConfig, strategic companies) and the catalog (4: segments, intents,
# services, packages). The pipeline's own: claim the lease (1), the pending messages (1), the
# session with its instance (1), the commit (5: lock the session, look for newer messages, update
# the session, insert the messages, mark the turn's messages processed), and the drain (3: pending
# again, release, look once more). Each agent call: its agent's override (1), the history (1) and
# its LLMCall (1).
SHARED_READS = 2 + 4
PIPELINE_QUERIES = 1 + 1 + 1 + 5 + 3
AGENT_CALL_QUERIES = 1 + 1 + 1


def _queries_of_one_run(session: Session, run: Pipeline, capture: Any) -> list[str]:
    with CaptureQueriesContext(connection) as queries:
        run.run(session, capture=capture)
    # Savepoints exist only because the test runs inside a transaction.
    return [q["sql"] for q in queries.captured_queries if "SAVEPOINT" not in q["sql"]]


def test_a_respond_turn_runs_a_fixed_number_of_queries(instance: Instance, capture: Any) -> None:
    session = make_session(instance)
    inbound(session, "Oi")
    run = pipeline('{"s":1}Olá!')

    sql = _queries_of_one_run(session, run, capture)

    assert len(sql) == PIPELINE_QUERIES + SHARED_READS + AGENT_CALL_QUERIES == 20
    assert len(outbound(session)) == 1


def test_a_routing_turn_adds_only_the_second_agent_call(instance: Instance, capture: Any) -> None:
    session = make_session(instance)
    for text in ("Oi", "quero um orçamento", "de análise de água"):
        inbound(session, text)
    run = pipeline(
        '{"s":2,"segmento":"AMBIENTAL","intencao":"ORCAMENTO"}', '{"s":1}Qual a origem da água?'
    )

    sql = _queries_of_one_run(session, run, capture)

    # Three messages in the turn cost no more than one; the routing event shares the insert.
    assert len(sql) == PIPELINE_QUERIES + SHARED_READS + 2 * AGENT_CALL_QUERIES == 23
    assert len(outbound(session)) == 1
    assert events(session) == [("state_changed", "to_qualification")]
