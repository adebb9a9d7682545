"""Talk to the bot as a customer without WhatsApp (issue 14 §2): `python manage.py simulate`.

Each customer message goes through the real webhook use case
(`conversations.inbound.deliveries.webhook_delivery_receive`) as a Cloud API delivery built by
`simulated_text_delivery`, then the session's turn runs in this process, synchronously, through
the real pipeline (`conversations.turns.run.session_process`, with the collaborators of the
``process_session`` task) — except for the two seams that would leave the machine:

- sending: every OUTBOUND message goes through `conversations.sending.outbound_message_send`
  with the dry-run sender, whatever the configuration (stored as sent with a ``sim.`` wamid);
  mark-read does nothing;
- the handoff summary runs here too (`handoff_summary_generate`), not in a worker.

The session the message lands in is marked `Session.is_simulated` right after the delivery, before
its turn runs, so it never reaches the queue, the handoff alerts or the CRM. A phone whose open
session is a real customer's is refused. The same phone continues the same session across runs;
`simulated_session_reset` closes it, so the next message opens a new one.

`turn_report` says what one customer message did: the replies sent back, the session's state,
the last code, the handoff reason, the agents called, the KB packages loaded, tokens and cost.
"""

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import datetime
from decimal import ROUND_HALF_UP, Decimal
from typing import Any
from uuid import uuid4

from django.conf import settings
from django.db.models import Max
from django.utils import timezone

from agents.contract import parse_llm_response
from agents.states import AgentName, SessionState
from conversations.agent_sources import DatabaseCallRecorder
from conversations.handoff import handoff_summary_generate
from conversations.inbound.deliveries import webhook_delivery_receive
from conversations.inbound.session_rules import open_sessions
from conversations.model_prices import MODEL_PRICES_USD
from conversations.models import (
    SUPERSEDED,
    Direction,
    Instance,
    LLMCall,
    LLMCallPurpose,
    Message,
    Session,
)
from conversations.provider_circuit import task_llm_client
from conversations.sending import DRY_RUN_SENDER, outbound_message_send
from conversations.turns.deps import PipelineConfig, no_read_receipt
from conversations.turns.run import session_process
from conversations.turns.tasks import build_pipeline_deps
from prompts_admin.selectors import ChosenOverridesPromptSource

logger = logging.getLogger(__name__)

# The demo catalog's instance (conversations/fixtures/demo.json, loaded by `make bootstrap`).
DEMO_PHONE_NUMBER_ID = "100000000000001"
# A number no customer has (55 00 is no Brazilian area code).
SIMULATED_PHONE = "5500000000001"
SIMULATED_CUSTOMER_NAME = "Cliente Simulado"
_HEADERS = {"Content-Type": "application/json", "User-Agent": "lab-attendance-simulator"}


class SimulationError(Exception):
    """The simulator cannot run as asked; the message says what to do, in one line."""


@dataclass(frozen=True, slots=True)
class TurnReport:
    """What one customer message did (`--json` prints it as is)."""

    session_id: int
    replies: list[str]
    state: str
    code: int | None
    handoff_reason: str
    agents: list[str]
    packages: list[str]
    tokens: dict[str, int]
    cost_usd: float | None

    def as_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False)


def model_configured() -> bool:
    return bool(settings.OPENAI_API_KEY)


def simulation_instance(phone_number_id: str | None) -> Instance:
    """The active instance the simulated customer writes to (the demo's by default)."""
    wanted = phone_number_id or DEMO_PHONE_NUMBER_ID
    instance = Instance.objects.filter(phone_number_id=wanted, is_active=True).first()
    if instance is None:
        hint = (
            "pass --instance PHONE_NUMBER_ID of an active instance"
            if phone_number_id
            else "run `make bootstrap` (it loads the demo catalog) or pass --instance"
        )
        raise SimulationError(f"No active instance with phone_number_id {wanted}: {hint}.")
    return instance


def simulated_text_delivery(
    *, phone_number_id: str, phone: str, text: str, wamid: str, timestamp: int, name: str
) -> dict[str, Any]:
    """One customer text as the Cloud API delivers it (the shape of the webhook fixtures)."""
    return {
        "object": "whatsapp_business_account",
        "entry": [
            {
                "id": "0",
                "changes": [
                    {
                        "field": "messages",
                        "value": {
                            "messaging_product": "whatsapp",
                            "metadata": {
                                "display_phone_number": phone_number_id,
                                "phone_number_id": phone_number_id,
                            },
                            "contacts": [{"profile": {"name": name}, "wa_id": phone}],
                            "messages": [
                                {
                                    "from": phone,
                                    "id": wamid,
                                    "timestamp": str(timestamp),
                                    "type": "text",
                                    "text": {"body": text},
                                }
                            ],
                        },
                    }
                ],
            }
        ],
    }


def simulated_message_send(
    *,
    instance: Instance,
    phone: str,
    text: str,
    now: datetime | None = None,
    prompt_overrides: Mapping[AgentName, int] | None = None,
) -> TurnReport:
    """Deliver one customer text through the webhook use case and answer it in this process.

    `prompt_overrides` picks, per agent, a saved override (a draft too) for this turn only."""
    now = now or timezone.now()
    _refuse_real_customer(instance, phone)
    wamid = f"wamid.SIM{uuid4().hex}"
    document = simulated_text_delivery(
        phone_number_id=instance.phone_number_id,
        phone=phone,
        text=text,
        wamid=wamid,
        timestamp=int(now.timestamp()),
        name=SIMULATED_CUSTOMER_NAME,
    )
    last_call = LLMCall.objects.aggregate(last=Max("id"))["last"] or 0
    webhook_delivery_receive(
        raw_body=json.dumps(document).encode(),
        headers=_HEADERS,
        # The turn runs below, in this process, whatever the delivery would have enqueued.
        enqueue_turn=_ignore,
        enqueue_send=_send,
    )
    inbound = Message.objects.filter(wa_message_id=wamid).only("id", "session_id").first()
    if inbound is None:
        raise SimulationError("The delivery was not applied; see the webhook deliveries in admin.")
    session_id = inbound.session_id
    Session.objects.filter(pk=session_id).update(is_simulated=True)
    # A session with a human has nothing pending: its turn only finds that out.
    prompts = ChosenOverridesPromptSource(prompt_overrides) if prompt_overrides else None
    deps = replace(
        build_pipeline_deps(prompts=prompts),
        send=_send,
        mark_read=no_read_receipt,
        enqueue_summary=_summary,
    )
    session_process(session_id=session_id, deps=deps, config=PipelineConfig.from_settings())
    return turn_report(session_id=session_id, after_message_id=inbound.pk, after_call_id=last_call)


def simulated_session_reset(*, instance: Instance, phone: str) -> int | None:
    """Close the phone's open simulated session (the next message opens a new one); its id."""
    session = (
        open_sessions(instance.phone_number_id)
        .filter(customer_phone=phone, is_simulated=True)
        .first()
    )
    if session is None:
        return None
    Session.objects.filter(pk=session.pk).update(
        state=SessionState.CLOSED.value, closed_at=timezone.now()
    )
    return session.pk


def turn_report(*, session_id: int, after_message_id: int, after_call_id: int) -> TurnReport:
    """What was written for the session after the customer's message and model call ids."""
    session = Session.objects.only("state", "handoff_reason", "loaded_packages").get(pk=session_id)
    rows = list(
        Message.objects.filter(session_id=session_id, pk__gt=after_message_id)
        .exclude(error=SUPERSEDED)
        .order_by("id")
        .values("direction", "content", "code")
    )
    calls = list(
        LLMCall.objects.filter(session_id=session_id, pk__gt=after_call_id)
        .order_by("id")
        .values("agent", "purpose", "model", "tokens_input", "tokens_output", "raw_response")
    )
    # The model's last code (a handoff's 98 is in no row: its message is never sent), else the
    # last code written (a fixed answer).
    codes = [code for code in map(_model_code, calls) if code is not None] or [
        r["code"] for r in rows if r["code"] is not None
    ]
    agents: list[str] = []
    for call in calls:
        if call["purpose"] == LLMCallPurpose.AGENT and call["agent"] not in agents:
            agents.append(call["agent"])
    return TurnReport(
        session_id=session_id,
        replies=[r["content"] for r in rows if r["direction"] == Direction.OUTBOUND],
        state=session.state,
        code=codes[-1] if codes else None,
        handoff_reason=session.handoff_reason,
        agents=agents,
        packages=[str(p) for p in session.loaded_packages or []],
        tokens={
            "input": sum(c["tokens_input"] for c in calls),
            "output": sum(c["tokens_output"] for c in calls),
        },
        cost_usd=calls_cost_usd(calls),
    )


def _model_code(call: Mapping[str, Any]) -> int | None:
    if call["purpose"] not in (LLMCallPurpose.AGENT, LLMCallPurpose.REPAIR):
        return None
    try:
        return parse_llm_response(call["raw_response"]).s
    except ValueError:  # LLMResponseParseError, or a JSON part without a valid "s"
        return None


def calls_cost_usd(calls: Sequence[Mapping[str, Any]]) -> float | None:
    """The calls' cost at `MODEL_PRICES_USD`; None when a model has no listed price."""
    total = Decimal(0)
    for call in calls:
        prices = MODEL_PRICES_USD.get(call["model"])
        if prices is None:
            return None
        total += (call["tokens_input"] * prices[0] + call["tokens_output"] * prices[1]) / 1_000_000
    return float(total.quantize(Decimal("0.000001"), rounding=ROUND_HALF_UP))


def _refuse_real_customer(instance: Instance, phone: str) -> None:
    real = (
        open_sessions(instance.phone_number_id)
        .filter(customer_phone=phone, is_simulated=False)
        .exists()
    )
    if real:
        raise SimulationError(
            f"{phone} has an open conversation of a real customer; use another --phone."
        )


def _send(message_id: int) -> None:
    # The dry-run sender whatever the configuration: nothing leaves the machine.
    outbound_message_send(message_id=message_id, client=DRY_RUN_SENDER, swept_later=False)


def _ignore(_object_id: int) -> None:
    return None


def _summary(session_id: int) -> None:
    handoff_summary_generate(
        session_id=session_id,
        llm=task_llm_client(),
        recorder=DatabaseCallRecorder(),
        model=settings.OPENAI_MODEL_SUMMARY,
    )
