"""Sending one claimed part: the Graph API call with no transaction open, and what its answer
does to the claim (`conversations.sending.claim`).

A file staff send (an ``image`` or ``document`` message with its `MessageMedia`) is uploaded
first, once: the media id Meta answers is kept in ``MessageMedia.media_id`` at once, so a retry
after a failed message request names the same upload instead of uploading again.
"""

import logging
from typing import BinaryIO, cast

from django.conf import settings
from django.utils import timezone

from conversations.models import Instance, Message, MessageMedia, Session
from conversations.prometheus import send_counted
from conversations.sending.claim import (
    claim_refresh,
    claim_release,
    message_claim,
    message_fail,
    message_store_sent,
)
from conversations.sending.outcomes import RetryableSendError, SendOutcome
from conversations.sending.senders import dry_run_reason_of, sender_for
from conversations.sending.template_payload import TEMPLATE_MESSAGE_TYPE, template_of
from whatsapp import CUSTOMER_SERVICE_WINDOW
from whatsapp.client import DryRunSender, GraphAPIError, SentMessage, WhatsAppSender
from whatsapp.interactive import INTERACTIVE_MESSAGE_TYPE
from whatsapp.outbound_media import FILE_MESSAGE_TYPES
from whatsapp.status_order import send_callback_data

logger = logging.getLogger(__name__)

NO_RECIPIENT = "Conversa sem telefone nem ID de usuário do cliente"
NO_FILE = "Arquivo da mensagem não encontrado"


def part_send(
    message_id: int, client: WhatsAppSender, *, last_attempt: bool, swept_later: bool
) -> SendOutcome:
    """Claim OUTBOUND message `message_id`, send it and store the answer (see
    `outbound_message_send` for `last_attempt` and `swept_later`)."""
    message = message_claim(message_id)
    if isinstance(message, SendOutcome):
        return message
    session = message.session
    instance = session.instance
    log: dict[str, object] = {
        "message_id": message.pk,
        "session_id": session.pk,
        "attempt": message.send_attempts,
    }
    if not session.customer_phone and not session.customer_user_id:
        message_fail(message, code=None, title=NO_RECIPIENT)
        logger.error("whatsapp_send_failed", extra={**log, "title": NO_RECIPIENT})
        send_counted(SendOutcome.FAILED)
        return SendOutcome.FAILED
    access_token = instance.access_token or settings.WHATSAPP_ACCESS_TOKEN
    sender = sender_for(session, access_token=access_token, client=client)
    try:
        sent = _graph_send(sender, message, session, instance, access_token)
    except GraphAPIError as exc:
        log |= {"code": exc.code, "title": exc.title, "http_status": exc.http_status}
        return _refused(message, exc, log, last_attempt=last_attempt, swept_later=swept_later)
    message_store_sent(message, sent.wamid)
    if not session.is_simulated:  # a simulated conversation stays out of the figures
        send_counted(SendOutcome.SENT)
    if isinstance(sender, DryRunSender):
        # Stored as sent with its ``sim.`` wamid; the id and why are logged (no personal data).
        reason = dry_run_reason_of(simulated=session.is_simulated, access_token=access_token)
        logger.info(
            "whatsapp_send_simulated",
            extra={"message_id": message.pk, "reason": reason.value if reason else ""},
        )
    else:
        logger.info("whatsapp_message_sent", extra={**log, "wamid": sent.wamid})
    return SendOutcome.SENT


def _graph_send(
    sender: WhatsAppSender,
    message: Message,
    session: Session,
    instance: Instance,
    access_token: str,
) -> SentMessage:
    address = {
        "phone_number_id": instance.phone_number_id,
        "access_token": access_token,
        "to_phone": session.customer_phone,
        "to_user_id": session.customer_user_id,
        "callback_data": send_callback_data(message.pk),
    }
    if message.message_type == TEMPLATE_MESSAGE_TYPE:
        # What to send is in `json_part`; `content` is the text staff read in the transcript.
        template = template_of(message)
        return sender.send_template(
            name=template.name,
            language=template.language,
            parameters=template.parameters,
            **address,
        )
    if message.message_type == INTERACTIVE_MESSAGE_TYPE and message.interactive:
        # The buttons or list are in `interactive`; `content` is its body, as staff read it.
        return sender.send_interactive(interactive=message.interactive, **address)
    if message.message_type in FILE_MESSAGE_TYPES:
        return _file_send(sender, message, address)
    return sender.send_text(body=message.content, **address)


def _file_send(sender: WhatsAppSender, message: Message, address: dict[str, str]) -> SentMessage:
    """Upload the message's file unless a previous attempt did, then send the message naming
    it; `content` is the caption."""
    media = MessageMedia.objects.filter(message_id=message.pk).first()
    if media is None or not media.file:
        # Nothing to send, ever: failed for good like a refusal (its title is ours).
        raise GraphAPIError(code=None, title=NO_FILE, retryable=False)
    if not media.media_id:
        try:
            opened = media.file.open("rb")
        except OSError as exc:
            raise GraphAPIError(code=None, title=NO_FILE, retryable=False) from exc
        with opened:
            media_id = sender.media_upload(
                phone_number_id=address["phone_number_id"],
                access_token=address["access_token"],
                # A storage's File proxies read, seek and tell: httpx streams it from there.
                content=cast(BinaryIO, opened),
                mime_type=media.mime_type,
                filename=media.filename,
            )
        MessageMedia.objects.filter(pk=media.pk).update(media_id=media_id)
        media.media_id = media_id
        claim_refresh(message)
        logger.info(
            "whatsapp_media_uploaded",
            extra={"message_id": message.pk, "media_pk": media.pk, "bytes": media.file_size},
        )
    return sender.send_media(
        kind=message.message_type,
        media_id=media.media_id,
        caption=message.content,
        filename=media.filename,
        **address,
    )


def _refused(
    message: Message,
    exc: GraphAPIError,
    log: dict[str, object],
    *,
    last_attempt: bool,
    swept_later: bool,
) -> SendOutcome:
    """What a Graph API error does: a retry of this task, the sweep's next round, or a failure."""
    if exc.retryable and not last_attempt:
        claim_release(message, code=exc.code, title=exc.title)
        logger.warning("whatsapp_send_retry", extra=log)
        send_counted("retry", exc.code)
        raise RetryableSendError(message_id=message.pk, error=exc) from exc
    window_open = message.created_at > timezone.now() - CUSTOMER_SERVICE_WINDOW
    if exc.retryable and swept_later and window_open:
        # Graph down for longer than this task's retries: the sweep tries again later, until
        # the customer-service window closes (then it marks the message failed).
        claim_release(message, code=exc.code, title=exc.title)
        logger.error("whatsapp_send_deferred", extra=log)
        send_counted(SendOutcome.DEFERRED, exc.code)
        return SendOutcome.DEFERRED
    message_fail(message, code=exc.code, title=exc.title)
    logger.error("whatsapp_send_failed", extra=log)
    send_counted(SendOutcome.FAILED, exc.code)
    return SendOutcome.FAILED
