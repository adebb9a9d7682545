"""The per-session lease (conversations/lease.py): taken when free or expired, freed only by its
holder, and taking it ends the queued turn."""

from datetime import timedelta
from uuid import UUID, uuid4

import pytest
from django.utils import timezone
from model_bakery import baker

from conversations.lease import lease_claim, lease_release
from conversations.models import Session

pytestmark = pytest.mark.django_db

NOW = timezone.now()
TTL = timedelta(seconds=180)
HELD_TOKEN, EXPIRED_NOW_TOKEN, EXPIRED_TOKEN = uuid4(), uuid4(), uuid4()
LEASES = {
    "free": (None, None),
    "held": (HELD_TOKEN, NOW + timedelta(seconds=1)),
    "expired now": (EXPIRED_NOW_TOKEN, NOW),
    "expired": (EXPIRED_TOKEN, NOW - timedelta(seconds=1)),
}


def lease_of(session: Session) -> tuple[UUID | None, object, object]:
    session.refresh_from_db()
    return session.lease_token, session.lease_expires_at, session.turn_queued_at


@pytest.mark.parametrize(
    ("lease", "taken"), [("free", True), ("held", False), ("expired now", True), ("expired", True)]
)
def test_a_free_or_expired_lease_is_taken_and_ends_the_queued_turn(lease: str, taken: bool) -> None:
    token, expires = LEASES[lease]
    session = baker.make(Session, lease_token=token, lease_expires_at=expires, turn_queued_at=NOW)

    claimed = lease_claim(session_id=session.pk, now=NOW, ttl=TTL)

    if taken:
        assert claimed is not None
        assert lease_of(session) == (claimed, NOW + TTL, None)
    else:
        assert claimed is None
        assert lease_of(session) == (HELD_TOKEN, NOW + timedelta(seconds=1), NOW)


def test_claiming_a_missing_session_takes_nothing() -> None:
    other = baker.make(Session)

    assert lease_claim(session_id=other.pk + 1000, now=NOW, ttl=TTL) is None
    assert lease_of(other) == (None, None, None)


@pytest.mark.parametrize("holder", [True, False])
def test_releasing_frees_only_the_holder_s_lease(holder: bool) -> None:
    token = uuid4()
    session = baker.make(Session, lease_token=token, lease_expires_at=NOW + TTL, turn_queued_at=NOW)

    released = lease_release(session_id=session.pk, token=token if holder else uuid4())

    assert released is holder
    assert lease_of(session) == ((None, None, None) if holder else (token, NOW + TTL, NOW))
