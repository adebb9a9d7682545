"""The per-session processing lease (DESIGN.md §4 step 2).

One worker at a time runs a session's turns. The lease is two columns on the Session row
(`lease_token`, `lease_expires_at`) claimed with one atomic ``UPDATE ... WHERE`` — no row lock
and no transaction is held while the model thinks. A worker that finds the lease taken exits at
once: the holder drains every pending inbound message before it releases. A lease whose expiry
has passed belongs to a worker that died (or was killed at the task's hard time limit) and may be
taken over; its TTL is therefore longer than the task's hard time limit, so a live holder never
loses it in a prefork worker (a threads worker has no hard limit: a turn that ignored the soft
one and overran the TTL loses the lease). Every write of a turn's outcome re-checks the token
under a row lock, so a worker that lost its lease writes and sends nothing.
`stalled_sessions_requeue` (beat, every minute) re-enqueues the sessions nobody would answer
otherwise.
"""

import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from uuid import UUID, uuid4

from django.db.models import Exists, OuterRef, Q

from agents.states import BOT_STATES
from conversations.models import Message, Session

logger = logging.getLogger(__name__)

# How long a pending inbound message of a lease-free session waits before the sweep enqueues its
# turn: the webhook's own task normally starts within seconds, so a minute means its publish
# failed or the task vanished — and a busy queue gets a harmless extra task at worst (the lease).
STALLED_PENDING_GRACE = timedelta(seconds=60)


def lease_claim(*, session_id: int, now: datetime, ttl: timedelta) -> UUID | None:
    """Take the session's lease if it is free or expired; the new token, or None if held.

    Taking it also ends the queued turn (``turn_queued_at``): a message from now on must enqueue
    another."""
    token = uuid4()
    claimed = (
        Session.objects.filter(pk=session_id)
        .filter(Q(lease_token__isnull=True) | Q(lease_expires_at__lte=now))
        .update(lease_token=token, lease_expires_at=now + ttl, turn_queued_at=None)
    )
    return token if claimed else None


def lease_release(*, session_id: int, token: UUID) -> bool:
    """Free the lease if this worker still holds it.

    A task enqueued during the turn found the lease taken and left; the holder drained its
    messages. From now on a message must enqueue a new turn (``turn_queued_at`` goes too)."""
    released = Session.objects.filter(pk=session_id, lease_token=token).update(
        lease_token=None, lease_expires_at=None, turn_queued_at=None
    )
    return bool(released)


def stalled_sessions(*, now: datetime, grace: timedelta, limit: int = 500) -> list[int]:
    """Sessions with inbound messages waiting for a turn that no worker will run.

    Two cases, in one query (a UNION of two index-driven halves):

    - the lease expired while messages were pending: its worker died mid-turn;
    - a bot-state session with no lease whose oldest pending message is older than `grace`:
      its turn was never enqueued (the publish after the webhook's commit failed) or the task
      vanished (a turn that raised released the lease and left the messages pending).

    HUMAN and CLOSED sessions are not in the second case: the webhook stores their messages
    already processed (staff read them in admin), and a turn marks any left pending processed.
    Simulated sessions are in neither: the simulator runs their turns (with the staff member's
    chosen drafts and its own sender) and ends a lost one itself (`simulator.simulation`).
    """
    pending = Message.objects.pending_inbound().filter(session=OuterRef("pk"))
    expired = Session.objects.filter(lease_expires_at__lte=now, is_simulated=False).filter(
        Exists(pending)
    )
    stranded = Session.objects.filter(
        lease_token__isnull=True,
        state__in=[state.value for state in BOT_STATES],
        is_simulated=False,
    ).filter(Exists(pending.filter(created_at__lte=now - grace)))
    return list(
        expired.order_by()
        .values_list("pk", flat=True)
        .union(stranded.order_by().values_list("pk", flat=True))
        .order_by("pk")[:limit]
    )


def stalled_sessions_requeue(
    *, now: datetime, grace: timedelta, enqueue: Callable[[int], object]
) -> list[int]:
    """Enqueue a turn for every stalled session (see `stalled_sessions`); their ids."""
    session_ids = stalled_sessions(now=now, grace=grace)
    for session_id in session_ids:
        enqueue(session_id)
    if session_ids:
        # A worker died, a publish failed or a turn raised: worth a look in the worker log.
        logger.warning(
            "stalled_sessions_requeued",
            extra={"count": len(session_ids), "session_ids": ",".join(map(str, session_ids))},
        )
    return session_ids
