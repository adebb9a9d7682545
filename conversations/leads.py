"""A session's lead: written by the turn of a code 5 with the confirmed data; its delivery to
the CRM is the support app's (`support.crm`).

``crm_status`` is ``pending`` when `CRM_WEBHOOK_URL` is set (and the session is not simulated),
else ``not_configured``: nothing will send it, and the status says so.
"""

from typing import Any

from django.conf import settings
from django.utils import timezone

from conversations.announcements import lead_created
from conversations.models import CrmStatus, Lead, Session


def lead_create(*, session_id: int, data: dict[str, Any]) -> Lead:
    """Write the session's lead (once per session) and, when the CRM is configured, announce
    it (`lead_created`): the support app delivers it after the caller's transaction commits.
    A simulated session's lead is never registered (``not_configured``); the leads admin does
    not list it."""
    simulated = Session.objects.filter(pk=session_id, is_simulated=True).exists()
    status = (
        CrmStatus.PENDING
        if settings.CRM_WEBHOOK_URL and not simulated
        else CrmStatus.NOT_CONFIGURED
    )
    lead, _created = Lead.objects.update_or_create(
        session_id=session_id,
        defaults={"data": data, "crm_status": status, "crm_updated_at": timezone.now()},
    )
    if status == CrmStatus.PENDING:
        lead_created.announce(lead.pk)
    return lead
