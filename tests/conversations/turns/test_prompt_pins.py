"""Each conversation keeps the prompt versions its first turn pinned, through an activation, an edit
or a deactivation, until it ends; the simulator's chosen draft still wins; LLMCall.prompt_version is
the version used. Real turns on PostgreSQL: through the Celery task and the fake OpenAI server (the
real openai SDK), or the pipeline with the in-process model."""

import json
import logging
from typing import Any
from uuid import uuid4

import pytest
from django.utils import timezone

from agents.states import AgentName, SessionState
from conversations.inbound.deliveries import webhook_delivery_receive
from conversations.models import Instance, LLMCall, Message, Session
from conversations.turns.tasks import process_session
from prompts_admin.models import PromptOverride
from simulator.simulation import simulated_message_send, simulated_text_delivery
from tests.fakes.graph_server import FakeGraphAPI
from tests.fakes.openai_server import FakeOpenAIServer
from tests.helpers.pipeline import (
    DuringCall,
    Pipeline,
    inbound,
    make_session,
    pipeline,
)

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("catalog")]

ROUTE = '{"s":2,"segmento":"AMBIENTAL","intencao":"ORCAMENTO"}'


def activate(agent: str, content: str) -> tuple[PromptOverride, str]:
    """A new active override of `agent` (the previous one deactivated, as the admin does: each
    saved, with history); and the version a session pinning it now keeps."""
    for previous in PromptOverride.objects.filter(agent=agent, is_active=True):
        previous.is_active = False
        previous.save()
    override = PromptOverride.objects.create(agent=agent, content=content, is_active=True)
    return override, f"override:{override.history.get().history_id}"


def versions() -> list[str]:
    return list(LLMCall.objects.order_by("id").values_list("prompt_version", flat=True))


def pinned(session: Session) -> dict[str, str]:
    session.refresh_from_db()
    return dict(session.prompt_versions)


# --- Through the Celery task and the fake OpenAI server ----------------------------------------


def task_turn(session: Session, text: str, model: FakeOpenAIServer, capture: Any) -> str:
    """One customer message answered by `conversations.process_session`; the instructions the
    model received."""
    inbound(session, text)
    model.queue_text('{"s":1}Certo!')
    with capture(execute=True):
        assert process_session.delay(session.pk).get() == "drained"
    instructions: str = model.requests[-1]["instructions"]
    return instructions


def test_the_pinned_version_survives_an_activation_mid_conversation(
    instance: Instance, openai_settings: FakeOpenAIServer, fake_graph: FakeGraphAPI, capture: Any
) -> None:
    _old, old_version = activate("triagem", "PROMPT ANTIGO de {{ agent_name }}.")
    session = make_session(instance)

    first = task_turn(session, "Oi", openai_settings, capture)
    _new, new_version = activate("triagem", "PROMPT NOVO de {{ agent_name }}.")
    second = task_turn(session, "Quero um orçamento", openai_settings, capture)

    assert first.startswith("PROMPT ANTIGO de Lia.\n\n")
    assert second.startswith("PROMPT ANTIGO de Lia.\n\n")
    assert "PROMPT NOVO" not in second
    assert versions() == [old_version, old_version]
    assert new_version != old_version
    assert pinned(session) == {
        "triagem": old_version,
        "qualificacao": "builtin",
        "coleta": "builtin",
    }
    assert [send.json["text"]["body"] for send in fake_graph.sends] == ["Certo!", "Certo!"]


# --- Through the pipeline -----------------------------------------------------------------------


def run_turn(session: Session, text: str, capture: Any, *answers: str) -> Pipeline:
    inbound(session, text)
    run = pipeline(*(answers or ('{"s":1}Certo!',)))
    run.run(session, capture=capture)
    return run


def test_the_first_turn_pins_every_prompt_agents_active_version(
    instance: Instance, capture: Any
) -> None:
    _triagem, triagem = activate("triagem", "Triagem própria.")
    _coleta, coleta = activate("coleta", "Coleta própria.")
    PromptOverride.objects.create(agent="qualificacao", content="rascunho", is_active=False)
    session = make_session(instance)

    run_turn(session, "Oi", capture)

    assert pinned(session) == {"triagem": triagem, "qualificacao": "builtin", "coleta": coleta}
    assert versions() == [triagem]


def test_a_builtin_pin_survives_an_activation(instance: Instance, capture: Any) -> None:
    session = make_session(instance)
    run_turn(session, "Oi", capture)
    activate("triagem", "Nova triagem.")
    activate("qualificacao", "Nova qualificação.")

    run = run_turn(session, "orçamento de água", capture, ROUTE, '{"s":1}Qual a origem?')

    assert [c["instructions"][:26] for c in run.llm.calls] == ["Você é Lia, assistente vir"] * 2
    assert versions() == ["builtin"] * 3
    assert pinned(session) == {"triagem": "builtin", "qualificacao": "builtin", "coleta": "builtin"}


def test_the_pinned_text_is_used_after_the_override_is_edited_and_deactivated(
    instance: Instance, capture: Any
) -> None:
    override, first_version = activate("triagem", "Versão 1 de {{ agent_name }}.")
    session = make_session(instance)
    run_turn(session, "Oi", capture)
    override.content = "Versão 2 de {{ agent_name }}."
    override.save()
    edited = run_turn(session, "Tudo bem?", capture)
    override.is_active = False
    override.save()
    deactivated = run_turn(session, "Ainda aí?", capture)

    assert edited.llm.calls[0]["instructions"].startswith("Versão 1 de Lia.\n\n")
    assert deactivated.llm.calls[0]["instructions"].startswith("Versão 1 de Lia.\n\n")
    assert versions() == [first_version] * 3


def test_an_unresolved_pin_uses_the_active_override_and_is_logged(
    instance: Instance, capture: Any, caplog: pytest.LogCaptureFixture
) -> None:
    _active, active = activate("triagem", "Ativo de {{ agent_name }}.")
    pins = {"triagem": "override:unversioned-99", "qualificacao": "builtin", "coleta": "builtin"}
    session = make_session(instance, prompt_versions=pins, customer_name="Maria Silva")

    with caplog.at_level(logging.WARNING, logger="agents.invoker"):
        run = run_turn(session, "Oi", capture)

    assert run.llm.calls[0]["instructions"].startswith("Ativo de Lia.")
    assert versions() == [active]
    assert [
        (r.getMessage(), vars(r)["session_id"], vars(r)["agent"], vars(r)["prompt_version"])
        for r in caplog.records
    ] == [("prompt_pin_unresolved", session.pk, "triagem", "override:unversioned-99")]
    assert "Maria" not in caplog.text
    # The session keeps its pin: a staff action moves it, not a turn.
    assert pinned(session) == pins


def test_a_pin_staff_wrote_during_the_first_turn_is_kept(instance: Instance, capture: Any) -> None:
    _old, old = activate("triagem", "Antigo.")
    session = make_session(instance)
    inbound(session, "Oi")
    staff_pins = {"triagem": "builtin", "qualificacao": "builtin", "coleta": "builtin"}

    def staff_moves_it() -> None:
        Session.objects.filter(pk=session.pk).update(prompt_versions=staff_pins)

    Pipeline(llm=DuringCall('{"s":1}Olá!', hooks={0: staff_moves_it})).run(session, capture=capture)

    # The turn used the versions it pinned; the session keeps what staff chose.
    assert versions() == [old]
    assert pinned(session) == staff_pins


def test_a_turn_of_a_session_with_a_human_pins_nothing(instance: Instance, capture: Any) -> None:
    session = make_session(instance, SessionState.HUMAN)

    run_turn(session, "Oi", capture)

    assert pinned(session) == {}


def deliver(instance: Instance, text: str) -> Session:
    """One customer text through the webhook use case; the session it landed in."""
    wamid = f"wamid.PIN{uuid4().hex}"
    document = simulated_text_delivery(
        phone_number_id=instance.phone_number_id,
        phone="5511955554444",
        text=text,
        wamid=wamid,
        timestamp=int(timezone.now().timestamp()),
        name="Cliente",
    )
    webhook_delivery_receive(
        raw_body=json.dumps(document).encode(),
        headers={"Content-Type": "application/json"},
        enqueue_turn=lambda _id: None,
        enqueue_send=lambda _id: None,
    )
    return Message.objects.select_related("session").get(wa_message_id=wamid).session


def test_a_closed_sessions_next_message_opens_a_session_that_pins_anew(
    instance: Instance, capture: Any
) -> None:
    _old, old = activate("triagem", "Antigo.")
    first = deliver(instance, "Oi")
    pipeline('{"s":1}Olá!').run(first, capture=capture)
    Session.objects.filter(pk=first.pk).update(
        state=SessionState.CLOSED.value, closed_at=timezone.now()
    )
    _new, new = activate("triagem", "Novo.")

    second = deliver(instance, "Oi de novo")
    run = pipeline('{"s":1}Olá de novo!')
    run.run(second, capture=capture)

    assert second.pk != first.pk
    assert (pinned(first)["triagem"], pinned(second)["triagem"]) == (old, new)
    assert run.llm.calls[0]["instructions"].startswith("Novo.\n\n")
    assert versions() == [old, new]


@pytest.mark.django_db(transaction=True)
def test_the_simulators_chosen_draft_wins_over_the_sessions_pin(
    instance: Instance, openai_settings: FakeOpenAIServer, fake_graph: FakeGraphAPI
) -> None:
    _active, active = activate("triagem", "Ativo.")
    draft = PromptOverride.objects.create(agent="triagem", content="RASCUNHO de {{ agent_name }}.")
    draft_version = f"override:{draft.history.get().history_id}"
    openai_settings.queue_text('{"s":1}Olá!')
    openai_settings.queue_text('{"s":1}Pode falar.')

    simulated_message_send(instance=instance, phone="5500000000001", text="Oi")
    simulated_message_send(
        instance=instance,
        phone="5500000000001",
        text="Continuo",
        prompt_overrides={AgentName.TRIAGEM: draft.pk},
    )

    [session] = Session.objects.all()
    first, second = (r["instructions"] for r in openai_settings.requests)
    assert (first[:8], second[:18]) == ("Ativo.\n\n", "RASCUNHO de Lia.\n\n")
    assert versions() == [active, draft_version]
    # The draft served one simulated turn; the session keeps its pin.
    assert pinned(session)["triagem"] == active
    assert fake_graph.requests == []
