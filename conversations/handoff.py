"""Handoff to the human team: the fixed text, the strategic-company rule, the operational summary.

- `handoff_text`: the customer never reads the model's words on a handoff it did not write for
  the customer (98 and every failure): outside business hours the "closed" text (nobody answers
  now, and it promises no time); in business hours the invalid-format fallback for
  ``llm_invalid_json`` and the "open" text for every other reason. Code 5 is the exception: the
  model's own closing message is sent (the pipeline does that, not this module).
- `strategic_company_for`: the deterministic rule that hands a strategic company's contact to a
  human before any model call: the session's phone, its CNPJ, or the company's name in what the
  customer wrote or in the collected `empresa`, belongs to an active one. The list never reaches
  a prompt.
- `handoff_summary_generate`: the use case behind the ``generate_handoff_summary`` task. It
  writes one `HandoffSummary` per run; when the model call fails or answers garbage it stores the
  minimal summary built from the session's facts with the error — it never touches the session,
  so a summary failure can never undo the handoff.
"""

import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from agents.business_hours import business_hours_status
from agents.llm import LLMClient, LLMError
from agents.sources import (
    BUILTIN_PROMPT_VERSION,
    CallRecorder,
    RuntimeSettings,
    StrategicCompanyInfo,
)
from agents.states import AgentName, HandoffReason
from agents.strategic_companies import strategic_company_match
from agents.summary import (
    OperationalSummary,
    SummaryFacts,
    TranscriptLine,
    generate_operational_summary,
)
from conversations.message_order import newest_in_conversation_order
from conversations.models import SUPERSEDED, Direction, HandoffSummary, Message, Session

logger = logging.getLogger(__name__)

# The newest messages of the session given to the summary call.
SUMMARY_TRANSCRIPT_MESSAGES = 60
_AUTHOR = {Direction.INBOUND: "cliente", Direction.OUTBOUND: "assistente"}
_ERROR_CHARS = 255


def handoff_text(runtime: RuntimeSettings, *, reason: HandoffReason, now: datetime) -> str:
    """The fixed text sent to the customer for a handoff (see the module docstring)."""
    if not business_hours_status(runtime.business_hours, now).is_open:
        return runtime.handoff_message_closed
    if reason is HandoffReason.LLM_INVALID_JSON:
        return runtime.invalid_format_message
    return runtime.handoff_message_open


def strategic_company_for(
    runtime: RuntimeSettings, *, phone: str, document: str, texts: Sequence[str] = ()
) -> StrategicCompanyInfo | None:
    """The active strategic company this customer belongs to, if any.

    By phone, by CNPJ (the collected document, or one written in `texts`) or by the company's
    name in `texts` — the turn's inbound texts and the collected `empresa`; the rule is
    `agents.strategic_companies.strategic_company_match`. `runtime.strategic_companies` lists
    only active companies, phones as E.164 digits.
    """
    return strategic_company_match(
        runtime.strategic_companies, phone=phone, document=document, texts=texts
    )


def summary_facts(session: Session) -> SummaryFacts:
    """What the summary is written from: the session's fields and its recent conversation."""
    messages, _older = newest_in_conversation_order(
        Message.objects.filter(
            session_id=session.pk, direction__in=(Direction.INBOUND, Direction.OUTBOUND)
        )
        .exclude(error=SUPERSEDED)
        .exclude(content="")
        .only("id", "direction", "staff_user_id", "content", "wa_timestamp"),
        SUMMARY_TRANSCRIPT_MESSAGES,
    )
    transcript = tuple(
        TranscriptLine("equipe" if m.staff_user_id else _AUTHOR[Direction(m.direction)], m.content)
        for m in messages
    )
    # A strategic company's name (the detail of its handoff) is not sent to the summary model:
    # no prompt carries that list's data. Staff read it on the session.
    detail = (
        "" if session.handoff_reason == HandoffReason.STRATEGIC_COMPANY else session.handoff_detail
    )
    return SummaryFacts(
        handoff_reason=session.handoff_reason,
        handoff_detail=detail,
        customer_name=session.customer_name,
        customer_phone=session.customer_phone,
        segment=session.segment,
        intent=session.intent,
        service=session.service,
        technical_data=session.technical_data,
        registration_data=session.registration_data,
        transcript=transcript,
    )


def handoff_summary_generate(
    *, session_id: int, llm: LLMClient, recorder: CallRecorder, model: str
) -> HandoffSummary:
    """Write the operational summary of a handed-off session (never raises on a model failure)."""
    session = Session.objects.get(pk=session_id)
    facts = summary_facts(session)
    record: dict[str, Any] = {
        "session_id": session_id,
        "agent": AgentName.SUMMARY,
        "purpose": "summary",
        "prompt_version": BUILTIN_PROMPT_VERSION,
        "context_snapshot": None,
        "turn_id": None,
        "message_id": None,
    }
    raw = ""
    try:
        generation = generate_operational_summary(llm=llm, model=model, facts=facts)
    except LLMError as exc:
        recorder.record(model=model, result=None, error=exc, raw_response="", **record)
        summary: OperationalSummary = facts.fallback()
        error = f"{exc.outcome}: {exc}"
        used_model = model
    else:
        recorder.record(
            model=generation.call.model,
            result=generation.call,
            error=None,
            raw_response=generation.call.raw_response,
            **record,
        )
        summary = generation.summary
        error = summary.error
        raw = generation.call.raw_response
        used_model = generation.call.model
    stored = HandoffSummary.objects.create(
        session_id=session_id,
        closing_reason=summary.closing_reason[:255],
        identified_service=summary.identified_service[:255],
        segment=summary.segment[:255],
        key_points=list(summary.key_points),
        collected_data=dict(summary.collected_data),
        next_action=summary.next_action,
        summary_text=summary.summary_text,
        raw_json=raw,
        error=error[:_ERROR_CHARS],
        model=used_model[:64],
    )
    log = {"session_id": session_id, "summary_id": stored.pk}
    if error:
        logger.warning("handoff_summary_failed", extra={**log, "error": error})
    else:
        logger.info("handoff_summary_generated", extra=log)
    return stored
