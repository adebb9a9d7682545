"""The per-session processing lease (DESIGN.md §4 step 2).

One worker at a time runs a session's turns. The lease is two columns on the Session row
(`lease_token`, `lease_expires_at`) claimed with one atomic ``UPDATE ... WHERE`` — no row lock
and no transaction is held while the model thinks. A worker that finds the lease taken exits at
once: the holder drains every pending inbound message before it releases. A lease whose expiry
has passed belongs to a worker that died (or was killed at the task's hard time limit) and may be
taken over; its TTL is therefore longer than the task's hard time limit, so a live holder never
loses it. Every write of a turn's outcome re-checks the token under a row lock, so a worker that
lost its lease writes and sends nothing.
"""

import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from uuid import UUID, uuid4

from django.db.models import Exists, OuterRef, Q

from conversations.models import Direction, Message, Session

logger = logging.getLogger(__name__)


def lease_claim(*, session_id: int, now: datetime, ttl: timedelta) -> UUID | None:
    """Take the session's lease if it is free or expired; the new token, or None if held."""
    token = uuid4()
    claimed = (
        Session.objects.filter(pk=session_id)
        .filter(Q(lease_token__isnull=True) | Q(lease_expires_at__lte=now))
        .update(lease_token=token, lease_expires_at=now + ttl)
    )
    return token if claimed else None


def lease_renew(*, session_id: int, token: UUID, now: datetime, ttl: timedelta) -> bool:
    """Push the expiry of a lease this worker holds; False when it was lost."""
    return bool(
        Session.objects.filter(pk=session_id, lease_token=token).update(lease_expires_at=now + ttl)
    )


def lease_release(*, session_id: int, token: UUID) -> bool:
    """Free the lease if this worker still holds it."""
    return bool(
        Session.objects.filter(pk=session_id, lease_token=token).update(
            lease_token=None, lease_expires_at=None
        )
    )


def sessions_with_expired_lease(*, now: datetime, limit: int = 500) -> list[int]:
    """Sessions whose lease expired while inbound messages still wait for a turn."""
    pending = Message.objects.filter(
        session=OuterRef("pk"), direction=Direction.INBOUND, processed_at__isnull=True
    )
    return list(
        Session.objects.filter(lease_expires_at__lte=now)
        .filter(Exists(pending))
        .order_by("lease_expires_at")
        .values_list("pk", flat=True)[:limit]
    )


def expired_leases_requeue(*, now: datetime, enqueue: Callable[[int], None]) -> list[int]:
    """Enqueue a turn for every session whose lease expired with messages pending."""
    session_ids = sessions_with_expired_lease(now=now)
    for session_id in session_ids:
        enqueue(session_id)
    if session_ids:
        # A worker died (or hit the hard time limit) mid-turn: worth a look.
        logger.warning(
            "expired_leases_requeued",
            extra={"count": len(session_ids), "session_ids": ",".join(map(str, session_ids))},
        )
    return session_ids
