"""Reactions through the webhook: stored on the message they react to, by WhatsApp time; the
reaction's own row kept once per wamid and processed; no turn, no answer."""

from datetime import timedelta
from typing import Any

import pytest
from model_bakery import baker

from agents.states import SessionState
from conversations.models import Direction, Instance, Message, Session
from support.queue import waiting_sessions
from tests import baker_recipes as recipes
from tests.helpers.inbound import Receiver, T, make_session, messages
from tests.helpers.meta_payloads import encode, load_fixture

pytestmark = pytest.mark.django_db

THUMBS_UP = "\U0001f44d"
HEART = "\u2764\ufe0f"


def reaction(
    emoji: str = THUMBS_UP,
    *,
    wamid: str = "wamid.REACTION01",
    to: str = "wamid.OUT01",
    at: int = 0,
) -> bytes:
    """The customer's reaction to `to`, `at` seconds after T."""
    document = load_fixture("reaction")
    message = document["entry"][0]["changes"][0]["value"]["messages"][0]
    message.update(id=wamid, timestamp=str(int(T.timestamp()) + at))
    message["reaction"] = {"message_id": to, "emoji": emoji}
    return encode(document)


def staff_reaction(emoji: str, *, to: str, wamid: str = "wamid.ECHOREACT01") -> bytes:
    """A reaction staff gave in the WhatsApp Business app (an echo)."""
    document = load_fixture("echo")
    echo = document["entry"][0]["changes"][0]["value"]["message_echoes"][0]
    del echo["text"]
    echo.update(id=wamid, type="reaction", reaction={"message_id": to, "emoji": emoji})
    return encode(document)


def bubble(session: Session, content: str = "Posso confirmar o pedido?", **fields: Any) -> Message:
    """The bot's message the customer reacts to."""
    message: Message = baker.make(
        Message,
        session=session,
        direction=Direction.OUTBOUND,
        content=content,
        wa_message_id="wamid.OUT01",
        delivery_status="read",
        **fields,
    )
    return message


def reaction_of(message: Message) -> tuple[str, Any]:
    message.refresh_from_db()
    return message.reaction, message.reaction_at


def test_a_reaction_lands_on_the_message_it_reacts_to_and_starts_no_turn(
    instance: Instance, receive: Receiver
) -> None:
    session = make_session(instance)
    target = bubble(session)

    delivery = receive(reaction())

    assert reaction_of(target) == (THUMBS_UP, T)
    [event] = messages(session, Direction.INBOUND)
    assert (
        event.message_type,
        event.content,
        event.wa_message_id,
        event.processed_at is not None,
        event.reaction,
    ) == ("reaction", THUMBS_UP, "wamid.REACTION01", True, "")
    # No turn, and never the unsupported-media text.
    assert (receive.turns.calls, receive.sends.calls) == ([], [])
    assert messages(session, Direction.OUTBOUND) == [target]
    assert (delivery.outcome, delivery.messages_count) == ("processed", 1)
    session.refresh_from_db()
    assert session.state == SessionState.TRIAGE


def test_a_reaction_delivered_twice_is_stored_once(instance: Instance, receive: Receiver) -> None:
    session = make_session(instance)
    target = bubble(session)

    receive(reaction())
    receive(reaction())

    assert len(messages(session, Direction.INBOUND)) == 1
    assert reaction_of(target) == (THUMBS_UP, T)


def test_a_reaction_taken_off_clears_it(instance: Instance, receive: Receiver) -> None:
    session = make_session(instance)
    target = bubble(session)
    receive(reaction())

    receive(reaction("", wamid="wamid.REACTION02", at=1))

    assert reaction_of(target) == ("", T + timedelta(seconds=1))
    assert [m.content for m in messages(session, Direction.INBOUND)] == [THUMBS_UP, ""]


def test_a_later_reaction_replaces_an_earlier_one(instance: Instance, receive: Receiver) -> None:
    session = make_session(instance)
    target = bubble(session)
    receive(reaction())

    receive(reaction(HEART, wamid="wamid.REACTION02", at=1))

    assert reaction_of(target) == (HEART, T + timedelta(seconds=1))


@pytest.mark.parametrize(
    ("late_at", "expected"),
    [
        pytest.param(-1, (HEART, T), id="1 s older: the newer stays"),
        pytest.param(0, (THUMBS_UP, T), id="same second: the one applied last"),
        pytest.param(1, (THUMBS_UP, T + timedelta(seconds=1)), id="1 s newer: replaces"),
    ],
)
def test_a_reaction_arriving_late_does_not_overwrite_a_newer_one(
    instance: Instance, receive: Receiver, late_at: int, expected: tuple[str, Any]
) -> None:
    session = make_session(instance)
    target = bubble(session)
    receive(reaction(HEART, wamid="wamid.REACTION02"))

    receive(reaction(THUMBS_UP, wamid="wamid.REACTION01", at=late_at))

    assert reaction_of(target) == expected
    # Both reactions are kept as they came, whichever shows.
    assert len(messages(session, Direction.INBOUND)) == 2


def test_a_reaction_to_an_unknown_message_is_only_logged(
    instance: Instance, receive: Receiver, caplog: pytest.LogCaptureFixture
) -> None:
    session = make_session(instance)
    target = bubble(session)

    with caplog.at_level("INFO", logger="conversations.inbound"):
        receive(reaction(to="wamid.NEVERSEEN"))

    assert reaction_of(target) == ("", None)
    assert [m.message_type for m in messages(session, Direction.INBOUND)] == ["reaction"]
    assert [
        (r.getMessage(), r.wamid)  # type: ignore[attr-defined]
        for r in caplog.records
        if r.getMessage().startswith("whatsapp_reaction")
    ] == [("whatsapp_reaction_target_unknown", "wamid.NEVERSEEN")]
    assert (receive.turns.calls, receive.sends.calls) == ([], [])


def test_a_reaction_to_another_customer_s_message_changes_nothing(
    instance: Instance, receive: Receiver
) -> None:
    make_session(instance)
    someone_else = recipes.session.make(instance=instance, customer_phone="5521988887777")
    theirs = bubble(someone_else)

    receive(reaction())

    assert reaction_of(theirs) == ("", None)


def test_a_reaction_to_a_message_of_the_customer_s_earlier_conversation_lands_on_it(
    instance: Instance, receive: Receiver
) -> None:
    earlier = recipes.known_customer.make(
        instance=instance, state=SessionState.CLOSED, customer_user_id=""
    )
    target = bubble(earlier)
    make_session(instance)

    receive(reaction())

    assert reaction_of(target) == (THUMBS_UP, T)


def test_a_reaction_in_a_human_conversation_is_stored_and_nothing_is_sent(
    instance: Instance, receive: Receiver
) -> None:
    session = make_session(instance, state=SessionState.HUMAN)
    target = bubble(session)

    receive(reaction())

    assert reaction_of(target) == (THUMBS_UP, T)
    assert (receive.turns.calls, receive.sends.calls) == ([], [])


def test_a_reaction_moves_the_last_activity_but_is_not_the_customer_writing(
    instance: Instance, receive: Receiver
) -> None:
    before = T - timedelta(minutes=5)
    session = make_session(instance, last_message_at=before, last_inbound_at=before)
    bubble(session)

    receive(reaction())

    session.refresh_from_db()
    assert (session.last_message_at, session.last_inbound_at) == (T, before)


def test_a_customer_who_reacts_to_the_team_s_answer_is_not_waiting_again(
    instance: Instance, receive: Receiver
) -> None:
    answered = T - timedelta(minutes=1)
    session = make_session(
        instance,
        state=SessionState.HUMAN,
        handed_off_at=T - timedelta(minutes=10),
        last_staff_reply_at=answered,
        last_inbound_at=T - timedelta(minutes=2),
    )
    bubble(session, "Seu laudo sai amanhã.", created_at=answered)

    receive(reaction())

    assert list(waiting_sessions()) == []
    baker.make(
        Message,
        session=session,
        direction=Direction.INBOUND,
        content="Obrigada!",
        wa_timestamp=T + timedelta(seconds=5),
    )
    Session.objects.filter(pk=session.pk).update(last_inbound_at=T + timedelta(seconds=5))
    assert [vars(s)["waiting_since"] for s in waiting_sessions()] == [T + timedelta(seconds=5)]


def test_a_staff_reaction_from_the_app_lands_on_the_customer_s_message_and_keeps_the_bot(
    instance: Instance, receive: Receiver
) -> None:
    session = make_session(instance)
    asked = baker.make(
        Message,
        session=session,
        direction=Direction.INBOUND,
        content="Vocês abrem sábado?",
        wa_message_id="wamid.TEXT01",
        processed_at=T,
    )

    receive(staff_reaction(THUMBS_UP, to="wamid.TEXT01"))

    assert reaction_of(asked) == (THUMBS_UP, T)
    [event] = messages(session, Direction.OUTBOUND)
    assert (event.message_type, event.content, event.wa_message_id) == (
        "reaction",
        THUMBS_UP,
        "wamid.ECHOREACT01",
    )
    session.refresh_from_db()
    assert (session.state, session.handoff_reason) == (SessionState.TRIAGE, "")
    assert not session.messages.filter(direction=Direction.SYSTEM).exists()
    assert (receive.turns.calls, receive.sends.calls) == ([], [])


def test_a_staff_reaction_taken_off_clears_it(instance: Instance, receive: Receiver) -> None:
    session = make_session(instance)
    asked = baker.make(
        Message,
        session=session,
        direction=Direction.INBOUND,
        wa_message_id="wamid.TEXT01",
        reaction=THUMBS_UP,
        reaction_at=T - timedelta(seconds=1),
    )

    receive(staff_reaction("", to="wamid.TEXT01"))

    assert reaction_of(asked) == ("", T)
