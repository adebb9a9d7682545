"""The rows a turn writes, built in memory: the session's fields, the SYSTEM events, the model's
reply as OUTBOUND parts, the lead's snapshot (`conversations.turns.commit` writes them).

A reply with options (`Reply.options`: code 4's Confirmar / Corrigir, an answer's ``opcoes``)
goes out as an interactive message: up to 3 options that fit a button title become reply
buttons, else up to 10 that fit a list row a list message opened by `LIST_BUTTON_LABEL`. Only
the last part of a split reply carries them (WhatsApp shows them under the text they answer),
and that part must fit Meta's 1,024-character body, or it goes out as the text it is and the
drop is logged (``reply_options_dropped``): the customer can still type the answer.
"""

import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from agents.codes import code_spec
from agents.context import SessionContext
from conversations.dispatcher import SystemEvent, action_name
from conversations.models import DeliveryStatus, Direction, Message
from conversations.turns.result import Reply, Turn, TurnResult
from whatsapp.formatting import format_ai_message_for_whatsapp, split_for_whatsapp
from whatsapp.interactive import (
    INTERACTIVE_MESSAGE_TYPE,
    Option,
    fits_buttons,
    fits_list,
    list_message,
    reply_buttons,
)

logger = logging.getLogger(__name__)

# The label of the button that opens a list message (customer text: pt-BR, at most 20 chars).
LIST_BUTTON_LABEL = "Ver opções"


def session_fields(result: TurnResult, now: datetime) -> dict[str, Any]:
    """The session as the turn left it (a handoff's fields are `session_handoff`'s)."""
    context = result.context
    fields: dict[str, Any] = {
        "state": context.state.value,
        "segment": context.segment,
        "intent": context.intent,
        "service": context.service,
        "technical_data": dict(context.technical_data),
        "technical_extras": dict(context.technical_extras),
        "registration_data": dict(context.registration_data),
        "registration_extras": dict(context.registration_extras),
        "confirmation_data": (
            dict(context.confirmation_data) if context.confirmation_data is not None else None
        ),
        "loaded_packages": list(context.loaded_packages),
        "customer_name": context.customer_name[:200],
        "last_message_at": now,
    }
    document = str(context.registration_data.get("documento", ""))
    if document:
        fields["customer_document"] = document
    if result.close:
        fields["closed_at"] = now
    return fields


def event_rows(turn: Turn, events: Sequence[SystemEvent], now: datetime) -> list[Message]:
    return [
        Message(
            session_id=turn.session_id,
            direction=Direction.SYSTEM,
            message_type=event.event,
            agent=event.agent,
            code=event.code,
            action=event.action,
            json_part=dict(event.details) or None,
            raw_response=event.raw_response,
            turn_id=turn.turn_id,
            created_at=now,
        )
        for event in events
    ]


def reply_rows(turn: Turn, reply: Reply, now: datetime) -> list[Message]:
    """The model's message as OUTBOUND parts (a handoff's fixed text is `session_handoff`'s)."""
    parts = split_for_whatsapp(format_ai_message_for_whatsapp(reply.text))
    last = len(parts) - 1
    interactive = reply_interactive(parts[last], reply.options) if parts else None
    if reply.options and interactive is None:
        logger.warning(
            "reply_options_dropped",
            extra={
                "session_id": turn.session_id,
                "turn_id": str(turn.turn_id),
                "options": len(reply.options),
                "body_chars": len(parts[last]) if parts else 0,
            },
        )
    return [
        Message(
            session_id=turn.session_id,
            direction=Direction.OUTBOUND,
            message_type=INTERACTIVE_MESSAGE_TYPE
            if index == last and interactive is not None
            else "text",
            interactive=interactive if index == last else None,
            content=part,
            part_index=index,
            turn_id=turn.turn_id,
            delivery_status=DeliveryStatus.PENDING,
            created_at=now,
            agent=reply.agent.value,
            code=reply.parsed.s,
            action=action_name_of(reply.parsed.s),
            **(
                {"raw_response": reply.raw_response, "json_part": reply.parsed.json_part}
                if index == 0
                else {}
            ),
        )
        for index, part in enumerate(parts)
    ]


def reply_interactive(body: str, options: Sequence[Option]) -> dict[str, Any] | None:
    """The Graph API ``interactive`` object of `body` with `options`, or None to send the text
    (no options, or a body or options over Meta's limits)."""
    if not options:
        return None
    if fits_buttons(body, options):
        return reply_buttons(body, options)
    if fits_list(body, options):
        return list_message(body, options, button=LIST_BUTTON_LABEL)
    return None


def action_name_of(code: int) -> str:
    spec = code_spec(code)
    return action_name(spec.code) if spec else ""


def lead_data(context: SessionContext) -> dict[str, Any]:
    """The snapshot of a confirmed request, in the contract's field names.

    The registration is the one the code-4 message showed (the dispatcher accepts a code 5 only
    when the session's data still equals it).
    """
    confirmed = context.confirmation_data
    return {
        "nome_cliente": context.customer_name,
        "telefone": context.customer_phone,
        "segmento": context.segment,
        "intencao": context.intent,
        "servico": context.service,
        "qualification_data": dict(context.technical_data),
        "cadastro": dict(confirmed if confirmed is not None else context.registration_data),
    }
