"""LGPD: how long customers' personal data is kept, and a customer's requests to see or erase it.

- `closed_sessions_anonymise`: a conversation closed more than `RETENTION_DAYS` ago is
  anonymised (beat runs it daily, `conversations.anonymise_expired_sessions`).
- `webhook_bodies_delete`: the raw webhook bodies (which repeat every message and name) are
  emptied after `WEBHOOK_BODY_RETENTION_DAYS`; the delivery's metadata and counts stay.
- A customer's requests to see or erase their data (by phone or WhatsApp user id) are
  `conversations.privacy.customer_data`'s; an erasure anonymises each session here.

Anonymising replaces the customer's identity fields with nothing and masks names, phones,
CPF/CNPJ and e-mails in every text and JSON column of the conversation — its messages, their
delivery statuses, model calls (whose context snapshot, a copy of the session, is dropped),
summaries, lead, admin log entries (named "Conversa #12" again), the media (their files are
deleted, their captions emptied, their transcripts and descriptions masked) and the rows other
apps keep about it (`conversations.privacy.data_holders`: the replay results, the prompt test
cases, the internal notes) — with the same masker the admin uses for staff without the
personal-data permission (`agents.masking`: the session's known values wherever written, and the
patterns). What stays is what the aggregates need: states, codes, segment, service, handoff
reasons, timestamps, token counts and costs.
"""

import logging
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from django.conf import settings
from django.contrib.admin.models import LogEntry
from django.contrib.contenttypes.models import ContentType
from django.core.files.storage import default_storage
from django.db import transaction
from django.db.models import F, Q

from agents.masking import Masker
from agents.states import SessionState
from conversations.models import (
    DeliveryStatusEvent,
    HandoffSummary,
    Lead,
    LLMCall,
    Message,
    MessageMedia,
    Session,
    WebhookDelivery,
)
from conversations.privacy.data_holders import session_data_holders
from conversations.privacy.personal_data import session_masker

logger = logging.getLogger("conversations.privacy.retention")

# The wamid of an anonymised session's delivery status: this and the status's id.
ERASED_WAMID_PREFIX = "erased."
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
        _media_erase(session, masker)
        _calls_mask(session, masker)
        _summaries_mask(session, masker)
        _lead_mask(session, masker)
        _admin_log_mask(session, masker)
        for holder in session_data_holders():
            holder.mask(session_id=session.pk, masker=masker)
        fields: dict[str, Any] = {
            "customer_name": "",
            "customer_phone": "",
            "customer_phone_key": "",
            "customer_user_id": "",
            "customer_document": "",
            "registration_data": masker.value(session.registration_data),
            "registration_extras": masker.value(session.registration_extras),
            "technical_data": masker.value(session.technical_data),
            "confirmation_data": masker.value(session.confirmation_data),
            "technical_extras": masker.value(session.technical_extras),
            "handoff_detail": masker.text(session.handoff_detail),
            "anonymised_at": now,
            # A turn thinking now loses its lease: it writes and sends nothing (its model calls
            # are scrubbed by `late_calls_scrub`).
            "lease_token": None,
            "lease_expires_at": None,
            "turn_queued_at": None,
        }
        if session.state != SessionState.CLOSED:
            fields |= {"state": SessionState.CLOSED.value, "closed_at": now}
            # No turn will answer them (a closed session's next message opens a new one).
            Message.objects.pending_inbound().filter(session=session).update(processed_at=now)
        Session.objects.filter(pk=session.pk).update(**fields)
    logger.info("session_anonymised", extra={"session_id": session_id})
    return True


def late_calls_scrub(*, session_id: int) -> int:
    """Drop the texts of the model calls a turn recorded after its session was anonymised (the
    anonymisation revoked its lease while the model was thinking); the counts and costs stay.

    An agent call keeps a context snapshot until it is anonymised: one that still has it, or
    any call recorded since, is late."""
    late = LLMCall.objects.filter(
        session_id=session_id, session__anonymised_at__isnull=False
    ).filter(Q(context_snapshot__isnull=False) | Q(created_at__gte=F("session__anonymised_at")))
    scrubbed = late.update(context_snapshot=None, raw_response="", error="")
    if scrubbed:
        logger.info("late_calls_scrubbed", extra={"session_id": session_id, "count": scrubbed})
    return scrubbed


def _lead_mask(session: Session, masker: Masker) -> None:
    lead = Lead.objects.filter(session=session).only("id", "data", "crm_error").first()
    if lead is not None:
        Lead.objects.filter(pk=lead.pk).update(
            data=masker.value(lead.data), crm_error=masker.text(lead.crm_error)
        )


def _messages_mask(session: Session, masker: Masker) -> None:
    # A wamid is base64 that spells the customer's phone: dropped (the message is never
    # matched to a status again; the conversation is over).
    fields = [
        "content",
        "raw_response",
        "json_part",
        "interactive",
        "delivery_error_title",
        "wa_message_id",
    ]
    messages = list(session.messages.only("id", *fields))
    # Read before they are dropped: the statuses are found by them too (a status stored before
    # its message had its wamid is linked to no message).
    wamids = [m.wa_message_id for m in messages if m.wa_message_id]
    for message in messages:
        message.content = masker.text(message.content)
        message.raw_response = masker.text(message.raw_response)
        message.json_part = masker.value(message.json_part)
        # An interactive message's body repeats its content (code 4's shows the registration).
        message.interactive = masker.value(message.interactive)
        message.delivery_error_title = masker.text(message.delivery_error_title)
        message.wa_message_id = None
    Message.objects.bulk_update(messages, fields, batch_size=500)
    # WhatsApp's error details of a failed send may quote the recipient.
    events = list(
        DeliveryStatusEvent.objects.filter(
            Q(message__session=session) | Q(wa_message_id__in=wamids)
        ).only("id", "wa_message_id", "error_title", "error_details")
    )
    for event in events:
        event.wa_message_id = f"{ERASED_WAMID_PREFIX}{event.pk}"  # unique with the status
        event.error_title = masker.text(event.error_title)
        event.error_details = masker.text(event.error_details)
    DeliveryStatusEvent.objects.bulk_update(
        events, ["wa_message_id", "error_title", "error_details"], batch_size=500
    )


def _media_erase(session: Session, masker: Masker) -> None:
    """The media of the session's messages: the files are deleted from the storage once the
    anonymisation commits (a rollback keeps them), and what described them — caption, file name,
    Meta's media id (with which it could be downloaded again) and hash, a location or contact
    cards — is emptied; what the bot read in them (an audio's transcript, an image's
    description) is masked as the messages' texts are. The kind, MIME type, size and download
    status stay for the aggregates."""
    media = MessageMedia.objects.filter(message__session=session)
    names = [name for name in media.exclude(file="").values_list("file", flat=True) if name]
    read = list(
        media.exclude(transcript="", description="").only("id", "transcript", "description")
    )
    for item in read:
        item.transcript = masker.text(item.transcript)
        item.description = masker.text(item.description)
    MessageMedia.objects.bulk_update(read, ["transcript", "description"], batch_size=500)
    media.update(caption="", filename="", media_id="", sha256="", data={}, error="", file="")
    if names:
        transaction.on_commit(partial(_files_delete, names), robust=True)


def _files_delete(names: list[str]) -> None:
    for name in names:
        default_storage.delete(name)
    logger.info("media_files_deleted", extra={"count": len(names)})


def _admin_log_mask(session: Session, masker: Masker) -> None:
    """The session's (and its lead's) admin log entries: named by the session's id, their
    messages masked; an entry written before sessions were named by id carries the name."""
    objects: list[tuple[type[Session] | type[Lead], int]] = [(Session, session.pk)]
    lead_id = Lead.objects.filter(session=session).values_list("pk", flat=True).first()
    if lead_id is not None:
        objects.append((Lead, lead_id))
    for model, pk in objects:
        content_type = ContentType.objects.get_for_model(model)
        entries = list(LogEntry.objects.filter(content_type=content_type, object_id=str(pk)))
        for entry in entries:
            entry.object_repr = str(session) if model is Session else masker.text(entry.object_repr)
            entry.change_message = masker.text(entry.change_message)
        LogEntry.objects.bulk_update(entries, ["object_repr", "change_message"])


def _calls_mask(session: Session, masker: Masker) -> None:
    calls = list(LLMCall.objects.filter(session=session).only("id", "raw_response", "error"))
    for call in calls:
        call.raw_response = masker.text(call.raw_response)
        call.error = masker.text(call.error)
        call.context_snapshot = None
    LLMCall.objects.bulk_update(calls, ["raw_response", "error", "context_snapshot"])


def _summaries_mask(session: Session, masker: Masker) -> None:
    # The service and segment too: the model writes them, and may write the customer in them.
    text_fields = (
        "closing_reason",
        "identified_service",
        "segment",
        "next_action",
        "summary_text",
        "raw_json",
        "error",
    )
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
