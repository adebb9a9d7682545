"""The installation's replay slots: at most `cap` holders at once across every process.

Two pools (`ReplaySlotPool`): ``run`` (REPLAY_MAX_RUNNING runs at once) and ``call``
(REPLAY_CONCURRENCY model calls in flight for all replays together). The count must hold across
worker processes and machines, and in the embedded default (SQLite, eager tasks) there is no
Redis, so the slots are rows of the one store every deployment has: slot N of a pool is taken by
inserting its row, and the unique (pool, number) constraint lets one insert win, with no lock
held across anything. Each slot has a lease: a holder that died (a killed worker) loses its
slots when the lease expires, so a crash never shrinks the pool for good. A holder still alive
past its lease (it should not be: the leases are longer than the task's or the model call's time
limits) could let the pool pass its cap by that holder until it gives the slot back.

A holder is a replay run (`run_id`) or a simulated customers run (`persona_run_id`): both share
the pools, so together they keep to the caps.
"""

from datetime import datetime, timedelta

from django.db import IntegrityError, transaction

from governance.models import ReplaySlot, ReplaySlotPool


def _holder(run_id: int | None, persona_run_id: int | None) -> dict[str, int | None]:
    if (run_id is None) == (persona_run_id is None):
        raise ValueError("a slot has one holder: a replay run or a persona run")
    return {"run_id": run_id, "persona_run_id": persona_run_id}


def slot_acquire(
    *,
    pool: ReplaySlotPool,
    cap: int,
    now: datetime,
    lease: timedelta,
    run_id: int | None = None,
    persona_run_id: int | None = None,
) -> int | None:
    """Take a free slot of `pool` (numbers 0 to `cap` - 1) for `run_id` until `now + lease`;
    its number, or None when all `cap` are taken. Each statement is its own short transaction
    (none is left open for the caller to hold)."""
    holder = _holder(run_id, persona_run_id)
    ReplaySlot.objects.filter(pool=pool, expires_at__lt=now).delete()
    taken = set(ReplaySlot.objects.filter(pool=pool).values_list("number", flat=True))
    for number in range(cap):
        if number in taken:
            continue
        try:
            with transaction.atomic():
                ReplaySlot.objects.create(
                    pool=pool, number=number, expires_at=now + lease, **holder
                )
        except IntegrityError:
            # Another process took it between the read and the insert: try the next.
            continue
        return number
    return None


def slot_release(
    *,
    pool: ReplaySlotPool,
    number: int,
    run_id: int | None = None,
    persona_run_id: int | None = None,
) -> None:
    """Give slot `number` back (only if its holder still holds it: an expired lease may have
    gone to another run since)."""
    holder = _holder(run_id, persona_run_id)
    ReplaySlot.objects.filter(pool=pool, number=number, **holder).delete()


def slots_release(*, run_id: int | None = None, persona_run_id: int | None = None) -> None:
    """Give back every slot the holder holds (its end, or the sweep that ends it)."""
    ReplaySlot.objects.filter(**_holder(run_id, persona_run_id)).delete()


def slots_taken(*, pool: ReplaySlotPool, now: datetime) -> int:
    """How many slots of `pool` are held by a live lease."""
    return ReplaySlot.objects.filter(pool=pool, expires_at__gte=now).count()
