"""The turn's hand-written statements against the ORM queries they replace, quoted in their
comments: the lease's (conversations/lease.py), the drain loop's reads
(conversations/turns/selectors.py) and the commit's locked read (conversations/turns/commit.py)."""

from datetime import timedelta
from typing import Any
from uuid import UUID, uuid4

import pytest
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone
from model_bakery import baker

from agents.states import SessionState
from conversations.inbound.hot_path import update_row
from conversations.lease import lease_claim, lease_release
from conversations.models import Direction, Message, Session
from conversations.turns.commit import _locked_session, _mark_processed
from conversations.turns.result import Turn
from conversations.turns.selectors import (
    session_has_pending,
    session_pending_inbound,
    session_with_instance,
)

pytestmark = pytest.mark.django_db

NOW = timezone.now()
TTL = timedelta(seconds=180)
LEASES = {
    "free": (None, None),
    "held": (uuid4(), NOW + timedelta(seconds=1)),
    "expired now": (uuid4(), NOW),
    "expired": (uuid4(), NOW - timedelta(seconds=1)),
}


def lease_of(session: Session) -> tuple[UUID | None, object, object]:
    session.refresh_from_db()
    return session.lease_token, session.lease_expires_at, session.turn_queued_at


def orm_claim(session_id: int, token: UUID) -> bool:
    return bool(
        Session.objects.filter(pk=session_id)
        .filter(Q(lease_token__isnull=True) | Q(lease_expires_at__lte=NOW))
        .update(lease_token=token, lease_expires_at=NOW + TTL, turn_queued_at=None)
    )


@pytest.mark.parametrize("lease", LEASES)
def test_claiming_takes_what_the_orm_took(lease: str) -> None:
    token, expires = LEASES[lease]
    fields: dict[str, Any] = {
        "lease_token": token,
        "lease_expires_at": expires,
        "turn_queued_at": NOW,
    }
    ours, orm = baker.make(Session, **fields), baker.make(Session, **fields)

    claimed = lease_claim(session_id=ours.pk, now=NOW, ttl=TTL)
    orm_claimed = orm_claim(orm.pk, uuid4())

    assert (claimed is not None) is orm_claimed is (lease != "held")
    if claimed is not None:
        assert lease_of(ours) == (claimed, NOW + TTL, None)
    else:
        assert lease_of(ours) == (token, expires, NOW)
    assert lease_of(orm)[1:] == lease_of(ours)[1:]


def test_claiming_another_session_or_a_missing_one_takes_nothing() -> None:
    other = baker.make(Session)

    assert lease_claim(session_id=10**9, now=NOW, ttl=TTL) is None
    assert lease_of(other) == (None, None, None)


@pytest.mark.parametrize("holder", [True, False])
def test_releasing_frees_only_the_holder_s_lease(holder: bool) -> None:
    token = uuid4()
    session = baker.make(Session, lease_token=token, lease_expires_at=NOW + TTL, turn_queued_at=NOW)
    orm = Session.objects.filter(pk=session.pk, lease_token=token if holder else uuid4())

    assert orm.count() == int(holder)
    assert lease_release(session_id=session.pk, token=token if holder else uuid4()) is holder
    assert lease_of(session) == ((None, None, None) if holder else (token, NOW + TTL, NOW))


def test_the_pending_check_is_the_orm_s() -> None:
    pending, answered, outbound_only, other = baker.make(Session, _quantity=4)
    baker.make(Message, session=pending, direction=Direction.INBOUND, processed_at=None)
    baker.make(Message, session=answered, direction=Direction.INBOUND, processed_at=NOW)
    baker.make(Message, session=outbound_only, direction=Direction.OUTBOUND, processed_at=None)

    for session in (pending, answered, outbound_only, other):
        orm = Message.objects.pending_inbound().filter(session_id=session.pk).exists()
        assert session_has_pending(session_id=session.pk) is orm
    assert [session_has_pending(session_id=s.pk) for s in (pending, answered, other)] == [
        True,
        False,
        False,
    ]


def test_the_pending_messages_are_the_orm_s_in_the_orm_s_order() -> None:
    session, other = baker.make(Session, _quantity=2)
    later, earlier = NOW, NOW - timedelta(seconds=30)
    for number, (timestamp, processed) in enumerate(
        [
            (later, None),
            (None, None),
            (earlier, None),
            (later, None),
            (earlier, NOW),
            (None, None),
        ]
    ):
        baker.make(
            Message,
            session=session,
            direction=Direction.INBOUND,
            wa_timestamp=timestamp,
            processed_at=processed,
            content=f"às {timestamp}",
            wa_message_id=f"wamid.IN{number}",
        )
    baker.make(Message, session=session, direction=Direction.OUTBOUND, processed_at=None)
    baker.make(Message, session=other, direction=Direction.INBOUND, processed_at=None)
    orm = (
        Message.objects.pending_inbound()
        .filter(session_id=session.pk)
        .order_by(F("wa_timestamp").asc(nulls_last=True), "id")
    )

    pending = session_pending_inbound(session_id=session.pk)

    assert [(m.pk, m.content, m.wa_timestamp, m.wa_message_id) for m in pending] == list(
        orm.values_list("pk", "content", "wa_timestamp", "wa_message_id")
    )
    assert [m.wa_timestamp for m in pending] == [earlier, later, later, None, None]
    # Loaded as the ORM's .only() loads them: the other fields deferred.
    only = orm.only("id", "content", "wa_timestamp", "wa_message_id")
    assert {m.get_deferred_fields() == only[0].get_deferred_fields() for m in pending} == {True}
    assert "direction" in pending[0].get_deferred_fields()


def test_the_pending_check_excludes_the_turn_s_own_messages_as_the_orm_did() -> None:
    session = baker.make(Session)
    first, second = baker.make(
        Message, session=session, direction=Direction.INBOUND, processed_at=None, _quantity=2
    )

    for excluding in [(), (first.pk,), (first.pk, second.pk), (10**9,)]:
        orm = (
            Message.objects.pending_inbound()
            .filter(session_id=session.pk)
            .exclude(pk__in=excluding)
            .exists()
        )
        assert session_has_pending(session_id=session.pk, excluding=excluding) is orm
    assert session_has_pending(session_id=session.pk, excluding=(first.pk, second.pk)) is False


@pytest.mark.parametrize("pins", [{}, {"triagem": "builtin", "coleta": "override:7"}])
@pytest.mark.parametrize("lease", LEASES)
def test_the_commit_reads_the_state_lease_and_pins_the_orm_read(
    lease: str, pins: dict[str, str]
) -> None:
    token, expires = LEASES[lease]
    session = baker.make(
        Session,
        state="COLLECTION",
        lease_token=token,
        lease_expires_at=expires,
        prompt_versions=pins,
    )
    with transaction.atomic():
        orm = Session.objects.select_for_update().only(
            "id", "state", "lease_token", "prompt_versions"
        )
        expected = orm.get(pk=session.pk)

        assert _locked_session(session.pk) == (
            expected.state,
            expected.lease_token,
            bool(expected.prompt_versions),
        )
    assert _locked_session(session.pk) == ("COLLECTION", token, bool(pins))
    with pytest.raises(Session.DoesNotExist):
        _locked_session(10**9)


def test_marking_the_turn_s_messages_processed_writes_what_the_orm_wrote() -> None:
    ours, orm = baker.make(Session, _quantity=2)
    done = NOW - timedelta(minutes=1)

    def messages(session: Session) -> list[Message]:
        return [
            baker.make(Message, session=session, direction=Direction.INBOUND, processed_at=None),
            baker.make(Message, session=session, direction=Direction.INBOUND, processed_at=done),
            baker.make(Message, session=session, direction=Direction.OUTBOUND, processed_at=None),
            baker.make(Message, session=session, direction=Direction.INBOUND, processed_at=None),
        ]

    mine, theirs = messages(ours), messages(orm)
    turn_id = uuid4()
    turn = Turn(
        session_id=ours.pk,
        turn_id=turn_id,
        token=uuid4(),
        state=SessionState.TRIAGE,
        inbound_ids=tuple(m.pk for m in mine[:3]),
        last_inbound_id=mine[2].pk,
    )

    _mark_processed(turn, NOW)
    Message.objects.pending_inbound().filter(pk__in=[m.pk for m in theirs[:3]]).update(
        processed_at=NOW, turn_id=turn_id
    )

    def written(rows: list[Message]) -> list[tuple[object, ...]]:
        return [
            tuple(Message.objects.values_list("processed_at", "turn_id").get(pk=m.pk)) for m in rows
        ]

    assert written(mine) == written(theirs)
    assert written(mine) == [(NOW, turn_id), (done, None), (None, None), (None, None)]


def field_values(row: Any) -> dict[str, Any]:
    return {f.attname: getattr(row, f.attname) for f in type(row)._meta.concrete_fields}


def test_the_turn_s_session_read_is_the_orm_s() -> None:
    session = baker.make(
        Session,
        customer_phone="5511912345678",
        customer_name="Maria",
        customer_document="123.456.789-09",
        technical_data={"quantidade": 2},
        loaded_packages=["AGUA"],
        prompt_versions={"triagem": "builtin"},
        confirmation_data=None,
        lease_token=uuid4(),
        lease_expires_at=NOW,
        instance__access_token="segredo",
        instance__brand_context="Laboratório",
    )
    orm = Session.objects.select_related("instance").get(pk=session.pk)

    ours = session_with_instance(session_id=session.pk)

    assert field_values(ours) == field_values(orm)
    assert field_values(ours.instance) == field_values(orm.instance)
    assert ours.customer_phone == "5511912345678"
    assert ours.instance.access_token == "segredo"
    assert ours._state.adding is False
    assert ours._state.db == orm._state.db
    with pytest.raises(Session.DoesNotExist):
        session_with_instance(session_id=session.pk + 1000)


def test_the_turn_s_session_update_writes_what_the_orm_s_did() -> None:
    ours, orm = baker.make(Session, _quantity=2, customer_name="Antes", segment="HUMANO")
    fields: dict[str, Any] = {
        "state": SessionState.DATA_COLLECT.value,
        "segment": "AMBIENTAL",
        "intent": "ORCAMENTO",
        "service": "AGUA",
        "technical_data": {"quantidade": 2, "finalidade": "potabilidade"},
        "technical_extras": {},
        "registration_data": {"documento": "123.456.789-09"},
        "registration_extras": {"obs": "ç"},
        "confirmation_data": None,
        "loaded_packages": ["AGUA", "TOX"],
        "customer_name": "Maria",
        "last_message_at": NOW,
        "customer_document": "123.456.789-09",
        "closed_at": NOW,
        "prompt_versions": {"triagem": "builtin"},
    }

    before = field_values(ours)
    assert update_row(Session, ours.pk, **fields) == 1
    Session.objects.filter(pk=orm.pk).update(**fields)

    ours.refresh_from_db()
    orm.refresh_from_db()
    assert {name: getattr(ours, name) for name in fields} == {
        name: getattr(orm, name) for name in fields
    }
    # Nothing else written (the ORM's update() leaves auto_now's updated_at alone too).
    assert {k: v for k, v in field_values(ours).items() if k not in fields} == {
        k: v for k, v in before.items() if k not in fields
    }
    assert ours.customer_document == "123.456.789-09"
    assert ours.technical_data == {"quantidade": 2, "finalidade": "potabilidade"}
    assert update_row(Session, orm.pk + ours.pk + 1000, state="HUMANO") == 0
    with pytest.raises(NotImplementedError):
        update_row(Session, ours.pk, last_message_at=F("created_at"))
