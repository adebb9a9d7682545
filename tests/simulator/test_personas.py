"""Simulated customers: a persona plays a whole conversation against a draft through the
simulator's pipeline, the customer and the agents answered by the scripted fake model
(tests/simulator/personas_script.py) through the real openai SDK; a fake Graph API with an access
token listens the whole time and must hear nothing.

The run tests commit (``transaction=True``), as the command and the task run: the after-commit
sends and the handoff summary run as they do there."""

import json
from decimal import Decimal
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from pytest_django import Settings

from agents.states import HandoffReason
from conversations.models import Direction, Lead, Message, SatisfactionSurvey, Session
from governance.models import (
    Persona,
    PersonaGoal,
    PersonaOutcome,
    PersonaResult,
    PersonaRun,
    ReplaySlot,
    ReplaySlotPool,
    ReplayStatus,
)
from governance.slots import slot_acquire
from knowledge_base.models import KBPackage
from prompts_admin.models import PromptOverride, RuntimeConfig
from simulator.personas import (
    Bubble,
    Expectation,
    PersonaRunRefused,
    chosen_option,
    customer_request,
    persona_outcome_check,
    persona_run_execute,
    persona_run_start,
    run_pin,
)
from tests.fakes.graph_server import FakeGraphAPI
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.webhook_receiver import WebhookReceiver, receiver  # noqa: F401 (fixture)
from tests.helpers.pipeline import OPEN_TEXT
from tests.simulator import personas_script as script

FARMER = script.FARMER
WANTS_HUMAN = script.WANTS_HUMAN
# Each call is answered with 10 input and 5 output tokens (the fake's default).
LEAD_CALLS = {
    # 4 customer messages; agents: triagem + qualificação, qualificação + coleta, coleta, coleta;
    # the summary after the lead.
    script.PERSONA_MODEL: 4,
    script.TRIAGE_MODEL: 1,
    script.QUALIFICATION_MODEL: 2,
    script.COLLECTION_MODEL: 3,
    script.SUMMARY_MODEL: 1,
}


def price(calls: dict[str, int]) -> Decimal:
    """10 input and 5 output tokens per call at the models' listed prices (per million)."""
    per_million = {
        "gpt-4.1-nano": (Decimal("0.10"), Decimal("0.40")),
        "gpt-4o-mini": (Decimal("0.15"), Decimal("0.60")),
        "gpt-4.1-mini": (Decimal("0.40"), Decimal("1.60")),
        "gpt-4.1": (Decimal("2.00"), Decimal("8.00")),
        "gpt-4o": (Decimal("2.50"), Decimal("10.00")),
    }
    total = Decimal(0)
    for model, count in calls.items():
        inp, out = per_million[model]
        total += count * (10 * inp + 5 * out) / Decimal(1_000_000)
    return total


@pytest.fixture
def world(
    transactional_db: None, settings: Settings, openai_settings: FakeOpenAIServer
) -> FakeOpenAIServer:
    """The catalog, the demo instance, one model per caller and the scripted model."""
    script.world_prepare(settings, openai_settings)
    return openai_settings


def farmer(**fields: Any) -> Persona:
    values: dict[str, Any] = {
        "title": "Produtor rural",
        "description": FARMER,
        "goal": PersonaGoal.LEAD,
        "expected_segment": "AMBIENTAL",
        "expected_service": "AGUA_POTABILIDADE",
        "required_fields": ["cadastro.documento", "qualification_data.quantidade_amostras"],
    }
    persona: Persona = Persona.objects.create(**(values | fields))
    return persona


def draft(content: str) -> PromptOverride:
    override: PromptOverride = PromptOverride.objects.create(
        agent="coleta", content=content, is_active=False
    )
    return override


def run_with(override: PromptOverride | None, *personas: Persona) -> PersonaRun:
    run = persona_run_start(override=override, persona_ids=[p.pk for p in personas])
    return persona_run_execute(run_id=run.pk)


# --- Pure parts ---------------------------------------------------------------------------------


def test_the_customer_model_reads_the_persona_and_the_conversation_from_its_side() -> None:
    transcript = [
        Bubble("customer", "Oi"),
        Bubble("bot", "Confere?", code=4, options=("Confirmar", "Corrigir")),
    ]

    instructions, messages = customer_request("  Produtor rural.  ", transcript)

    assert "Quem você é e o que quer:\nProdutor rural.\n" in instructions
    assert instructions.endswith("responda só [FIM].")
    assert [(m.role, m.content) for m in messages] == [
        ("assistant", "Oi"),
        ("user", "Confere?\nOpções: [Confirmar] [Corrigir]"),
    ]


def test_the_first_customer_message_is_asked_for_in_words() -> None:
    _instructions, messages = customer_request("Produtor rural.", [])

    assert [(m.role, m.content) for m in messages] == [
        ("user", "(A conversa ainda não começou: escreva a primeira mensagem do cliente.)")
    ]


@pytest.mark.parametrize(
    ("text", "tapped"),
    [("Confirmar", "Confirmar"), ("  corrigir ", "Corrigir"), ("Confirmar!", None), ("sim", None)],
)
def test_a_tap_is_an_option_title_exactly(text: str, tapped: str | None) -> None:
    assert chosen_option(text, ("Confirmar", "Corrigir")) == tapped


def test_a_lead_missing_a_required_field_or_of_another_service_is_missed() -> None:
    expected = Expectation(
        goal=PersonaGoal.LEAD, service="AGUA_POTABILIDADE", required_fields=("cadastro.email",)
    )
    lead = {"servico": "AGUA_RESIDUAL", "cadastro": {"email": ""}}

    differences = persona_outcome_check(
        expected, outcome=PersonaOutcome.LEAD, handoff_reason="qualified_lead", lead=lead
    )

    assert differences == [
        "o serviço do pedido é AGUA_RESIDUAL, esperado AGUA_POTABILIDADE",
        "falta no pedido o campo cadastro.email",
    ]


def test_a_handoff_of_another_reason_is_missed() -> None:
    expected = Expectation(goal=PersonaGoal.HANDOFF, handoff_reason="model_requested")

    differences = persona_outcome_check(
        expected, outcome=PersonaOutcome.HANDOFF, handoff_reason="llm_invalid_contract", lead=None
    )

    assert differences == [
        "esperada uma transferência (transferida pela assistente), obtido: resposta do modelo fora do contrato"
    ]


# --- Runs ---------------------------------------------------------------------------------------


def test_a_persona_reaches_its_confirmed_request_on_a_good_draft(
    world: FakeOpenAIServer, fake_graph: FakeGraphAPI
) -> None:
    persona = farmer()
    good = draft(script.GOOD_DRAFT)

    run = run_with(good, persona)

    result = PersonaResult.objects.get()
    assert (run.status, run.personas_done, run.reached, run.failed) == ("done", 1, 1, 0)
    assert (result.reached, result.outcome, result.handoff_reason, result.differences) == (
        True,
        "lead",
        "qualified_lead",
        [],
    )
    assert (result.turns, result.handoffs, result.contract_errors) == (4, 1, 0)
    assert (result.tokens_input, result.cached_tokens, result.tokens_output) == (110, 0, 55)
    # price(LEAD_CALLS) is 0.0002955, stored to 6 places.
    assert price(LEAD_CALLS) == Decimal("0.0002955")
    assert result.cost_usd == run.cost_usd == Decimal("0.000296")
    assert [(b["who"], b["text"], b["code"], b["tap"]) for b in result.transcript] == [
        ("customer", script.FIRST, None, False),
        ("bot", script.ASK_SAMPLES, 1, False),
        ("customer", script.SAMPLES, None, False),
        ("bot", script.ASK_DATA, 1, False),
        ("customer", script.REGISTRATION, None, False),
        ("bot", script.CONFIRM_TEXT, 4, False),
        ("customer", "Confirmar", None, True),
        ("bot", script.DONE_TEXT, 5, False),
    ]
    assert result.transcript[5]["options"] == ["Confirmar", "Corrigir"]
    session = Session.objects.get()
    assert (session.is_simulated, session.state) == (True, "HUMAN")
    assert session.prompt_versions["coleta"] == (f"override:{good.history.latest().history_id}")
    # The draft's text reached the collection agent, and only it.
    collection = [r for r in world.requests if r["model"] == script.COLLECTION_MODEL]
    assert [r["instructions"].startswith("RASCUNHO BOM da coleta de Lia") for r in collection] == [
        True,
        True,
        True,
    ]
    assert fake_graph.requests == []


def test_the_same_persona_fails_on_a_broken_draft(
    world: FakeOpenAIServer, fake_graph: FakeGraphAPI
) -> None:
    persona = farmer()

    run = run_with(draft(script.BROKEN_DRAFT), persona)

    result = PersonaResult.objects.get()
    assert (run.status, run.reached, run.failed) == ("done", 0, 1)
    assert (result.reached, result.outcome, result.handoff_reason) == (
        False,
        "handoff",
        "llm_invalid_contract",
    )
    assert result.differences == [
        "esperado um pedido confirmado, obtido: resposta do modelo fora do contrato"
    ]
    assert (result.turns, result.handoffs, result.contract_errors) == (2, 1, 1)
    assert Lead.objects.count() == 0
    assert fake_graph.requests == []


def test_without_a_draft_the_prompts_in_use_are_pinned(world: FakeOpenAIServer) -> None:
    active = PromptOverride.objects.create(
        agent="coleta", content=script.BROKEN_DRAFT, is_active=True
    )

    run = run_with(None, farmer())

    version = f"override:{active.history.latest().history_id}"
    assert run.prompt_versions == {
        "triagem": "builtin",
        "qualificacao": "builtin",
        "coleta": version,
    }
    assert (run.override_id, run.failed) == (None, 1)
    assert Session.objects.get().prompt_versions == run.prompt_versions


def test_the_knowledge_versions_at_the_start_are_pinned_an_edit_meanwhile_reaches_none(
    world: FakeOpenAIServer,
) -> None:
    package = KBPackage.objects.create(
        package_id="POTABILIDADE", title="Potabilidade", description="Água", content="v1"
    )
    at_start = package.history.latest().history_id
    KBPackage.objects.create(
        package_id="RASCUNHO",
        title="Rascunho",
        description="Ainda não",
        content="x",
        is_active=False,
    )
    run = persona_run_start(override=None, persona_ids=[farmer().pk])
    package.content = "v2"
    package.save()

    run = persona_run_execute(run_id=run.pk)

    assert run.package_versions == {"POTABILIDADE": at_start}
    assert Session.objects.get().package_versions == {"POTABILIDADE": at_start}
    # The edit made a newer version, which the run did not take.
    assert package.history.latest().history_id > at_start


@pytest.mark.parametrize(
    ("max_turns", "reached", "outcome"),
    [(4, True, "lead"), (3, False, "max_turns"), (1, False, "max_turns")],
)
def test_the_message_limit_is_reached_at_its_last_message(
    world: FakeOpenAIServer, max_turns: int, reached: bool, outcome: str
) -> None:
    run_with(draft(script.GOOD_DRAFT), farmer(max_turns=max_turns))

    result = PersonaResult.objects.get()
    assert (result.reached, result.outcome, result.turns) == (reached, outcome, max_turns)


def test_a_handoff_persona_reaches_its_handoff(world: FakeOpenAIServer) -> None:
    persona = Persona.objects.create(
        title="Quer uma pessoa",
        description=WANTS_HUMAN,
        goal=PersonaGoal.HANDOFF,
        expected_handoff_reason=HandoffReason.MODEL_REQUESTED.value,
    )

    run = run_with(None, persona)

    result = PersonaResult.objects.get()
    assert (run.reached, result.reached, result.outcome, result.handoff_reason) == (
        1,
        True,
        "handoff",
        "model_requested",
    )
    assert [(b["who"], b["text"]) for b in result.transcript] == [
        ("customer", script.HUMAN),
        ("bot", OPEN_TEXT),
    ]


@pytest.mark.parametrize(
    ("limit", "status", "played", "outcome"),
    [
        # At the limit: the first conversation's cost reaches it; the second is not played.
        (price(LEAD_CALLS), "capped", 1, "lead"),
        # Just above what the first cost: the second starts, and stops at its first message.
        (price(LEAD_CALLS) + Decimal("0.000001"), "capped", 2, "cost_cap"),
    ],
)
def test_the_cost_cap_stops_the_run_at_its_limit(
    world: FakeOpenAIServer,
    settings: Settings,
    limit: Decimal,
    status: str,
    played: int,
    outcome: str,
) -> None:
    settings.REPLAY_MAX_COST_USD = float(limit)
    first, second = farmer(title="A"), farmer(title="B")

    run = run_with(draft(script.GOOD_DRAFT), first, second)

    assert (run.status, run.personas_done) == (status, played)
    assert str(run.detail).startswith("Parou no limite REPLAY_MAX_COST_USD")
    assert list(PersonaResult.objects.values_list("outcome", flat=True))[-1] == outcome


def test_nothing_real_is_counted_sent_or_delivered(
    world: FakeOpenAIServer,
    fake_graph: FakeGraphAPI,
    settings: Settings,
    receiver: WebhookReceiver,  # noqa: F811 (the fixture)
) -> None:
    settings.CRM_WEBHOOK_URL = settings.HANDOFF_WEBHOOK_URL = receiver.url
    config = RuntimeConfig.load()
    config.satisfaction_after_lead = True
    config.save()

    run_with(draft(script.GOOD_DRAFT), farmer())

    lead = Lead.objects.get()
    assert (lead.session.is_simulated, lead.crm_status) == (True, "not_configured")
    assert receiver.received == []
    assert SatisfactionSurvey.objects.count() == 0
    assert fake_graph.requests == []
    sent = Message.objects.filter(direction=Direction.OUTBOUND).values_list(
        "wa_message_id", flat=True
    )
    assert all(str(wamid).startswith("sim.") for wamid in sent)


def test_a_run_waits_while_every_run_slot_is_taken(
    world: FakeOpenAIServer, settings: Settings
) -> None:
    settings.REPLAY_MAX_RUNNING = 1
    run = persona_run_start(override=None, persona_ids=[farmer().pk])
    other = PersonaRun.objects.create()
    slot_acquire(
        pool=ReplaySlotPool.RUN,
        cap=1,
        persona_run_id=other.pk,
        now=run.created_at,
        lease=__import__("datetime").timedelta(hours=1),
    )

    assert persona_run_execute(run_id=run.pk).status == ReplayStatus.QUEUED
    assert world.request_count == 0
    assert ReplaySlot.objects.filter(persona_run=run).count() == 0


def test_an_unpriced_persona_model_is_refused(world: FakeOpenAIServer, settings: Settings) -> None:
    settings.OPENAI_MODEL_PERSONA = "modelo-sem-preco"
    farmer()

    with pytest.raises(PersonaRunRefused, match="modelo-sem-preco"):
        persona_run_start(override=None)

    assert PersonaRun.objects.count() == 0


def test_the_pin_keeps_the_draft_for_its_agent_and_the_active_ones(world: FakeOpenAIServer) -> None:
    active = PromptOverride.objects.create(
        agent="triagem", content="Triagem ativa.", is_active=True
    )
    good = draft(script.GOOD_DRAFT)

    assert run_pin(good) == {
        "triagem": f"override:{active.history.latest().history_id}",
        "qualificacao": "builtin",
        "coleta": f"override:{good.history.latest().history_id}",
    }


# --- The command --------------------------------------------------------------------------------


def simulate(*args: str) -> tuple[str, int]:
    out = StringIO()
    try:
        call_command("simulate_personas", *args, stdout=out)
    except SystemExit as exit_:
        return out.getvalue(), int(exit_.code or 0)
    return out.getvalue(), 0


def test_the_command_prints_json_and_exits_1_when_a_persona_fails(world: FakeOpenAIServer) -> None:
    broken = draft(script.BROKEN_DRAFT)
    persona = farmer()

    output, code = simulate("--override", str(broken.pk), "--json")

    data = json.loads(output)
    run = PersonaRun.objects.get()
    session = Session.objects.get()
    assert code == 1
    assert data == {
        "run_id": run.pk,
        "status": "done",
        "detail": "",
        "override": broken.pk,
        "release": None,
        "personas": 1,
        "reached": 0,
        "failed": 1,
        "cost_usd": f"{run.cost_usd:.6f}",
        "results": [
            {
                "persona": persona.pk,
                "title": "Produtor rural",
                "reached": False,
                "outcome": "handoff",
                "handoff_reason": "llm_invalid_contract",
                "differences": [
                    "esperado um pedido confirmado, obtido: resposta do modelo fora do contrato"
                ],
                "turns": 2,
                "handoffs": 1,
                "contract_errors": 1,
                "tokens": {"input": 70, "cached": 0, "output": 35},
                "cost_usd": f"{run.cost_usd:.6f}",
                "session_id": session.pk,
            }
        ],
    }


def test_the_command_exits_0_and_prints_a_line_per_persona(world: FakeOpenAIServer) -> None:
    persona = farmer()
    good = draft(script.GOOD_DRAFT)

    output, code = simulate("--override", str(good.pk), "--persona", str(persona.pk))

    cost = "0.000296"
    assert code == 0
    assert output == (
        f"ok   #{persona.pk} Produtor rural: lead (qualified_lead), 4 messages, "
        f"0 contract errors, cost_usd {cost}\n"
        f"personas: 1, reached: 1, failed: 0, cost_usd: {cost}\n"
    )


def test_the_command_refuses_an_unknown_override(world: FakeOpenAIServer) -> None:
    with pytest.raises(CommandError, match="no prompt override with id 999"):
        simulate("--override", "999")
