"""Applying a payload's messages (conversations.inbound.events): one handler per kind — text,
media, log-only, identity changes — and staff echoes."""

import pytest
from model_bakery import baker
from pytest_django import Settings

from agents.states import HandoffReason, SessionState
from conversations.event_codes import ACTION_UNSUPPORTED_MEDIA
from conversations.inbound import events
from conversations.labels import event_text
from conversations.models import (
    Direction,
    Instance,
    Message,
    Session,
    WebhookDelivery,
)
from prompts_admin.models import DEFAULT_UNSUPPORTED_MEDIA_MESSAGE, RuntimeConfig
from tests import baker_recipes as recipes
from tests.helpers.inbound import HEADERS, Receiver, T, make_session, messages
from tests.helpers.meta_payloads import (
    CUSTOMER_PHONE,
    CUSTOMER_USER_ID,
    Recorder,
    encode,
    fixture_bytes,
    load_fixture,
)
from whatsapp.payload import InboundKind

pytestmark = pytest.mark.django_db


# --- text messages ---------------------------------------------------------------------------


def test_a_text_from_a_new_customer_opens_a_session_and_enqueues_its_turn_after_commit(
    instance: Instance, receive: Receiver
) -> None:
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
    ("fixture", "message_type", "content", "interactive", "reply_to"),
    [
        (
            "interactive_button_reply",
            "interactive",
            "Sim, confirmo",
            {"type": "button_reply", "id": "sim", "title": "Sim, confirmo"},
            "wamid.OUT01",
        ),
        (
            "interactive_list_reply",
            "interactive",
            "Análise de água",
            {"type": "list_reply", "id": "agua", "title": "Análise de água"},
            "wamid.OUT02",
        ),
        ("button", "button", "Quero um orçamento", None, "wamid.TPL01"),
    ],
)
def test_interactive_replies_and_template_buttons_become_pending_text(
    instance: Instance,
    receive: Receiver,
    fixture: str,
    message_type: str,
    content: str,
    interactive: dict[str, str] | None,
    reply_to: str,
) -> None:
    receive(fixture)

    session = Session.objects.get()
    [message] = messages(session, Direction.INBOUND)
    assert (
        message.message_type,
        message.content,
        message.processed_at,
        message.interactive,
        message.reply_to_wamid,
    ) == (message_type, content, None, interactive, reply_to)
    assert receive.turns.calls == [session.pk]


def test_a_customer_known_only_by_user_id_gets_a_session_without_phone(
    instance: Instance, receive: Receiver
) -> None:
    receive("bsuid_only")

    session = Session.objects.get()
    assert (session.customer_phone, session.customer_user_id, session.customer_name) == (
        "",
        "BR.5555555555555555",
        "Cliente Anônima",
    )
    assert receive.turns.calls == [session.pk]


def test_a_batch_stores_every_message_in_its_customer_s_session_and_enqueues_each_turn_once(
    instance: Instance, receive: Receiver
) -> None:
    existing = make_session(instance)
    out1, out2 = (
        recipes.reply.make(session=existing, content="", delivery_status="", wa_message_id=wamid)
        for wamid in ("wamid.OUT01", "wamid.OUT02")
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


def test_a_repeated_delivery_stores_nothing_twice_and_enqueues_no_second_turn(
    instance: Instance, receive: Receiver
) -> None:
    first = receive("text")
    second = receive("text")

    assert Message.objects.count() == 1
    assert receive.turns.calls == [Session.objects.get().pk]
    # The identical body is stored once and counted; the first pass's outcome stays.
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
def test_media_in_a_bot_state_is_pending_for_a_turn_like_text(
    instance: Instance, receive: Receiver, settings: Settings, fixture: str, content: str
) -> None:
    settings.TRANSCRIBE_AUDIO = True
    settings.DESCRIBE_IMAGES = False
    receive(fixture)

    session = Session.objects.get()
    [inbound_message] = messages(session, Direction.INBOUND)
    assert (inbound_message.message_type, inbound_message.content) == (fixture, content)
    assert inbound_message.processed_at is None  # the agents read it in the next turn
    assert messages(session, Direction.OUTBOUND) == []
    assert receive.sends.calls == []
    # A voice note's turn waits for its transcription, whose end enqueues it.
    assert receive.turns.calls == ([] if fixture == "audio" else [session.pk])


def test_an_audio_nothing_transcribes_is_answered_with_the_fixed_text_without_a_turn(
    instance: Instance, receive: Receiver, settings: Settings
) -> None:
    settings.TRANSCRIBE_AUDIO = False
    receive("audio")

    session = Session.objects.get()
    [inbound_message] = messages(session, Direction.INBOUND)
    [reply] = messages(session, Direction.OUTBOUND)
    assert (inbound_message.message_type, inbound_message.content) == ("audio", "")
    assert inbound_message.processed_at is not None  # consumed: no turn will take it
    assert (reply.content, reply.action, reply.delivery_status, reply.wa_message_id) == (
        DEFAULT_UNSUPPORTED_MEDIA_MESSAGE,
        ACTION_UNSUPPORTED_MEDIA,
        "pending",
        None,
    )
    assert receive.sends.calls == [reply.pk]
    assert receive.turns.calls == []
    assert inbound_message.media.reading_status == ""


def test_the_media_text_comes_from_runtime_config(
    instance: Instance, receive: Receiver, settings: Settings
) -> None:
    settings.TRANSCRIBE_AUDIO = False
    config = RuntimeConfig.load()
    config.unsupported_media_message = "Só leio texto por aqui."
    config.save()

    receive("audio")

    assert messages(Session.objects.get(), Direction.OUTBOUND)[0].content == (
        "Só leio texto por aqui."
    )


def test_several_untranscribed_audios_in_one_delivery_get_a_single_answer(
    instance: Instance, receive: Receiver, settings: Settings
) -> None:
    settings.TRANSCRIBE_AUDIO = False
    document = load_fixture("audio")
    first = document["entry"][0]["changes"][0]["value"]["messages"][0]
    document["entry"][0]["changes"][0]["value"]["messages"].append(first | {"id": "wamid.AUD2"})

    receive(encode(document))

    session = Session.objects.get()
    assert len(messages(session, Direction.INBOUND)) == 2
    assert len(messages(session, Direction.OUTBOUND)) == 1


@pytest.mark.parametrize(
    ("fixture", "transcribe", "describe", "reading", "turns"),
    [
        ("audio", True, False, "pending", False),
        ("image", False, True, "pending", False),
        ("image", True, False, "", True),
        ("video", True, True, "", True),
        ("document", True, True, "", True),
    ],
)
def test_a_media_the_bot_reads_first_enqueues_its_download_and_no_turn(
    instance: Instance,
    receive: Receiver,
    settings: Settings,
    media_downloads: Recorder,
    fixture: str,
    transcribe: bool,
    describe: bool,
    reading: str,
    turns: bool,
) -> None:
    settings.TRANSCRIBE_AUDIO = transcribe
    settings.DESCRIBE_IMAGES = describe

    receive(fixture)

    session = Session.objects.get()
    [inbound_message] = messages(session, Direction.INBOUND)
    assert inbound_message.media.reading_status == reading
    assert media_downloads.calls == [inbound_message.media.pk]
    assert receive.turns.calls == ([session.pk] if turns else [])


@pytest.mark.parametrize(
    ("fixture", "content"), [("reaction", "\U0001f44d"), ("unsupported", "poll_creation")]
)
def test_reactions_and_unsupported_messages_are_only_logged(
    instance: Instance, receive: Receiver, fixture: str, content: str
) -> None:
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
def test_in_a_human_session_messages_are_logged_and_nothing_is_sent(
    instance: Instance, receive: Receiver, fixture: str
) -> None:
    session = make_session(instance, state=SessionState.HUMAN)

    receive(fixture)

    [message] = session.messages.all()
    assert (message.direction, message.processed_at is not None) == (Direction.INBOUND, True)
    assert (receive.turns.calls, receive.sends.calls) == ([], [])


# --- identity, echoes, statuses --------------------------------------------------------------


def test_a_number_change_updates_the_open_session_and_is_logged_as_a_system_event(
    instance: Instance, receive: Receiver
) -> None:
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
    instance: Instance, receive: Receiver
) -> None:
    session = make_session(instance, customer_phone="")

    receive("system_user_changed_user_id")

    session.refresh_from_db()
    assert session.customer_user_id == "BR.8888888888888888"


def test_an_identity_change_for_a_customer_without_open_session_writes_nothing(
    instance: Instance, receive: Receiver
) -> None:
    delivery = receive("system_user_changed_number")

    assert (Session.objects.count(), Message.objects.count()) == (0, 0)
    assert delivery.outcome == "processed"


def test_a_staff_echo_is_a_staff_message_and_silences_the_bot(
    instance: Instance, receive: Receiver
) -> None:
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
    assert (event.message_type, event.action, event.content) == ("handoff", "staff_takeover", "")
    assert event_text(event) == "Atendimento assumido pela equipe pelo app WhatsApp Business."
    pending.refresh_from_db()
    assert pending.processed_at is not None
    assert (receive.turns.calls, receive.sends.calls) == ([], [])


def test_an_echo_in_a_session_already_with_a_human_adds_no_second_handoff(
    instance: Instance, receive: Receiver
) -> None:
    session = make_session(instance, state=SessionState.HUMAN, handoff_reason="qualified_lead")

    receive("echo")

    session.refresh_from_db()
    assert session.handoff_reason == "qualified_lead"
    assert session.messages.filter(direction=Direction.SYSTEM).count() == 0


def test_a_text_and_an_echo_in_one_delivery_enqueue_no_turn(
    instance: Instance, receive: Receiver
) -> None:
    make_session(instance)
    document = load_fixture("text")
    echo = load_fixture("echo")["entry"][0]["changes"][0]
    echo["value"]["message_echoes"][0]["timestamp"] = "1764500001"
    document["entry"][0]["changes"].append(echo)

    receive(encode(document))

    assert receive.turns.calls == []


# --- the handler table -----------------------------------------------------------------------


def test_every_kind_of_message_has_its_handler() -> None:
    assert set(events.MESSAGE_HANDLERS) == set(InboundKind)
