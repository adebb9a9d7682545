"""The inbound use case: one delivery -> stored raw body + applied events, in one transaction."""

from datetime import UTC, datetime, timedelta

import pytest
from django.db import OperationalError
from model_bakery import baker

from agents.states import HandoffReason, SessionState
from conversations.handoff import STAFF_TAKEOVER_TEXT
from conversations.inbound import events
from conversations.inbound.deliveries import webhook_delivery_receive, webhook_delivery_reprocess
from conversations.inbound.events import ACTION_UNSUPPORTED_MEDIA
from conversations.models import (
    DeliveryStatusEvent,
    Direction,
    Instance,
    Message,
    Session,
    WebhookDelivery,
    WebhookOutcome,
)
from conversations.whatsapp.payload import InboundKind, MalformedBodyError
from prompts_admin.models import DEFAULT_UNSUPPORTED_MEDIA_MESSAGE, RuntimeConfig
from tests.conversations.whatsapp.conftest import (
    CUSTOMER_PHONE,
    CUSTOMER_USER_ID,
    Recorder,
    encode,
    fixture_bytes,
    load_fixture,
)

pytestmark = pytest.mark.django_db

T = datetime.fromtimestamp(1764500000, tz=UTC)
HEADERS = {"Content-Type": "application/json"}


class Receiver:
    """Calls the use case like the view does and runs the after-commit callbacks."""

    def __init__(self, capture) -> None:
        self.capture = capture
        self.turns = Recorder()
        self.sends = Recorder()
        self.callbacks: list = []

    def __call__(self, body: bytes | str) -> WebhookDelivery:
        raw = fixture_bytes(body) if isinstance(body, str) else body
        with self.capture(execute=True) as callbacks:
            receipt = webhook_delivery_receive(
                raw_body=raw, headers=HEADERS, enqueue_turn=self.turns, enqueue_send=self.sends
            )
        self.callbacks += callbacks
        return WebhookDelivery.objects.get(pk=receipt.delivery_id)


@pytest.fixture
def receive(django_capture_on_commit_callbacks) -> Receiver:
    return Receiver(django_capture_on_commit_callbacks)


def make_session(instance: Instance, **fields) -> Session:
    defaults = {
        "customer_phone": CUSTOMER_PHONE,
        "customer_user_id": CUSTOMER_USER_ID,
        "last_message_at": T - timedelta(minutes=5),
    }
    return baker.make(Session, instance=instance, **(defaults | fields))


def messages(session: Session, direction: str) -> list[Message]:
    return list(session.messages.filter(direction=direction).order_by("id"))


# --- text messages ---------------------------------------------------------------------------


def test_a_text_from_a_new_customer_opens_a_session_and_enqueues_its_turn_after_commit(
    instance, receive
):
    delivery = receive("text")

    session = Session.objects.get()
    assert (
        session.instance_id,
        session.customer_phone,
        session.customer_user_id,
        session.customer_name,
        session.state,
        session.last_inbound_at,
        session.last_message_at,
    ) == (instance.pk, CUSTOMER_PHONE, CUSTOMER_USER_ID, "Maria Silva", "TRIAGE", T, T)
    [message] = messages(session, Direction.INBOUND)
    assert (
        message.message_type,
        message.content,
        message.wa_message_id,
        message.wa_timestamp,
        message.processed_at,
    ) == ("text", "Olá, gostaria de um orçamento de análise de água.", "wamid.TEXT01", T, None)
    assert receive.turns.calls == [session.pk]
    assert receive.sends.calls == []
    assert len(receive.callbacks) == 1  # the turn ran only after the commit
    assert (
        delivery.outcome,
        delivery.messages_count,
        delivery.statuses_count,
        delivery.error,
        bytes(delivery.raw_body),
        delivery.headers,
    ) == ("processed", 1, 0, "", fixture_bytes("text"), HEADERS)


@pytest.mark.parametrize(
    ("fixture", "message_type", "content"),
    [
        ("interactive_button_reply", "interactive", "Sim, confirmo"),
        ("interactive_list_reply", "interactive", "Análise de água"),
        ("button", "button", "Quero um orçamento"),
    ],
)
def test_interactive_replies_and_template_buttons_become_pending_text(
    instance, receive, fixture, message_type, content
):
    receive(fixture)

    session = Session.objects.get()
    [message] = messages(session, Direction.INBOUND)
    assert (message.message_type, message.content, message.processed_at) == (
        message_type,
        content,
        None,
    )
    assert receive.turns.calls == [session.pk]


def test_a_customer_known_only_by_user_id_gets_a_session_without_phone(instance, receive):
    receive("bsuid_only")

    session = Session.objects.get()
    assert (session.customer_phone, session.customer_user_id, session.customer_name) == (
        "",
        "BR.5555555555555555",
        "Cliente Anônima",
    )
    assert receive.turns.calls == [session.pk]


def test_a_batch_stores_every_message_in_its_customer_s_session_and_enqueues_each_turn_once(
    instance, receive
):
    existing = make_session(instance)
    out1 = baker.make(
        Message, session=existing, direction=Direction.OUTBOUND, wa_message_id="wamid.OUT01"
    )
    out2 = baker.make(
        Message, session=existing, direction=Direction.OUTBOUND, wa_message_id="wamid.OUT02"
    )

    delivery = receive("batch")

    carlos = Session.objects.get(customer_phone="5521988887777")
    assert [m.content for m in messages(existing, Direction.INBOUND)] == [
        "Bom dia",
        "Vocês atendem em Campinas?",
    ]
    assert [m.content for m in messages(carlos, Direction.INBOUND)] == ["Preciso de um laudo"]
    assert receive.turns.calls == [existing.pk, carlos.pk]
    out1.refresh_from_db()
    out2.refresh_from_db()
    assert (out1.delivery_status, out2.delivery_status) == ("delivered", "read")
    assert (delivery.messages_count, delivery.statuses_count) == (3, 2)


def test_a_repeated_delivery_stores_nothing_twice_and_enqueues_no_second_turn(instance, receive):
    first = receive("text")
    second = receive("text")

    assert Message.objects.count() == 1
    assert receive.turns.calls == [Session.objects.get().pk]
    # The identical body is stored once and counted (issue 11 §4); the first pass's outcome stays.
    assert second.pk == first.pk
    assert (second.outcome, second.messages_count, second.times_received) == ("processed", 1, 2)
    assert WebhookDelivery.objects.count() == 1


# --- other message kinds ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fixture", "content"),
    [
        ("image", "Foto do laudo"),
        ("audio", ""),
        ("video", "Vídeo da coleta"),
        ("document", "Pedido"),
        ("sticker", ""),
        ("location", "Laboratório Central - Av. Paulista, 1000 (-23.5613, -46.6565)"),
        ("contacts", "João Souza"),
    ],
)
def test_media_in_a_bot_state_is_logged_and_answered_with_the_fixed_text_without_a_turn(
    instance, receive, fixture, content
):
    receive(fixture)

    session = Session.objects.get()
    [inbound_message] = messages(session, Direction.INBOUND)
    [reply] = messages(session, Direction.OUTBOUND)
    assert (inbound_message.message_type, inbound_message.content) == (fixture, content)
    assert inbound_message.processed_at is not None  # consumed: no turn will take it
    assert (reply.content, reply.action, reply.delivery_status, reply.wa_message_id) == (
        DEFAULT_UNSUPPORTED_MEDIA_MESSAGE,
        ACTION_UNSUPPORTED_MEDIA,
        "pending",
        None,
    )
    assert receive.sends.calls == [reply.pk]
    assert receive.turns.calls == []


def test_the_unsupported_media_text_comes_from_runtime_config(instance, receive):
    config = RuntimeConfig.load()
    config.unsupported_media_message = "Só leio texto por aqui."
    config.save()

    receive("image")

    assert messages(Session.objects.get(), Direction.OUTBOUND)[0].content == (
        "Só leio texto por aqui."
    )


def test_several_media_in_one_delivery_get_a_single_answer(instance, receive):
    document = load_fixture("image")
    first = document["entry"][0]["changes"][0]["value"]["messages"][0]
    document["entry"][0]["changes"][0]["value"]["messages"].append(first | {"id": "wamid.IMG2"})

    receive(encode(document))

    session = Session.objects.get()
    assert len(messages(session, Direction.INBOUND)) == 2
    assert len(messages(session, Direction.OUTBOUND)) == 1


@pytest.mark.parametrize(
    ("fixture", "content"), [("reaction", "\U0001f44d"), ("unsupported", "poll_creation")]
)
def test_reactions_and_unsupported_messages_are_only_logged(instance, receive, fixture, content):
    receive(fixture)

    session = Session.objects.get()
    [message] = session.messages.all()
    assert (message.direction, message.message_type, message.content) == (
        Direction.INBOUND,
        fixture,
        content,
    )
    assert message.processed_at is not None
    assert (receive.turns.calls, receive.sends.calls) == ([], [])


@pytest.mark.parametrize("fixture", ["text", "image"])
def test_in_a_human_session_messages_are_logged_and_nothing_is_sent(instance, receive, fixture):
    session = make_session(instance, state=SessionState.HUMAN)

    receive(fixture)

    [message] = session.messages.all()
    assert (message.direction, message.processed_at is not None) == (Direction.INBOUND, True)
    assert (receive.turns.calls, receive.sends.calls) == ([], [])


# --- sessions --------------------------------------------------------------------------------


def test_the_session_is_found_by_user_id_first_then_by_phone(instance, receive):
    by_phone = make_session(instance, customer_user_id="")
    by_user_id = make_session(instance, customer_phone="")

    receive("text")

    assert [m.session_id for m in Message.objects.all()] == [by_user_id.pk]
    by_user_id.refresh_from_db()
    # The phone belongs to the other open session: it is not copied (one open session per phone).
    assert (by_user_id.customer_phone, by_user_id.customer_user_id) == ("", CUSTOMER_USER_ID)
    by_phone.refresh_from_db()
    assert (by_phone.customer_user_id, by_phone.messages.count()) == ("", 0)
    assert Session.objects.count() == 2


def test_a_session_known_by_phone_learns_the_user_id_and_name(instance, receive):
    session = make_session(instance, customer_user_id="", customer_name="")

    receive("text")

    session.refresh_from_db()
    assert (session.customer_user_id, session.customer_name) == (CUSTOMER_USER_ID, "Maria Silva")
    assert Session.objects.count() == 1


def test_a_session_idle_longer_than_session_idle_hours_is_closed_and_a_new_one_opened(
    instance, receive, settings
):
    settings.SESSION_IDLE_HOURS = 24
    old = make_session(
        instance, state=SessionState.QUALIFYING, last_message_at=T - timedelta(hours=25)
    )

    receive("text")

    old.refresh_from_db()
    new = Session.objects.exclude(pk=old.pk).get()
    assert (old.state, old.closed_at is not None) == (SessionState.CLOSED, True)
    [event] = old.messages.all()
    assert (event.direction, event.message_type, event.action, event.content) == (
        Direction.SYSTEM,
        "session_closed",
        "idle",
        "Conversa encerrada por inatividade: o cliente voltou depois de 24 h.",
    )
    assert (new.state, new.customer_phone) == (SessionState.TRIAGE, CUSTOMER_PHONE)
    assert receive.turns.calls == [new.pk]


def test_a_session_quiet_for_less_than_the_idle_limit_continues(instance, receive):
    session = make_session(instance, last_message_at=T - timedelta(hours=23))

    receive("text")

    assert Session.objects.count() == 1
    assert receive.turns.calls == [session.pk]


def test_a_closed_session_is_never_reopened(instance, receive):
    closed_at = T - timedelta(minutes=1)
    closed = make_session(instance, state=SessionState.CLOSED, closed_at=closed_at)

    receive("text")

    closed.refresh_from_db()
    assert (closed.state, closed.closed_at, closed.messages.count()) == ("CLOSED", closed_at, 0)
    assert Session.objects.exclude(pk=closed.pk).get().messages.count() == 1


def test_an_older_message_does_not_move_the_session_s_times_backwards(instance, receive):
    later = T + timedelta(hours=1)
    session = make_session(instance, last_message_at=later, last_inbound_at=later)

    receive("text")

    session.refresh_from_db()
    assert (session.last_message_at, session.last_inbound_at) == (later, later)


@pytest.mark.parametrize("active", [False, None])
def test_a_delivery_for_an_unknown_or_inactive_number_is_ignored(receive, db, active):
    if active is False:
        baker.make(Instance, phone_number_id="100000000000001", is_active=False)

    delivery = receive("text")

    assert (delivery.outcome, delivery.messages_count) == ("ignored", 0)
    assert (Session.objects.count(), Message.objects.count()) == (0, 0)
    assert receive.turns.calls == []


# --- identity, echoes, statuses --------------------------------------------------------------


def test_a_number_change_updates_the_open_session_and_is_logged_as_a_system_event(
    instance, receive
):
    session = make_session(instance)

    receive("system_user_changed_number")

    session.refresh_from_db()
    assert (session.customer_phone, session.customer_user_id) == (
        "5511912340000",
        "BR.9999999999999999",
    )
    [event] = session.messages.all()
    assert (event.direction, event.message_type, event.action, event.wa_message_id) == (
        Direction.SYSTEM,
        "identity_changed",
        "user_changed_number",
        "wamid.SYSTEM01",
    )
    assert receive.turns.calls == []


def test_a_user_id_change_without_phone_finds_the_session_by_the_previous_user_id(
    instance, receive
):
    session = make_session(instance, customer_phone="")

    receive("system_user_changed_user_id")

    session.refresh_from_db()
    assert session.customer_user_id == "BR.8888888888888888"


def test_an_identity_change_for_a_customer_without_open_session_writes_nothing(instance, receive):
    delivery = receive("system_user_changed_number")

    assert (Session.objects.count(), Message.objects.count()) == (0, 0)
    assert delivery.outcome == "processed"


def test_a_staff_echo_is_a_staff_message_and_silences_the_bot(instance, receive):
    session = make_session(instance, state=SessionState.DATA_COLLECT)
    pending = baker.make(
        Message, session=session, direction=Direction.INBOUND, processed_at=None, content="oi"
    )

    receive("echo")

    session.refresh_from_db()
    assert (session.state, session.handoff_reason, session.handed_off_at is not None) == (
        SessionState.HUMAN,
        HandoffReason.STAFF_TAKEOVER,
        True,
    )
    echo = session.messages.get(wa_message_id="wamid.ECHO01")
    assert (echo.direction, echo.content, echo.delivery_status, echo.wa_timestamp) == (
        Direction.OUTBOUND,
        "Oi Maria, aqui é a Ana da equipe. Vou cuidar do seu pedido.",
        "sent",
        T,
    )
    event = session.messages.get(direction=Direction.SYSTEM)
    assert (event.message_type, event.action, event.content) == (
        "handoff",
        "staff_takeover",
        STAFF_TAKEOVER_TEXT,
    )
    pending.refresh_from_db()
    assert pending.processed_at is not None
    assert (receive.turns.calls, receive.sends.calls) == ([], [])


def test_an_echo_in_a_session_already_with_a_human_adds_no_second_handoff(instance, receive):
    session = make_session(instance, state=SessionState.HUMAN, handoff_reason="qualified_lead")

    receive("echo")

    session.refresh_from_db()
    assert session.handoff_reason == "qualified_lead"
    assert session.messages.filter(direction=Direction.SYSTEM).count() == 0


def test_a_text_and_an_echo_in_one_delivery_enqueue_no_turn(instance, receive):
    make_session(instance)
    document = load_fixture("text")
    echo = load_fixture("echo")["entry"][0]["changes"][0]
    echo["value"]["message_echoes"][0]["timestamp"] = "1764500001"
    document["entry"][0]["changes"].append(echo)

    receive(encode(document))

    assert receive.turns.calls == []


def outbound(instance: Instance, **fields) -> Message:
    session = make_session(instance)
    return baker.make(
        Message,
        session=session,
        direction=Direction.OUTBOUND,
        wa_message_id="wamid.OUT01",
        **fields,
    )


@pytest.mark.parametrize(
    ("before", "fixture", "after"),
    [
        ("sent", "status_delivered", "delivered"),
        ("delivered", "status_read", "read"),
        ("read", "status_delivered", "read"),  # never backwards
        ("read", "status_sent", "read"),
        ("sent", "status_played", "played"),
        ("pending", "status_sent", "sent"),
        ("delivered", "status_failed", "delivered"),  # it reached the phone: not failed
    ],
)
def test_statuses_only_move_forward(instance, receive, before, fixture, after):
    message = outbound(instance, delivery_status=before)

    delivery = receive(fixture)

    message.refresh_from_db()
    assert message.delivery_status == after
    assert delivery.statuses_count == 1
    assert DeliveryStatusEvent.objects.get().message_id == message.pk


def test_a_failed_status_stores_meta_s_code_and_title(instance, receive):
    message = outbound(instance, delivery_status="sent")

    receive("status_failed")

    message.refresh_from_db()
    assert (
        message.delivery_status,
        message.delivery_error_code,
        message.delivery_error_title,
        message.delivery_status_at,
    ) == ("failed", 131047, "Re-engagement message", T + timedelta(seconds=5))
    event = DeliveryStatusEvent.objects.get()
    assert (event.status, event.error_code, event.error_details) == (
        "failed",
        131047,
        "Message failed to send because more than 24 hours have passed since the customer "
        "last replied to this number.",
    )


def test_a_repeated_status_is_stored_once(instance, receive):
    outbound(instance, delivery_status="sent")

    receive("status_read")
    second = receive("status_read")

    assert DeliveryStatusEvent.objects.count() == 1
    assert (second.statuses_count, second.times_received) == (1, 2)


def test_a_status_for_an_unknown_wamid_is_kept_unlinked(instance, receive, caplog):
    receive("status_read")

    event = DeliveryStatusEvent.objects.get()
    assert (event.wa_message_id, event.status, event.message_id) == ("wamid.OUT01", "read", None)
    assert "whatsapp_status_unknown_message" in caplog.messages


# --- failures --------------------------------------------------------------------------------


def test_an_unreadable_status_is_reported_with_its_reason_and_the_rest_of_the_batch_applied(
    instance, receive
):
    # Issue 11 §5: each item is read on its own; before, the whole delivery was refused.
    document = load_fixture("batch")
    document["entry"][1]["changes"][0]["value"]["statuses"][1]["timestamp"] = "soon"
    raw = encode(document)

    delivery = receive(raw)

    assert (delivery.outcome, bytes(delivery.raw_body), delivery.messages_count) == (
        "processed",
        raw,
        3,
    )
    assert delivery.error == (
        "entry[1].changes[messages].value.statuses[1]: timestamp: expected a Unix timestamp"
    )
    assert (Session.objects.count(), Message.objects.count()) == (2, 3)


def test_a_payload_nothing_of_which_can_be_read_keeps_the_raw_body_marks_it_failed(
    instance, receive
):
    document = load_fixture("text")
    document["entry"][0]["changes"][0]["value"]["metadata"] = "lost"
    raw = encode(document)

    delivery = receive(raw)

    assert (delivery.outcome, bytes(delivery.raw_body), delivery.messages_count) == (
        "failed",
        raw,
        0,
    )
    assert delivery.error == (
        "entry[0].changes[messages].value: metadata: expected an object, got str"
    )
    assert (Session.objects.count(), Message.objects.count()) == (0, 0)
    assert (receive.turns.calls, receive.callbacks) == ([], [])


def test_an_unexpected_error_while_applying_rolls_back_every_event_but_keeps_the_body(
    instance, receive, monkeypatch
):
    # A bug cannot be produced with real data, so one step is made to fail after others wrote.
    def broken(statuses, *, now):
        raise RuntimeError("boom")

    monkeypatch.setattr(events, "statuses_apply", broken)

    delivery = receive("batch")

    assert (delivery.outcome, delivery.error) == ("failed", "RuntimeError: boom")
    assert bytes(delivery.raw_body) == fixture_bytes("batch")
    assert (Session.objects.count(), Message.objects.count()) == (0, 0)
    assert (receive.turns.calls, receive.callbacks) == ([], [])


def test_the_stored_error_of_a_failed_delivery_is_redacted(instance, receive, monkeypatch):
    def broken(statuses, *, now):
        raise RuntimeError('duplicate key: Key (customer_phone)=(5511987654321) for "a@b.com"')

    monkeypatch.setattr(events, "statuses_apply", broken)

    delivery = receive("batch")

    assert delivery.error == (
        'RuntimeError: duplicate key: Key (customer_phone)=([phone]) for "[email]"'
    )


@pytest.mark.parametrize("raw", [b"not json", b'{"entry": [', b"\xff"])
def test_a_body_that_is_not_json_is_refused_and_nothing_is_stored(instance, raw):
    with pytest.raises(MalformedBodyError):
        webhook_delivery_receive(
            raw_body=raw, headers={}, enqueue_turn=Recorder(), enqueue_send=Recorder()
        )

    assert WebhookDelivery.objects.count() == 0


def test_a_failed_delivery_is_applied_again_by_reprocessing(
    instance, receive, monkeypatch, django_capture_on_commit_callbacks
):
    monkeypatch.setattr(events.Outbox, "enqueue_after_commit", lambda self: 1 / 0)
    failed = receive("text")
    monkeypatch.undo()
    turns = Recorder()

    with django_capture_on_commit_callbacks(execute=True):
        receipt = webhook_delivery_reprocess(
            delivery_id=failed.pk, enqueue_turn=turns, enqueue_send=Recorder()
        )

    failed.refresh_from_db()
    assert (receipt.outcome, failed.outcome, failed.error, failed.messages_count) == (
        "processed",
        "processed",
        "",
        1,
    )
    assert turns.calls == [Session.objects.get().pk]
    assert WebhookDelivery.objects.count() == 1


def test_reprocessing_a_delivery_that_did_not_fail_does_nothing(instance, receive):
    processed = receive("text")

    assert (
        webhook_delivery_reprocess(
            delivery_id=processed.pk, enqueue_turn=Recorder(), enqueue_send=Recorder()
        )
        is None
    )
    assert Message.objects.count() == 1
    assert WebhookDelivery.objects.get().outcome == WebhookOutcome.PROCESSED


def test_a_lock_conflict_is_retried_once_inside_the_same_transaction(
    instance, receive, monkeypatch
):
    real = events.Outbox.enqueue_after_commit
    calls = []

    def deadlock_once(self):
        calls.append(1)
        if len(calls) == 1:
            raise OperationalError("deadlock detected")
        real(self)

    monkeypatch.setattr(events.Outbox, "enqueue_after_commit", deadlock_once)

    delivery = receive("text")

    assert (delivery.outcome, delivery.messages_count, len(calls)) == ("processed", 1, 2)
    assert Message.objects.count() == 1
    assert receive.turns.calls == [Session.objects.get().pk]


def test_a_lock_conflict_that_persists_marks_the_delivery_failed(instance, receive, monkeypatch):
    def deadlock(self):
        raise OperationalError("deadlock detected")

    monkeypatch.setattr(events.Outbox, "enqueue_after_commit", deadlock)

    delivery = receive("text")

    assert (delivery.outcome, delivery.error) == ("failed", "OperationalError: deadlock detected")
    assert (Message.objects.count(), Session.objects.count()) == (0, 0)


def test_every_kind_of_message_has_its_handler():
    assert set(events.MESSAGE_HANDLERS) == set(InboundKind)
