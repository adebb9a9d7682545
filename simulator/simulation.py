"""Talk to the bot as a customer without WhatsApp: `python manage.py simulate` and the admin's
simulator page, `simulator.admin` (docs/operations.md, Try it without WhatsApp).

Each customer message is a Cloud API delivery built by `simulated_text_delivery` and applied by
the webhook's own use case for parsed payloads (`conversations.inbound.events.payload_apply`),
with ``simulated=True``: it finds and opens simulated sessions only (`Session.is_simulated`), as
a real delivery finds real ones only, so the two never share a session. No `WebhookDelivery`
row is written (nothing came from Meta) and nothing is counted (`conversations.prometheus`).
Simulated phones come from a reserved range (`SIMULATED_PHONE_PREFIX`: 55 00 is no Brazilian
area code); a phone of that range that a real conversation ever used is refused too.

Then the session's turn runs through the real pipeline (`conversations.turns.run.session_process`,
with the collaborators of the ``process_session`` task) except for the two seams that would
leave the machine:

- sending: every OUTBOUND message goes through `conversations.sending.outbound_message_send`
  with the dry-run sender, whatever the configuration (stored as sent with a ``sim.`` wamid) —
  a second guard beside `sending.sender_for`, which routes simulated sessions there too;
  mark-read does nothing;
- the handoff summary runs in the same call (`handoff_summary_generate`), not in a worker.

The page never runs a turn in the web worker: `simulated_turn_start` writes a `SimulatedTurn`
and enqueues the ``conversations.simulated_turn`` task, one turn in flight per staff member and
at most ``SIMULATOR_MAX_TURNS_PER_MINUTE`` a minute; the page polls the row.
"""

import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from typing import Any
from uuid import uuid4

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils import timezone
from django.utils.translation import gettext as _

from agents.contract import parse_llm_response
from agents.llm import LLMClient
from agents.phones import customer_phone_key
from agents.states import AgentName, SessionState
from conversations.agent_sources import DatabaseCallRecorder
from conversations.handoff import handoff_summary_generate
from conversations.inbound.events import payload_apply
from conversations.inbound.session_rules import open_session_find
from conversations.model_prices import call_cost_usd
from conversations.models import (
    SUPERSEDED,
    Direction,
    Instance,
    LLMCall,
    LLMCallPurpose,
    Message,
    Session,
    SimulatedTurn,
)
from conversations.prometheus import uncounted
from conversations.provider_circuit import task_llm_client
from conversations.sending import DRY_RUN_SENDER, outbound_message_send
from conversations.turns.deps import PipelineConfig, no_read_receipt
from conversations.turns.run import session_process
from conversations.turns.tasks import build_pipeline_deps
from prompts_admin.selectors import ChosenOverridesPromptSource
from whatsapp.interactive import Option, options_of
from whatsapp.payload import Customer, parse_payload

logger = logging.getLogger(__name__)

# The demo catalog's instance (conversations/fixtures/demo.json, loaded by `make bootstrap`).
DEMO_PHONE_NUMBER_ID = "100000000000001"
# The simulated customers' phones: 55 (Brazil) then 00, which is no Brazilian area code, so no
# real customer has one. The command's default is one of them, the page's (one per staff member)
# too.
SIMULATED_PHONE_PREFIX = "5500"
SIMULATED_PHONE_DIGITS = range(12, 14)  # a Brazilian mobile or landline: 55 + DDD + 8 or 9
SIMULATED_PHONE = "5500000000001"
SIMULATED_CUSTOMER_NAME = "Cliente Simulado"
# What a turn older than this still in flight is taken for: lost (its task never ran, or died
# past Celery's hard limit); the staff member may send again.
TURN_LOST_AFTER = timedelta(seconds=settings.CELERY_TASK_TIME_LIMIT + 30)
TURNS_WINDOW = timedelta(minutes=1)
# A lost turn's `SimulatedTurn.error` (the page renders the label).
TURN_LOST = "lost"


class SimulationError(Exception):
    """The simulator cannot run as asked; the message says what to do, in one line."""


class SimulationLimited(SimulationError):
    """A staff member's turn in flight, or their turns per minute used up (pt-BR message)."""


@dataclass(frozen=True, slots=True)
class SimulatedDelivery:
    """Where one simulated customer message landed."""

    session_id: int
    inbound_id: int
    # The newest model call's id before the turn (0: none): the report counts the later ones.
    after_call_id: int


@dataclass(frozen=True, slots=True)
class SimulatedTap:
    """A tap on a reply button or list row of the bot's message, as the customer's phone sends
    it: the reply's type (``button_reply`` or ``list_reply``), the option, the message quoted."""

    reply_type: str
    option: Option
    quoted_wamid: str


@dataclass(frozen=True, slots=True)
class TurnReport:
    """What one customer message did (`--json` prints it as is)."""

    session_id: int
    replies: list[str]
    # The buttons or list rows under the last reply ({"id", "title"}; [] for a plain text).
    options: list[dict[str, str]]
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
    *,
    phone_number_id: str,
    phone: str,
    text: str,
    wamid: str,
    timestamp: int,
    name: str,
    tap: SimulatedTap | None = None,
) -> dict[str, Any]:
    """One customer text, or a tap on one of the bot's options, as the Cloud API delivers it
    (the shape of the webhook fixtures)."""
    message: dict[str, Any] = {
        "from": phone,
        "id": wamid,
        "timestamp": str(timestamp),
        "type": "text",
        "text": {"body": text},
    }
    if tap is not None:
        del message["text"]
        reply = {"id": tap.option.id, "title": tap.option.title}
        message |= {
            "type": "interactive",
            "interactive": {"type": tap.reply_type, tap.reply_type: reply},
            "context": {"from": phone_number_id, "id": tap.quoted_wamid},
        }
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
                            "messages": [message],
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
    """Deliver one customer text to the phone's simulated session and answer it in this
    process (the command's path).

    `prompt_overrides` picks, per agent, a saved override (a draft too) for this turn only."""
    delivered = simulated_message_deliver(instance=instance, phone=phone, text=text, now=now)
    simulated_turn_process(session_id=delivered.session_id, prompt_overrides=prompt_overrides)
    return turn_report(
        session_id=delivered.session_id,
        after_message_id=delivered.inbound_id,
        after_call_id=delivered.after_call_id,
    )


def simulated_phone_check(phone: str) -> None:
    """Refuse a phone outside the simulator's reserved range (`SIMULATED_PHONE_PREFIX`)."""
    if (
        not (phone.isascii() and phone.isdigit())
        or not phone.startswith(SIMULATED_PHONE_PREFIX)
        or len(phone) not in SIMULATED_PHONE_DIGITS
    ):
        raise SimulationError(
            f"{phone} is not a simulator phone: use 12 or 13 digits starting with "
            f"{SIMULATED_PHONE_PREFIX} (no real customer has one), e.g. {SIMULATED_PHONE}."
        )


def simulated_message_deliver(
    *,
    instance: Instance,
    phone: str,
    text: str,
    now: datetime | None = None,
    tap: SimulatedTap | None = None,
) -> SimulatedDelivery:
    """Apply one customer text (or `tap`, whose title is then the text), as the Cloud API would
    deliver it, to the phone's simulated session (opened when it has none); its turn is the
    caller's to run."""
    now = now or timezone.now()
    simulated_phone_check(phone)
    _refuse_real_customer(instance, phone)
    wamid = f"wamid.SIM{uuid4().hex}"
    document = simulated_text_delivery(
        phone_number_id=instance.phone_number_id,
        phone=phone,
        text=text,
        wamid=wamid,
        timestamp=int(now.timestamp()),
        name=SIMULATED_CUSTOMER_NAME,
        tap=tap,
    )
    last_call = LLMCall.objects.aggregate(last=Max("id"))["last"] or 0
    with transaction.atomic():
        payload_apply(
            parse_payload(document, received_at=now),
            # The caller runs the turn, whatever the delivery would have enqueued.
            enqueue_turn=_ignore,
            enqueue_send=simulated_reply_send,
            now=now,
            simulated=True,
        )
    inbound = Message.objects.filter(wa_message_id=wamid).only("id", "session_id").first()
    if inbound is None:
        raise SimulationError(f"The message was not applied: is instance {instance} active?")
    return SimulatedDelivery(
        session_id=inbound.session_id, inbound_id=inbound.pk, after_call_id=last_call
    )


def simulated_turn_process(
    *,
    session_id: int,
    prompt_overrides: Mapping[AgentName, int] | None = None,
    deadline_errors: tuple[type[BaseException], ...] = (),
    llm: LLMClient | None = None,
) -> None:
    """Run the simulated session's turn here, with the simulator's seams (module docstring),
    counted in no metric. A session with a human has nothing pending: its turn only finds that
    out. `llm`: the model client of every call of the turn, the summary's too (default: the
    task's)."""
    prompts = ChosenOverridesPromptSource(prompt_overrides) if prompt_overrides else None
    client = llm or task_llm_client()
    deps = replace(
        build_pipeline_deps(llm=client, prompts=prompts),
        send=simulated_reply_send,
        mark_read=no_read_receipt,
        enqueue_summary=lambda session_id: _summary(session_id, client),
    )
    with uncounted():
        session_process(
            session_id=session_id,
            deps=deps,
            config=PipelineConfig.from_settings(),
            deadline_errors=deadline_errors,
        )


def simulated_turn_start(
    *,
    user_id: int,
    instance: Instance,
    phone: str,
    text: str,
    prompt_overrides: Mapping[AgentName, int],
    enqueue: Callable[[int], object],
    now: datetime | None = None,
    tap: SimulatedTap | None = None,
) -> SimulatedTurn:
    """The page's message: refused (`SimulationLimited`) while the staff member has a turn in
    flight or has started ``SIMULATOR_MAX_TURNS_PER_MINUTE`` in the last minute; else the
    delivery applied, a `SimulatedTurn` written and `enqueue(turn id)` called after the commit
    (eager Celery runs the turn right there). A publish that fails ends the turn with its error,
    so the page never waits for it."""
    now = now or timezone.now()
    simulated_turns_expire(user_id=user_id, now=now)
    if SimulatedTurn.objects.filter(user_id=user_id, finished_at__isnull=True).exists():
        raise SimulationLimited(_("Wait for the answer to your previous message."))
    limit = settings.SIMULATOR_MAX_TURNS_PER_MINUTE
    recent = SimulatedTurn.objects.filter(
        user_id=user_id, started_at__gt=now - TURNS_WINDOW
    ).count()
    if recent >= limit:
        raise SimulationLimited(
            _("At most %(count)d simulator messages a minute: wait a little and send again.")
            % {"count": limit}
        )
    try:
        with transaction.atomic():
            turn = SimulatedTurn.objects.create(
                user_id=user_id,
                # The delivery's session and message rows wait for this commit.
                **_delivered_fields(
                    simulated_message_deliver(
                        instance=instance, phone=phone, text=text, now=now, tap=tap
                    )
                ),
                prompt_overrides={agent.value: pk for agent, pk in prompt_overrides.items()},
                started_at=now,
            )
    except IntegrityError as exc:
        # Another request of the same staff member started a turn first (one in flight).
        raise SimulationLimited(_("Wait for the answer to your previous message.")) from exc
    transaction.on_commit(lambda: _enqueue(enqueue, turn.pk))
    turn.refresh_from_db()
    return turn


def _enqueue(enqueue: Callable[[int], object], turn_id: int) -> None:
    try:
        enqueue(turn_id)
    except Exception as exc:  # the broker down, mostly
        logger.exception("simulated_turn_enqueue_failed", extra={"turn_id": turn_id})
        _turn_end(turn_id, error=exc.__class__.__name__)


def _delivered_fields(delivered: SimulatedDelivery) -> dict[str, int]:
    return {
        "session_id": delivered.session_id,
        "inbound_id": delivered.inbound_id,
        "after_call_id": delivered.after_call_id,
    }


def simulated_turn_run(
    *, turn_id: int, deadline_errors: tuple[type[BaseException], ...] = ()
) -> None:
    """The ``conversations.simulated_turn`` task's use case: run the turn, then store its report
    and latency. Idempotent: an ended turn is left as it is. A turn that raises is ended with the
    error's name (logged with its traceback): the page shows that it failed."""
    turn = SimulatedTurn.objects.filter(pk=turn_id, finished_at__isnull=True).first()
    if turn is None:
        return
    started = time.monotonic()
    overrides = {AgentName(agent): int(pk) for agent, pk in turn.prompt_overrides.items()}
    try:
        simulated_turn_process(
            session_id=turn.session_id,
            prompt_overrides=overrides,
            deadline_errors=deadline_errors,
        )
        report = turn_report(
            session_id=turn.session_id,
            after_message_id=turn.inbound_id,
            after_call_id=turn.after_call_id,
        )
    except Exception as exc:
        logger.exception("simulated_turn_failed", extra={"turn_id": turn_id})
        _turn_end(turn_id, error=exc.__class__.__name__)
        return
    _turn_end(turn_id, report=asdict(report), latency_ms=round((time.monotonic() - started) * 1000))


def simulated_turns_expire(*, user_id: int, now: datetime) -> int:
    """End the staff member's turns in flight for longer than `TURN_LOST_AFTER` (lost)."""
    return SimulatedTurn.objects.filter(
        user_id=user_id, finished_at__isnull=True, started_at__lt=now - TURN_LOST_AFTER
    ).update(finished_at=now, error=TURN_LOST)


def _turn_end(
    turn_id: int,
    *,
    report: dict[str, Any] | None = None,
    latency_ms: int | None = None,
    error: str = "",
) -> None:
    SimulatedTurn.objects.filter(pk=turn_id, finished_at__isnull=True).update(
        finished_at=timezone.now(), report=report, latency_ms=latency_ms, error=error[:255]
    )


def offered_tap(session_id: int, option_id: str) -> SimulatedTap | None:
    """The tap on option `option_id` of the session's last OUTBOUND message; None when that
    message offers no such option (a text, or an option of an older message)."""
    last = (
        Message.objects.filter(session_id=session_id, direction=Direction.OUTBOUND)
        .exclude(error=SUPERSEDED)
        .only("interactive", "wa_message_id")
        .order_by("-id")
        .first()
    )
    if last is None or not last.interactive:
        return None
    reply_type = "button_reply" if last.interactive.get("type") == "button" else "list_reply"
    for option in options_of(last.interactive):
        if option.id == option_id:
            return SimulatedTap(reply_type, option, last.wa_message_id or "")
    return None


def simulated_session_reset(*, instance: Instance, phone: str) -> int | None:
    """Close the phone's open simulated session (the next message opens a new one); its id."""
    session = open_session_find(
        instance.phone_number_id, Customer(phone=phone, user_id=""), simulated=True
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
        .values("direction", "content", "code", "interactive")
    )
    outbound = [r for r in rows if r["direction"] == Direction.OUTBOUND]
    calls = list(
        LLMCall.objects.filter(session_id=session_id, pk__gt=after_call_id)
        .order_by("id")
        .values(
            "agent",
            "purpose",
            "model",
            "tokens_input",
            "cached_tokens",
            "tokens_output",
            "raw_response",
        )
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
        replies=[r["content"] for r in outbound],
        options=[
            {"id": o.id, "title": o.title}
            for o in options_of(outbound[-1]["interactive"] if outbound else None)
        ],
        state=session.state,
        code=codes[-1] if codes else None,
        handoff_reason=session.handoff_reason,
        agents=agents,
        packages=[str(p) for p in session.loaded_packages or []],
        tokens={
            "input": sum(c["tokens_input"] for c in calls),
            "cached": sum(c["cached_tokens"] for c in calls),
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
    """The calls' cost (`call_cost_usd`, cached input at its own price); None when a model has
    no listed price."""
    total = Decimal(0)
    for call in calls:
        cost = call_cost_usd(
            call["model"],
            tokens_input=call["tokens_input"],
            tokens_output=call["tokens_output"],
            tokens_cached=call["cached_tokens"],
        )
        if cost is None:
            return None
        total += cost
    return float(total.quantize(Decimal("0.000001"), rounding=ROUND_HALF_UP))


def _refuse_real_customer(instance: Instance, phone: str) -> None:
    """A phone of the reserved range that a real conversation used (open or closed) stays
    theirs."""
    real = Session.objects.filter(instance=instance, is_simulated=False)
    if real.filter(customer_phone_key=customer_phone_key(phone)).exists():
        raise SimulationError(
            f"{phone} has a conversation of a real customer; use another simulator phone."
        )


def simulated_reply_send(message_id: int) -> None:
    """The simulator's `send`: the dry-run sender whatever the configuration and whatever the
    session says (`sending.sender_for` is the second guard, not the only one)."""
    outbound_message_send(message_id=message_id, client=DRY_RUN_SENDER, swept_later=False)


def _ignore(_object_id: int) -> None:
    return None


def _summary(session_id: int, llm: LLMClient) -> None:
    handoff_summary_generate(
        session_id=session_id,
        llm=llm,
        recorder=DatabaseCallRecorder(),
        model=settings.OPENAI_MODEL_SUMMARY,
    )
