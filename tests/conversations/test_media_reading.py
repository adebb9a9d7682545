"""The bot reads a customer's media (conversations.media_reading): through the real webhook, the
download task, the fake Graph API (metadata and bytes), the fake OpenAI server (the
transcription endpoint, ``input_image``) and the turn, in the embedded default's eager mode.

A voice note's transcript reaches the agent and the reply comes back; a photo reads as its
marker; a turn waits for its media's reading; a failed transcription, a wrong SHA-256, an
oversized file and an expired media each end in their documented outcome, with nothing lost.
"""

import base64
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone
from pytest_django import DjangoCaptureOnCommitCallbacks, Settings

from conversations import media_tasks
from conversations.models import (
    Direction,
    Instance,
    LLMCall,
    MediaStatus,
    Message,
    MessageMedia,
    ReadingStatus,
    Session,
)
from conversations.turns.tasks import process_session
from prompts_admin.models import RuntimeConfig
from tests.fakes.graph_server import FakeGraphAPI
from tests.fakes.openai_server import FakeOpenAIServer
from tests.helpers.meta_payloads import APP_SECRET, encode, load_fixture, signed_post
from tests.helpers.model_requests import history_of

pytestmark = pytest.mark.django_db

# The real publisher (tests/conftest.py replaces it with a recorder for every test).
ENQUEUE_MEDIA_DOWNLOAD = media_tasks.enqueue_media_download
OGG = b"OggS\x00\x02" + b"v" * 200
JPEG = b"\xff\xd8\xff\xe0" + b"j" * 200
TRANSCRIPT = "Oi, quero fazer a análise da água do meu poço."
HANDOFF_TEXT = "Um atendente vai continuar por aqui."
SUMMARY = '{"motivo_encerramento":"mídia","resumo_texto":"Cliente enviou mídia."}'


@pytest.fixture(autouse=True)
def reading(
    monkeypatch: pytest.MonkeyPatch,
    settings: Settings,
    tmp_path: Path,
    openai_settings: FakeOpenAIServer,
    fake_graph: FakeGraphAPI,
) -> None:
    monkeypatch.setattr(media_tasks, "enqueue_media_download", ENQUEUE_MEDIA_DOWNLOAD)
    settings.MEDIA_ROOT = str(tmp_path)
    settings.WHATSAPP_APP_SECRET = APP_SECRET
    settings.TRANSCRIBE_AUDIO = True
    settings.DESCRIBE_IMAGES = False
    # The same text in and out of business hours: the tests do not depend on the clock.
    config = RuntimeConfig.load()
    config.handoff_message_open = config.handoff_message_closed = HANDOFF_TEXT
    config.save()


def media_body(
    fake_graph: FakeGraphAPI,
    kind: str,
    content: bytes,
    mime_type: str,
    *,
    announced: str | None = None,
    caption: str | None = None,
    wamid: str = "",
) -> dict[str, Any]:
    """The fixture of `kind`, its media served by the fake Graph API with a matching hash (or
    the `announced` one); `caption` replaces the fixture's ("" removes it)."""
    document = load_fixture(kind)
    message = document["entry"][0]["changes"][0]["value"]["messages"][0]
    body = message[kind]
    digest = fake_graph.set_media(body["id"], content, mime_type)
    body["sha256"] = announced or digest
    body["mime_type"] = mime_type
    if caption == "":
        body.pop("caption", None)
    elif caption is not None:
        body["caption"] = caption
    if wamid:
        message["id"] = wamid
    return document


def post(client: Client, document: dict[str, Any], capture: Any) -> None:
    with capture(execute=True):
        assert signed_post(client, encode(document)).status_code == 200


def agent_inputs(fake_openai: FakeOpenAIServer) -> list[list[dict[str, str]]]:
    return [history_of(request) for request in fake_openai.requests if "instructions" in request]


def sent_texts(fake_graph: FakeGraphAPI) -> list[str]:
    return [send.json["text"]["body"] for send in fake_graph.sends if send.json["type"] == "text"]


def test_a_voice_note_s_transcript_reaches_the_agent_and_its_reply_comes_back(
    client: Client,
    instance: Instance,
    fake_graph: FakeGraphAPI,
    openai_settings: FakeOpenAIServer,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    openai_settings.queue_transcript(TRANSCRIPT, input_tokens=120, output_tokens=14)
    openai_settings.queue_text('{"s":1}Claro! Para qual finalidade é a análise?')

    post(
        client,
        media_body(fake_graph, "audio", OGG, "audio/ogg; codecs=opus"),
        django_capture_on_commit_callbacks,
    )

    [transcription] = openai_settings.transcriptions
    assert (transcription.model, transcription.language, transcription.filename) == (
        "gpt-4o-mini-transcribe",
        "pt",
        "audio.ogg",
    )
    assert transcription.content == OGG
    assert agent_inputs(openai_settings) == [[{"role": "user", "content": TRANSCRIPT}]]
    assert sent_texts(fake_graph) == ["Claro! Para qual finalidade é a análise?"]
    media = MessageMedia.objects.get()
    assert (media.status, media.reading_status, media.transcript) == (
        MediaStatus.DOWNLOADED,
        ReadingStatus.DONE,
        TRANSCRIPT,
    )
    assert media.message.processed_at is not None
    assert media.message.content == ""  # the customer typed nothing: the transcript is the media's
    calls = LLMCall.objects.order_by("id")
    assert [
        (c.agent, c.purpose, c.model, c.tokens_input, c.tokens_output, c.outcome, c.message_id)
        for c in calls
    ] == [
        ("media", "transcription", "gpt-4o-mini-transcribe", 120, 14, "ok", media.message_id),
        ("triagem", "agent", "gpt-4o-mini", 10, 5, "ok", media.message_id),
    ]
    assert calls[0].raw_response == ""  # the transcript is kept (and erased) with the media


def test_a_transcription_that_fails_twice_hands_off_with_its_reason_and_loses_nothing(
    client: Client,
    instance: Instance,
    fake_graph: FakeGraphAPI,
    openai_settings: FakeOpenAIServer,
    settings: Settings,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    settings.LLM_RETRY_MAX = 0
    openai_settings.queue_transcript_error(500)
    openai_settings.queue_transcript_error(500)
    openai_settings.queue_text(SUMMARY)

    post(
        client,
        media_body(fake_graph, "audio", OGG, "audio/ogg; codecs=opus"),
        django_capture_on_commit_callbacks,
    )

    session = Session.objects.get()
    assert (session.state, session.handoff_reason) == ("HUMAN", "transcription_failed")
    assert sent_texts(fake_graph) == [HANDOFF_TEXT]
    [summary_request] = agent_inputs(openai_settings)  # no agent answered blind
    assert '"motivo_handoff": "transcription_failed"' in summary_request[0]["content"]
    assert "cliente: [áudio]" in summary_request[0]["content"]
    media = MessageMedia.objects.get()
    # The audio itself is kept for staff to hear.
    assert (media.status, media.reading_status, media.transcript, bool(media.file)) == (
        MediaStatus.DOWNLOADED,
        ReadingStatus.FAILED,
        "",
        True,
    )
    assert media.message.processed_at is not None
    assert list(LLMCall.objects.order_by("id").values_list("purpose", "outcome")) == [
        ("transcription", "provider_error"),
        ("transcription", "provider_error"),
        ("summary", "ok"),
    ]


def test_a_photo_alone_goes_to_a_human_as_media_without_any_model_call(
    client: Client,
    instance: Instance,
    fake_graph: FakeGraphAPI,
    openai_settings: FakeOpenAIServer,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    openai_settings.queue_text(SUMMARY)

    post(
        client,
        media_body(fake_graph, "image", JPEG, "image/jpeg", caption=""),
        django_capture_on_commit_callbacks,
    )

    session = Session.objects.get()
    assert (session.state, session.handoff_reason) == ("HUMAN", "media")
    assert sent_texts(fake_graph) == [HANDOFF_TEXT]  # not the media text, not in a loop
    assert list(LLMCall.objects.values_list("purpose", flat=True)) == ["summary"]
    assert MessageMedia.objects.get().status == MediaStatus.DOWNLOADED


def test_a_photo_with_a_caption_reads_as_its_marker_in_the_agent_s_history(
    client: Client,
    instance: Instance,
    fake_graph: FakeGraphAPI,
    openai_settings: FakeOpenAIServer,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    openai_settings.queue_text('{"s":1}Recebi a foto do rótulo. Qual análise você precisa?')

    post(
        client,
        media_body(fake_graph, "image", JPEG, "image/jpeg", caption="rótulo da amostra"),
        django_capture_on_commit_callbacks,
    )

    assert agent_inputs(openai_settings) == [
        [{"role": "user", "content": "[imagem] legenda: rótulo da amostra"}]
    ]
    assert sent_texts(fake_graph) == ["Recebi a foto do rótulo. Qual análise você precisa?"]


def test_a_described_image_brings_its_description_into_the_marker(
    client: Client,
    instance: Instance,
    fake_graph: FakeGraphAPI,
    openai_settings: FakeOpenAIServer,
    settings: Settings,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    settings.DESCRIBE_IMAGES = True
    openai_settings.queue_text(
        "Frasco de vidro com a etiqueta Poço 2.", input_tokens=900, output_tokens=11
    )
    openai_settings.queue_text('{"s":1}Vi o frasco do poço 2. É para consumo humano?')

    post(
        client,
        media_body(fake_graph, "image", JPEG, "image/jpeg"),
        django_capture_on_commit_callbacks,
    )

    describe, agent = openai_settings.requests
    assert history_of(describe) == [
        {
            "role": "user",
            "content": [
                {
                    "type": "input_image",
                    "image_url": "data:image/jpeg;base64," + base64.b64encode(JPEG).decode(),
                }
            ],
        }
    ]
    assert describe["model"] == "gpt-4o-mini"
    assert history_of(agent) == [
        {
            "role": "user",
            "content": "[imagem: Frasco de vidro com a etiqueta Poço 2.] legenda: Foto do laudo",
        }
    ]
    assert list(LLMCall.objects.order_by("id").values_list("agent", "purpose", "tokens_input")) == [
        ("media", "description", 900),
        ("triagem", "agent", 10),
    ]
    assert MessageMedia.objects.get().description == "Frasco de vidro com a etiqueta Poço 2."


@pytest.mark.parametrize(
    ("served", "announced", "status"),
    [
        pytest.param(OGG, "bm90IHRoZSBoYXNo", MediaStatus.FAILED, id="wrong sha256"),
        pytest.param(b"x" * 1025, None, MediaStatus.TOO_LARGE, id="oversized"),
    ],
)
def test_a_voice_note_that_cannot_be_downloaded_hands_off_as_not_transcribed(
    client: Client,
    instance: Instance,
    fake_graph: FakeGraphAPI,
    openai_settings: FakeOpenAIServer,
    settings: Settings,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
    served: bytes,
    announced: str | None,
    status: str,
) -> None:
    settings.WHATSAPP_MEDIA_MAX_BYTES_AUDIO = 1024
    openai_settings.queue_text(SUMMARY)

    post(
        client,
        media_body(fake_graph, "audio", served, "audio/ogg", announced=announced),
        django_capture_on_commit_callbacks,
    )

    media = MessageMedia.objects.get()
    assert (media.status, media.reading_status, bool(media.file)) == (status, "failed", False)
    assert openai_settings.transcriptions == []
    session = Session.objects.get()
    assert (session.state, session.handoff_reason) == ("HUMAN", "transcription_failed")
    assert sent_texts(fake_graph) == [HANDOFF_TEXT]
    assert Message.objects.filter(direction=Direction.INBOUND).count() == 1  # nothing lost


def test_an_expired_media_id_hands_the_voice_note_off(
    client: Client,
    instance: Instance,
    fake_graph: FakeGraphAPI,
    openai_settings: FakeOpenAIServer,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    document = media_body(fake_graph, "audio", OGG, "audio/ogg")
    fake_graph.respond_error(404, 100, "Unsupported get request. Object does not exist")
    openai_settings.queue_text(SUMMARY)

    post(client, document, django_capture_on_commit_callbacks)

    media = MessageMedia.objects.get()
    assert (media.status, media.reading_status) == (MediaStatus.EXPIRED, "failed")
    assert Session.objects.get().handoff_reason == "transcription_failed"


# --- the turn waits for its media's reading ---------------------------------------------------


def test_a_text_that_arrives_while_the_voice_note_is_read_waits_and_is_answered_with_it(
    instance: Instance, openai_settings: FakeOpenAIServer, fake_graph: FakeGraphAPI
) -> None:
    session = Session.objects.create(instance=instance, customer_phone="5511987654321")
    audio = Message.objects.create(
        session=session, direction="INBOUND", message_type="audio", wa_message_id="wamid.A1"
    )
    media = MessageMedia.objects.create(
        message=audio, kind="audio", reading_status=ReadingStatus.PENDING
    )
    Message.objects.create(
        session=session, direction="INBOUND", content="é urgente", wa_message_id="wamid.T1"
    )

    assert process_session.delay(session.pk).get() == "awaiting_media"
    assert openai_settings.requests == []

    media.transcript, media.reading_status = TRANSCRIPT, ReadingStatus.DONE
    media.save()
    openai_settings.queue_text('{"s":1}Entendi! Vamos agilizar. Qual a finalidade?')

    assert process_session.delay(session.pk).get() == "drained"
    assert agent_inputs(openai_settings) == [
        [{"role": "user", "content": TRANSCRIPT}, {"role": "user", "content": "é urgente"}]
    ]


@pytest.mark.parametrize(
    ("age", "outcome"),
    [
        pytest.param(
            timedelta(minutes=6) - timedelta(seconds=1), "awaiting_media", id="1 s before"
        ),
        pytest.param(timedelta(minutes=6), "drained", id="at 6 min"),
        pytest.param(timedelta(minutes=6, seconds=1), "drained", id="1 s after"),
    ],
)
def test_a_reading_lost_for_six_minutes_is_not_waited_for(
    instance: Instance, openai_settings: FakeOpenAIServer, age: timedelta, outcome: str
) -> None:
    session = Session.objects.create(instance=instance, customer_phone="5511987654321")
    audio = Message.objects.create(
        session=session,
        direction="INBOUND",
        message_type="audio",
        wa_message_id="wamid.A1",
        created_at=timezone.now() - age,
    )
    MessageMedia.objects.create(message=audio, kind="audio", reading_status=ReadingStatus.PENDING)
    if outcome == "drained":
        openai_settings.queue_text(SUMMARY)

    assert process_session.delay(session.pk).get() == outcome

    session.refresh_from_db()
    expected = "transcription_failed" if outcome == "drained" else ""
    assert session.handoff_reason == expected
