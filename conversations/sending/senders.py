"""Which sender a message goes to: the Graph API client, or the dry-run sender when nothing may
leave the machine (a simulated session, or no access token at all)."""

from enum import StrEnum

from django.conf import settings

from conversations.models import Session
from whatsapp.client import DryRunSender, GraphClient, WhatsAppSender

DRY_RUN_SENDER = DryRunSender()


class DryRunReason(StrEnum):
    """Why a session's sends go to the dry-run sender."""

    SIMULATED_SESSION = "simulated_session"
    NO_ACCESS_TOKEN = "no_access_token"  # neither the instance's nor WHATSAPP_ACCESS_TOKEN


def dry_run_reason(session: Session) -> DryRunReason | None:
    """Why `session`'s messages would not leave the machine (its instance is read), or None
    when they go to the Graph API."""
    return dry_run_reason_of(
        simulated=session.is_simulated,
        access_token=session.instance.access_token or settings.WHATSAPP_ACCESS_TOKEN,
    )


def dry_run_reason_of(*, simulated: bool, access_token: str) -> DryRunReason | None:
    """`dry_run_reason` from what a caller already holds (a read receipt, a claimed part)."""
    if simulated:
        return DryRunReason.SIMULATED_SESSION
    if not access_token:
        return DryRunReason.NO_ACCESS_TOKEN
    return None


def sender_for(session: Session, *, access_token: str, client: WhatsAppSender) -> WhatsAppSender:
    """The dry-run sender instead of the Graph API client when nothing may leave the machine: a
    simulated session, or no access token at all (neither the instance's nor
    ``WHATSAPP_ACCESS_TOKEN``: the `make run` default, where a real request could only fail);
    else `client`. A sender that is not the Graph client (the demo loader's) is kept as given:
    it never reaches the network anyway."""
    return sender_of(simulated=session.is_simulated, access_token=access_token, client=client)


def sender_of(*, simulated: bool, access_token: str, client: WhatsAppSender) -> WhatsAppSender:
    """`sender_for` from what a caller already holds."""
    reason = dry_run_reason_of(simulated=simulated, access_token=access_token)
    if isinstance(client, GraphClient) and reason is not None:
        return DRY_RUN_SENDER
    return client
