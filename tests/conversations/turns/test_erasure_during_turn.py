"""An erasure while the model thinks a turn of the same conversation: the anonymisation revokes
the turn's lease, so the turn writes and sends nothing, and its model call keeps its counts but
not its texts."""

from typing import Any

import pytest

from conversations.customer_data import CustomerSelector, customer_data_erase
from conversations.models import LLMCall, Session
from tests.agents.support import NOW
from tests.conversations.turns.support import (
    CUSTOMER_PHONE,
    DuringCall,
    Pipeline,
    inbound,
    make_instance,
    make_session,
    outbound,
    pending,
)

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("catalog")]


def test_a_turn_running_while_its_customer_is_erased_leaves_nothing_of_them(capture: Any) -> None:
    session = make_session(make_instance(), customer_name="Joana Erasmo")
    inbound(session, "Oi, sou a Joana Erasmo")

    def erase() -> None:
        customer_data_erase(CustomerSelector(phone=CUSTOMER_PHONE), now=NOW, operator="ops")

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
