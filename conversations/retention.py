"""LGPD: how long customers' personal data is kept, and a customer's requests to see or erase it.

- `closed_sessions_anonymise`: a conversation closed more than `RETENTION_DAYS` ago is
  anonymised (beat runs it daily, `conversations.anonymise_expired_sessions`).
- `webhook_bodies_delete`: the raw webhook bodies (which repeat every message and name) are
  emptied after `WEBHOOK_BODY_RETENTION_DAYS`; the delivery's metadata and counts stay.
- `customer_data_export` / `customer_data_erase`: everything held about one phone number, as a
  JSON-ready dict, or anonymised everywhere (`manage.py export_customer_data` /
  `erase_customer_data`).

Anonymising replaces the customer's identity fields with nothing and masks names, phones,
CPF/CNPJ and e-mails in every text and JSON column of the conversation — its messages, model
calls (whose context snapshot, a copy of the session, is dropped), summaries and lead — with the
same masker the admin uses for staff without the personal-data permission (`agents.masking`: the
session's known values wherever written, and the patterns). What stays is what the aggregates
need: states, codes, segment, service, handoff reasons, timestamps, token counts and costs.
"""

import logging
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction

from agents.masking import Masker
from agents.states import SessionState
from conversations.models import (
    HandoffSummary,
    Lead,
    LLMCall,
    Message,
    Session,
    WebhookDelivery,
)
from conversations.personal_data import session_masker

logger = logging.getLogger("conversations.retention")

BATCH = 200  # sessions per run of the daily task; the rest wait for the next run


def session_anonymise(session_id: int, *, now: datetime) -> bool:
    """Anonymise one session and everything under it, in one transaction; False when it was
    already anonymised. An open session is closed first (a customer's erasure request)."""
    with transaction.atomic():
        session = Session.objects.select_for_update().get(pk=session_id)
        if session.anonymised_at is not None:
            return False
        masker = session_masker(session)
        _messages_mask(session, masker)
        _calls_mask(session, masker)
        _summaries_mask(session, masker)
        Lead.objects.filter(session=session).update(data=masker.value(_lead_data(session)))
        fields: dict[str, Any] = {
            "customer_name": "",
            "customer_phone": "",
            "customer_user_id": "",
            "customer_document": "",
            "registration_data": masker.value(session.registration_data),
            "registration_extras": masker.value(session.registration_extras),
            "confirmation_data": masker.value(session.confirmation_data),
            "technical_extras": masker.value(session.technical_extras),
            "handoff_detail": masker.text(session.handoff_detail),
            "anonymised_at": now,
        }
        if session.state != SessionState.CLOSED:
            fields |= {"state": SessionState.CLOSED.value, "closed_at": now}
        Session.objects.filter(pk=session.pk).update(**fields)
    logger.info("session_anonymised", extra={"session_id": session_id})
    return True


def _lead_data(session: Session) -> Any:
    lead = Lead.objects.filter(session=session).only("data").first()
    return lead.data if lead is not None else {}


def _messages_mask(session: Session, masker: Masker) -> None:
    messages = list(session.messages.only("id", "content", "raw_response", "json_part"))
    for message in messages:
        message.content = masker.text(message.content)
        message.raw_response = masker.text(message.raw_response)
        message.json_part = masker.value(message.json_part)
    Message.objects.bulk_update(messages, ["content", "raw_response", "json_part"], batch_size=500)


def _calls_mask(session: Session, masker: Masker) -> None:
    calls = list(LLMCall.objects.filter(session=session).only("id", "raw_response", "error"))
    for call in calls:
        call.raw_response = masker.text(call.raw_response)
        call.error = masker.text(call.error)
        call.context_snapshot = None
    LLMCall.objects.bulk_update(calls, ["raw_response", "error", "context_snapshot"])


def _summaries_mask(session: Session, masker: Masker) -> None:
    text_fields = ("closing_reason", "next_action", "summary_text", "raw_json", "error")
    summaries = list(HandoffSummary.objects.filter(session=session))
    for summary in summaries:
        for name in text_fields:
            setattr(summary, name, masker.text(getattr(summary, name)))
        summary.key_points = masker.value(summary.key_points)
        summary.collected_data = masker.value(summary.collected_data)
    HandoffSummary.objects.bulk_update(summaries, [*text_fields, "key_points", "collected_data"])


def closed_sessions_anonymise(*, now: datetime) -> int:
    """Anonymise up to `BATCH` sessions closed more than `RETENTION_DAYS` ago."""
    cutoff = now - timedelta(days=settings.RETENTION_DAYS)
    ids = list(
        Session.objects.filter(
            state=SessionState.CLOSED, closed_at__lt=cutoff, anonymised_at__isnull=True
        )
        .order_by("closed_at")
        .values_list("pk", flat=True)[:BATCH]
    )
    return sum(session_anonymise(session_id, now=now) for session_id in ids)


def webhook_bodies_delete(*, now: datetime) -> int:
    """Empty the raw bodies (and headers) of deliveries received more than
    `WEBHOOK_BODY_RETENTION_DAYS` ago."""
    cutoff = now - timedelta(days=settings.WEBHOOK_BODY_RETENTION_DAYS)
    emptied = (
        WebhookDelivery.objects.filter(received_at__lt=cutoff)
        .exclude(raw_body=b"")
        .update(raw_body=b"", headers={})
    )
    if emptied:
        logger.info("webhook_bodies_deleted", extra={"count": emptied})
    return emptied


def customer_sessions(phone: str) -> list[Session]:
    return list(Session.objects.filter(customer_phone=phone).order_by("created_at", "id"))


def customer_data_export(phone: str) -> dict[str, Any]:
    """Everything held about the customer of `phone` (E.164 digits), JSON-ready."""
    sessions = customer_sessions(phone)
    return {
        "phone": phone,
        "sessions": [_session_export(session) for session in sessions],
    }


def _session_export(session: Session) -> dict[str, Any]:
    lead = Lead.objects.filter(session=session).first()
    return {
        "id": session.pk,
        "instance": session.instance.phone_number_id,
        "created_at": session.created_at.isoformat(),
        "closed_at": session.closed_at.isoformat() if session.closed_at else None,
        "state": session.state,
        "customer_name": session.customer_name,
        "customer_user_id": session.customer_user_id,
        "customer_document": session.customer_document,
        "segment": session.segment,
        "service": session.service,
        "technical_data": session.technical_data,
        "registration_data": session.registration_data,
        "confirmation_data": session.confirmation_data,
        "messages": [
            {
                "direction": m.direction,
                "content": m.content,
                "created_at": m.created_at.isoformat(),
            }
            for m in session.messages.exclude(direction="SYSTEM").order_by("id")
        ],
        "summaries": [
            {"summary_text": s.summary_text, "created_at": s.created_at.isoformat()}
            for s in HandoffSummary.objects.filter(session=session).order_by("id")
        ],
        "lead": None
        if lead is None
        else {"data": lead.data, "created_at": lead.created_at.isoformat()},
    }


def customer_data_erase(phone: str, *, now: datetime, operator: str) -> int:
    """Anonymise every session of the customer of `phone`; the number anonymised."""
    sessions = customer_sessions(phone)
    erased = sum(session_anonymise(session.pk, now=now) for session in sessions)
    logger.info(
        "customer_data_erased",
        extra={"sessions": erased, "operator": operator, "session_ids": [s.pk for s in sessions]},
    )
    return erased
