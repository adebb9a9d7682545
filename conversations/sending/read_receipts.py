"""Marking an INBOUND message read (with a typing indicator) from what the turn already holds."""

import logging
from dataclasses import dataclass

from django.conf import settings

from conversations.models import Message, Session
from conversations.prometheus import read_receipt_counted
from conversations.sending.senders import sender_of
from whatsapp.client import GraphAPIError, WhatsAppSender

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ReadReceipt:
    """What marking one INBOUND message read needs. The turn holds all of it already (its
    session, instance and newest message), so sending a receipt reads nothing from the database.
    `access_token` is the one to send with: the instance's, else ``WHATSAPP_ACCESS_TOKEN``."""

    message_id: int
    wamid: str
    phone_number_id: str
    access_token: str
    simulated: bool

    def __repr__(self) -> str:
        # Never the token, wherever a receipt is logged or shown in a traceback.
        return f"ReadReceipt(message_id={self.message_id}, wamid={self.wamid!r})"


def read_receipt_for(session: Session, message: Message) -> ReadReceipt | None:
    """The receipt of INBOUND `message` of `session` (its instance loaded); None for a message
    WhatsApp did not deliver (no wamid: nothing to mark)."""
    if not message.wa_message_id:
        return None
    instance = session.instance
    return ReadReceipt(
        message_id=message.pk,
        wamid=message.wa_message_id,
        phone_number_id=instance.phone_number_id,
        access_token=instance.access_token or settings.WHATSAPP_ACCESS_TOKEN,
        simulated=session.is_simulated,
    )


def read_receipt_send(receipt: ReadReceipt, *, client: WhatsAppSender) -> bool:
    """Mark the message read with a typing indicator; a failure is logged, never raised.

    A simulated session's receipt, or one with no access token, goes to the dry-run sender
    (`sender_for`): nothing leaves the machine."""
    sender = sender_of(
        simulated=receipt.simulated, access_token=receipt.access_token, client=client
    )
    try:
        sender.mark_read(
            phone_number_id=receipt.phone_number_id,
            access_token=receipt.access_token,
            wamid=receipt.wamid,
        )
    except GraphAPIError as exc:
        logger.warning(
            "whatsapp_mark_read_failed",
            extra={"message_id": receipt.message_id, "code": exc.code, "title": exc.title},
        )
        read_receipt_counted("failed")
        return False
    read_receipt_counted("sent")
    return True
