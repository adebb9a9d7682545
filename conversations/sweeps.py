"""Recovery of work the normal path lost (DESIGN.md §4: nothing lost, nothing answered twice).

- `unsent_messages_requeue` (task ``conversations.requeue_unsent_messages``, beat every minute):
  an OUTBOUND message committed by a turn whose `send_message` was never published (the worker
  died between the commit and the publish, or the broker refused it) would stay unsent forever.
  The sweep re-enqueues `send_message` for the first unsent part of each turn (sending it sends
  the turn's parts in ``part_index`` order, `conversations.sending`) once the message is older
  than `UNSENT_GRACE`; a message that was tried already (its own retries wait with backoff) only
  once nobody tried it for `SEND_RETRY_WINDOW` (its retries are over: the Graph API was still
  failing and the send was deferred, or the retry chain was lost) — so while the Graph API is
  down a reply gets a round of retries with backoff every quarter of an hour or so. A message
  still unsent after the 24-hour customer-service window is marked failed with
  `WINDOW_EXPIRED` — staff list them with the admin's "failed sends" filter — instead of being
  sent a day late or retried forever.
- `turn_failure_handle` (called by the ``conversations.process_session`` task when the turn
  raised something unexpected — a bug, a database error): the pipeline released the lease and
  left the messages pending, so the stalled-sessions sweep (`conversations.lease`) runs the turn
  again after a minute. Each failure is logged as a SYSTEM ``turn_failed`` event; at the
  `MAX_TURN_FAILURES`-th failure since the oldest pending message the session is handed off with
  ``llm_provider_error`` (fixed handoff text, summary enqueued, messages marked processed), so a
  turn that always raises cannot loop forever and the customer is not left without an answer.

Both sweeps are idempotent: `send_message` claims the message before calling the Graph API (a
second task finds it sent or claimed), and `process_session` takes the session's lease.
"""

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Exists, OuterRef, Q, QuerySet

from agents.redaction import redact
from agents.sources import RuntimeSettings
from agents.states import BOT_STATES, HandoffReason, SessionState
from conversations.event_codes import EventCode
from conversations.lease import lease_claim, lease_release
from conversations.models import (
    DeliveryStatus,
    Direction,
    Message,
    Session,
    WebhookDelivery,
    WebhookOutcome,
)
from conversations.sending import SEND_CLAIM_SECONDS
from conversations.turns.commit import failure_handoff_write
from whatsapp import CUSTOMER_SERVICE_WINDOW

logger = logging.getLogger(__name__)

# A turn's parts are published right after its commit and a send task starts within seconds; a
# minute later an untried message lost its publish (a busy queue costs one redundant task at
# worst: the send claim lets one through).
UNSENT_GRACE = timedelta(seconds=60)
# A message tried already waits for its task's own retries (backoff 5 s ... 300 s, six of them,
# each call up to 15 s: about 7 minutes in all); past this it is unsent because the retry chain
# was lost.
SEND_RETRY_WINDOW = timedelta(minutes=15)
WINDOW_EXPIRED = "Não enviada: passou o prazo de 24 horas para responder ao cliente"
SWEEP_LIMIT = 500

# Failures of the turn of the same pending messages before the session goes to a human: the first
# is the webhook's task, the others the sweep's retries a minute apart (a transient error — a
# database restart — gets two more chances).
MAX_TURN_FAILURES = 3
# Longer than the handoff's one short transaction.
_HANDOFF_LEASE_TTL = timedelta(seconds=60)
_ERROR_CHARS = 500


# --- Unsent OUTBOUND messages ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class UnsentSweep:
    requeued: list[int]  # message ids given to `send_message`, oldest first
    expired: int  # messages marked failed with WINDOW_EXPIRED


def unsent_messages_requeue(
    *, now: datetime, enqueue: Callable[[int], object], limit: int = SWEEP_LIMIT
) -> UnsentSweep:
    """Mark failed the unsent messages past the 24-hour window; enqueue the others' sending."""
    unclaimed = _unsent().exclude(_live_claim(now))
    expired = unclaimed.filter(created_at__lte=now - CUSTOMER_SERVICE_WINDOW).update(
        delivery_status=DeliveryStatus.FAILED,
        delivery_status_at=now,
        delivery_error_code=None,
        delivery_error_title=WINDOW_EXPIRED,
    )
    if expired:
        logger.error("unsent_messages_expired", extra={"count": expired})
    earlier_unsent_part = (
        Message.objects.filter(
            turn_id=OuterRef("turn_id"),
            direction=Direction.OUTBOUND,
            part_index__lt=OuterRef("part_index"),
            wa_message_id__isnull=True,
        )
        .not_superseded()
        .exclude(delivery_status=DeliveryStatus.FAILED)
    )
    message_ids = list(
        unclaimed.filter(created_at__gt=now - CUSTOMER_SERVICE_WINDOW)
        .filter(
            Q(send_attempts=0, created_at__lte=now - UNSENT_GRACE)
            | (
                Q(send_attempts__gt=0, created_at__lte=now - SEND_RETRY_WINDOW)
                # Nobody tried it for a while: its retries are over (deferred) or were lost.
                & (
                    Q(last_send_attempt_at__isnull=True)
                    | Q(last_send_attempt_at__lte=now - SEND_RETRY_WINDOW)
                )
            )
        )
        .exclude(Exists(earlier_unsent_part))
        .order_by("created_at", "id")
        .values_list("pk", flat=True)[:limit]
    )
    for message_id in message_ids:
        enqueue(message_id)
    if message_ids:
        # The publish after a turn's commit was lost: worth a look in the worker log.
        logger.warning(
            "unsent_messages_requeued",
            extra={"count": len(message_ids), "message_ids": ",".join(map(str, message_ids))},
        )
    return UnsentSweep(requeued=message_ids, expired=expired)


def _unsent() -> QuerySet[Message]:
    # Exactly the condition of the partial index `message_unsent_outbound`.
    return Message.objects.unsent_outbound()


def _live_claim(now: datetime) -> Q:
    """A worker is sending it now (the claim of `conversations.sending`)."""
    return Q(
        delivery_status=DeliveryStatus.PENDING,
        send_attempts__gt=0,
        delivery_status_at__gt=now - timedelta(seconds=SEND_CLAIM_SECONDS),
    )


# --- Turns that raised ----------------------------------------------------------------------------


def turn_failure_handle(
    *,
    session_id: int,
    error: BaseException,
    now: datetime,
    runtime: Callable[[], RuntimeSettings],
    send: Callable[[int], None],
    enqueue_summary: Callable[[int], None],
) -> bool:
    """Record a turn that raised; hand the session off at the `MAX_TURN_FAILURES`-th failure.

    Never raises (the caller re-raises the turn's own error); True when it handed off.
    """
    try:
        failures = _record_failure(session_id, error, now)
        if failures < MAX_TURN_FAILURES:
            return False
        detail = f"o turno falhou {failures} vezes seguidas ({type(error).__name__})"
        handed_off = session_failure_handoff(
            session_id=session_id,
            detail=detail,
            now=now,
            runtime=runtime(),
            send=send,
            enqueue_summary=enqueue_summary,
        )
    except Exception:
        logger.exception("turn_failure_handling_failed", extra={"session_id": session_id})
        return False
    if handed_off:
        logger.error(
            "turn_failure_handoff",
            extra={"session_id": session_id, "failures": failures, "error": repr(error)},
        )
    return handed_off


def _record_failure(session_id: int, error: BaseException, now: datetime) -> int:
    """Log the failure as a SYSTEM event; the failures since the oldest pending message."""
    Message.objects.create(
        session_id=session_id,
        direction=Direction.SYSTEM,
        message_type=EventCode.TURN_FAILED,
        # Any exception's text: masked like a provider's (it may hold a token, a CPF, a phone).
        json_part={
            "error": redact(repr(error))[:_ERROR_CHARS],
            "error_type": type(error).__name__,
        },
        created_at=now,
    )
    oldest = (
        _pending_inbound(session_id).order_by("created_at").values_list("created_at", flat=True)
    ).first()
    if oldest is None:
        return 0  # nothing is left waiting for an answer
    return Message.objects.filter(
        session_id=session_id,
        direction=Direction.SYSTEM,
        message_type=EventCode.TURN_FAILED,
        created_at__gte=oldest,
    ).count()


def _pending_inbound(session_id: int) -> QuerySet[Message]:
    return Message.objects.pending_inbound().filter(session_id=session_id)


def session_failure_handoff(
    *,
    session_id: int,
    detail: str,
    now: datetime,
    runtime: RuntimeSettings,
    send: Callable[[int], None],
    enqueue_summary: Callable[[int], None],
) -> bool:
    """Hand a bot-state session with pending messages to a human (``llm_provider_error``).

    What a failed turn commits (`conversations.turns.commit.failure_handoff_write`, which calls
    `conversations.handoff.session_handoff`): HUMAN with the reason, the SYSTEM handoff event,
    the fixed handoff text (never any model text), the pending messages marked processed, the
    text sent and the summary enqueued after commit. Under the session's lease, so it cannot
    race a turn; False (nothing written) when the lease is held or nothing is pending.
    """
    token = lease_claim(session_id=session_id, now=now, ttl=_HANDOFF_LEASE_TTL)
    if token is None:
        return False  # a worker runs a turn now; a failure of its own is counted by its task
    try:
        with transaction.atomic():
            session = Session.objects.select_for_update().only("id", "state").get(pk=session_id)
            pending_ids = list(_pending_inbound(session_id).values_list("pk", flat=True))
            if SessionState(session.state) not in BOT_STATES or not pending_ids:
                return False
            failure_handoff_write(
                session=Session.objects.select_related("instance").get(pk=session_id),
                token=token,
                inbound_ids=pending_ids,
                reason=HandoffReason.LLM_PROVIDER_ERROR,
                detail=detail,
                now=now,
                runtime=runtime,
                send=send,
                enqueue_summary=enqueue_summary,
            )
    finally:
        lease_release(session_id=session_id, token=token)
    return True


# --- Webhook deliveries stored for a task and never applied -------------------------------------

# A deferred delivery's task is published right after its commit and starts within seconds; a
# minute later its publish was lost or its worker died. A second task while the first still runs
# waits for the delivery's row lock and then finds it applied.
RECEIVED_GRACE = timedelta(seconds=60)


def received_deliveries_requeue(
    *, now: datetime, grace: timedelta, enqueue: Callable[[int], object]
) -> list[int]:
    """Enqueue again every webhook delivery stored for a task (outcome ``received``) more than
    `grace` ago, oldest first, at most `SWEEP_LIMIT`; the ids enqueued."""
    delivery_ids = list(
        WebhookDelivery.objects.filter(outcome=WebhookOutcome.RECEIVED, received_at__lt=now - grace)
        .order_by("received_at", "id")
        .values_list("id", flat=True)[:SWEEP_LIMIT]
    )
    for delivery_id in delivery_ids:
        enqueue(delivery_id)
    if delivery_ids:
        logger.warning("webhook_deliveries_requeued", extra={"count": len(delivery_ids)})
    return delivery_ids
