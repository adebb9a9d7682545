"""Leads that reach the CRM: POSTed signed to `CRM_WEBHOOK_URL`.

The turn of a code 5 writes the lead (`conversations.leads.lead_create`) and announces a
``pending`` one after commit (`lead_created`); this app enqueues its delivery
(`support.tasks.enqueue_lead_delivery`).
- `lead_deliver`: the use case behind the ``conversations.deliver_lead`` task. Each attempt is
  counted (``crm_attempts``) before the POST, so a worker that dies mid-call still shows it; a
  2xx marks the lead ``sent`` (``crm_sent_at``); a 4xx ``failed`` at once with the answer in
  ``crm_error``; a timeout, a connection error or a 5xx keeps it ``pending`` with the error and
  raises for the task to retry with backoff — its last attempt marks it ``failed``. A lead
  already ``sent`` is not sent again (a redelivered task). ``crm_updated_at`` is the delivery's
  last activity (created, resent, attempted): a lead ``pending`` with none for longer than the
  retry schedule lost its chain, and the stale-leads sweep gives it a last attempt.
- `stale_leads_retry` (task ``conversations.retry_stale_leads``, beat every minute): a lead
  ``pending`` whose delivery shows no activity for `LEAD_STALE_AFTER` — longer than the whole
  retry schedule — lost its chain (its worker died, its publish or a retry's was lost). It gets
  one attempt, the chain's last, so it ends ``sent`` or ``failed`` with the reason instead of
  ``pending`` forever.
- `leads_resend`: the admin's "resend" action: every chosen lead not ``sent`` goes back to
  ``pending`` and is enqueued again after commit.
- `lead_document`: the JSON document posted (schema in docs/operations.md, "Leads and the CRM").
"""

import logging
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from conversations.commit_hooks import on_commit_call
from conversations.models import CrmStatus, Lead
from support.alerts import session_admin_url
from support.signed_post import RetryableDeliveryError, host_of, signed_post

logger = logging.getLogger(__name__)

_ERROR_CHARS = 500


def lead_document(lead: Lead) -> dict[str, Any]:
    """What the CRM receives: the lead's ids and link, its instance, and the confirmed data in
    the contract's field names (`conversations.turns.rows.lead_data`)."""
    data = lead.data if isinstance(lead.data, dict) else {}
    session = lead.session
    return {
        "event": "lead.created",
        "lead_id": lead.pk,
        "session_id": lead.session_id,
        "created_at": lead.created_at.isoformat(),
        "conversation_url": session_admin_url(lead.session_id),
        "instance": {
            "name": session.instance.name,
            "phone_number_id": session.instance.phone_number_id,
        },
        "nome_cliente": data.get("nome_cliente", ""),
        "telefone": data.get("telefone", ""),
        "segmento": data.get("segmento", ""),
        "intencao": data.get("intencao", ""),
        "servico": data.get("servico", ""),
        "qualification_data": data.get("qualification_data") or {},
        "cadastro": data.get("cadastro") or {},
    }


def _failed(lead_id: int, error: str) -> None:
    Lead.objects.filter(pk=lead_id).update(
        crm_status=CrmStatus.FAILED, crm_error=error[:_ERROR_CHARS]
    )


def lead_deliver(
    *,
    lead_id: int,
    last_attempt: bool,
    now: datetime | None = None,
    deadline_errors: tuple[type[BaseException], ...] = (),
) -> str:
    """One delivery attempt of the lead (see the module docstring); returns the lead's status
    after it (``sent``, ``failed``, ``not_configured``), or raises `RetryableDeliveryError`
    (also for `deadline_errors` raised during the POST: the task's time limit)."""
    url = settings.CRM_WEBHOOK_URL
    lead = Lead.objects.select_related("session__instance").get(pk=lead_id)
    if lead.crm_status == CrmStatus.SENT:
        return CrmStatus.SENT.value
    # A simulated session's lead never reaches the CRM, even one sent again.
    if not url or lead.session.is_simulated:
        Lead.objects.filter(pk=lead_id).update(crm_status=CrmStatus.NOT_CONFIGURED)
        return CrmStatus.NOT_CONFIGURED.value
    Lead.objects.filter(pk=lead_id).update(
        crm_attempts=F("crm_attempts") + 1, crm_updated_at=timezone.now()
    )
    log = {"lead_id": lead_id, "session_id": lead.session_id, "host": host_of(url)}
    try:
        answer = signed_post(
            url=url,
            secret=settings.CRM_WEBHOOK_SECRET,
            document=lead_document(lead),
            timeout=settings.SIGNED_POST_TIMEOUT_SECONDS,
            deadline_errors=deadline_errors,
        )
    except RetryableDeliveryError as exc:
        if not last_attempt:
            Lead.objects.filter(pk=lead_id).update(crm_error=exc.error[:_ERROR_CHARS])
            logger.warning("crm_lead_retry", extra={**log, "error": exc.error})
            raise
        _failed(lead_id, exc.error)
        logger.error("crm_lead_failed", extra={**log, "error": exc.error})
        return CrmStatus.FAILED.value
    if not answer.accepted:
        _failed(lead_id, answer.error)
        logger.error("crm_lead_failed", extra={**log, "error": answer.error})
        return CrmStatus.FAILED.value
    Lead.objects.filter(pk=lead_id).update(
        crm_status=CrmStatus.SENT, crm_sent_at=now or timezone.now(), crm_error=""
    )
    logger.info("crm_lead_sent", extra={**log, "status": answer.status})
    return CrmStatus.SENT.value


# The whole retry schedule of `conversations.deliver_lead` (1 + 5 attempts, backoff at most 10 +
# 20 + 40 + 80 + 160 s, each attempt within its soft time limit: at most 60 + 30 s) is under
# 15 minutes, and a live chain shows activity at every attempt, far more often than that.
LEAD_STALE_AFTER = timedelta(minutes=15)
SWEEP_LIMIT = 500


def stale_leads_retry(
    *, now: datetime, enqueue: Callable[[int], object], limit: int = SWEEP_LIMIT
) -> list[int]:
    """Enqueue one last attempt for each lead ``pending`` with no delivery activity for
    `LEAD_STALE_AFTER`, oldest first, at most `limit`; the ids enqueued."""
    lead_ids = list(
        Lead.objects.filter(crm_status=CrmStatus.PENDING, crm_updated_at__lt=now - LEAD_STALE_AFTER)
        .order_by("crm_updated_at", "id")
        .values_list("pk", flat=True)[:limit]
    )
    # Stamped before the publish: the next sweep, a minute from now, must not enqueue it again
    # while its last attempt waits in the queue.
    Lead.objects.filter(pk__in=lead_ids, crm_status=CrmStatus.PENDING).update(crm_updated_at=now)
    for lead_id in lead_ids:
        enqueue(lead_id)
    if lead_ids:
        logger.warning(
            "crm_stale_leads_retried",
            extra={"count": len(lead_ids), "lead_ids": ",".join(map(str, lead_ids))},
        )
    return lead_ids


def leads_resend(*, lead_ids: Iterable[int], deliver: Callable[[int], None]) -> list[int]:
    """Put the chosen leads not yet sent back to ``pending`` and enqueue each after commit;
    returns their ids. Needs `CRM_WEBHOOK_URL` (the caller checks)."""
    with transaction.atomic():
        ids = list(
            Lead.objects.filter(pk__in=list(lead_ids))
            .exclude(crm_status=CrmStatus.SENT)
            .order_by("pk")
            .values_list("pk", flat=True)
        )
        Lead.objects.filter(pk__in=ids).update(
            crm_status=CrmStatus.PENDING, crm_error="", crm_updated_at=timezone.now()
        )
        for lead_id in ids:
            on_commit_call(deliver, lead_id)
    logger.info("crm_leads_resent", extra={"count": len(ids)})
    return ids
