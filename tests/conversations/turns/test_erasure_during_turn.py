"""An erasure while the model thinks for the same conversation: the anonymisation revokes a
turn's lease, so the turn writes and sends nothing, and its model call keeps its counts but not
its texts; a handoff summary being written is stored without them."""

from typing import Any

import pytest

from conversations.agent_sources import DatabaseCallRecorder
from conversations.handoff import handoff_summary_generate
from conversations.models import LLMCall, Session
from conversations.privacy.customer_data import CustomerSelector, customer_data_erase
from tests.helpers.fake_collaborators import NOW
from tests.helpers.pipeline import (
    CUSTOMER_PHONE,
    DuringCall,
    Pipeline,
    S,
    inbound,
    make_instance,
    make_session,
    outbound,
    pending,
)

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("catalog")]

SUMMARY = (
    '{"motivo_encerramento": "Joana Erasmo pediu um atendente", "servico_identificado": "",'
    ' "segmento": "", "pontos_chave": ["Cliente Joana Erasmo"], "dados_coletados": {},'
    ' "proxima_acao": "Ligar para a Joana", "resumo_texto": "Joana Erasmo quer um orçamento."}'
)


def erase() -> None:
    customer_data_erase(CustomerSelector(phone=CUSTOMER_PHONE), now=NOW, operator="ops")


def test_a_turn_running_while_its_customer_is_erased_leaves_nothing_of_them(capture: Any) -> None:
    session = make_session(make_instance(), customer_name="Joana Erasmo")
    inbound(session, "Oi, sou a Joana Erasmo")

    run = Pipeline(llm=DuringCall('{"s":1}Olá, Joana Erasmo! Como posso ajudar?', hooks={0: erase}))
    report = run.run(session, capture=capture)

    assert report.outcome == "lease_lost"
    assert (outbound(session), run.sent, pending(session)) == ([], [], 0)
    call = LLMCall.objects.get(session=session)
    assert (call.context_snapshot, call.raw_response, call.tokens_input, call.outcome) == (
        None,
        "",
        100,
        "ok",
    )
    session = Session.objects.get(pk=session.pk)
    assert (session.state, session.customer_name, session.lease_token) == ("CLOSED", "", None)


def test_a_summary_written_while_its_customer_is_erased_is_stored_without_their_data() -> None:
    session = make_session(make_instance(), customer_name="Joana Erasmo", state=S.HUMAN)
    inbound(session, "Oi, sou a Joana Erasmo, quero falar com alguém")

    summary = handoff_summary_generate(
        session_id=session.pk,
        llm=DuringCall(SUMMARY, hooks={0: erase}),
        recorder=DatabaseCallRecorder(),
        model="model-summary",
    )

    summary.refresh_from_db()
    assert (summary.summary_text, summary.closing_reason, summary.key_points) == ("", "", [])
    assert (summary.raw_json, summary.error) == ("", "anonymised while it was written")
    call = LLMCall.objects.get(session=session)
    assert (call.purpose, call.raw_response, call.tokens_input) == ("summary", "", 100)
