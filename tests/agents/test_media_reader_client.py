"""OpenAIClient as the media reader against the fake OpenAI server: a voice note transcribed
(``audio.transcriptions.create``, multipart) and an image described (Responses, ``input_image``)
by the real SDK, with the client's retry policy."""

import base64

import pytest

from agents.llm import LLMCallResult, LLMProviderError, LLMTimeoutError, OpenAIClient
from tests.fakes.openai_server import FakeOpenAIServer, Transcription

OGG = b"OggS\x00\x02" + b"v" * 64
PNG = b"\x89PNG\r\n\x1a\n" + b"p" * 32
# The read timeout of the test that makes one time out; the others wait long enough for the
# fake's answer on a loaded CI machine.
TIMEOUT = 0.3
ANSWER_TIMEOUT = 5.0


def make_client(
    fake: FakeOpenAIServer, *, retry_max: int = 1, timeout: float = ANSWER_TIMEOUT
) -> OpenAIClient:
    return OpenAIClient(
        api_key="sk-test", base_url=fake.base_url, timeout=timeout, retry_max=retry_max
    )


def transcribe(client: OpenAIClient) -> LLMCallResult:
    return client.transcribe(
        model="gpt-4o-mini-transcribe",
        audio=OGG,
        filename="audio.ogg",
        mime_type="audio/ogg",
        language="pt",
    )


def test_a_transcription_uploads_the_audio_with_the_model_and_the_language(
    fake_openai: FakeOpenAIServer,
) -> None:
    fake_openai.queue_transcript(
        " Quero analisar a água do poço. ", input_tokens=42, output_tokens=9
    )

    result = transcribe(make_client(fake_openai))

    assert fake_openai.transcriptions == [
        Transcription(
            model="gpt-4o-mini-transcribe",
            language="pt",
            response_format="json",
            filename="audio.ogg",
            content_type="audio/ogg",
            content=OGG,
        )
    ]
    assert (
        result.raw_response,
        result.model,
        result.tokens_input,
        result.tokens_output,
        result.tokens_cached,
    ) == (
        "Quero analisar a água do poço.",
        "gpt-4o-mini-transcribe",
        42,
        9,
        # The transcription usage has no cached count.
        0,
    )
    assert result.attempts == 1
    assert fake_openai.requests == []  # nothing went to /responses


def test_a_transcript_without_usage_counts_no_tokens(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.queue_transcript("Oi")

    result = transcribe(make_client(fake_openai))

    assert (result.raw_response, result.tokens_input, result.tokens_output) == ("Oi", 0, 0)


def test_a_server_error_is_retried_once_then_the_transcript_comes(
    fake_openai: FakeOpenAIServer,
) -> None:
    fake_openai.queue_transcript_error(500)
    fake_openai.queue_transcript("Bom dia")

    result = transcribe(make_client(fake_openai))

    assert (result.raw_response, result.attempts, len(fake_openai.transcriptions)) == (
        "Bom dia",
        2,
        2,
    )


def test_a_slow_transcription_times_out_after_its_attempts(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.queue_transcript("tarde", delay=TIMEOUT * 3)
    fake_openai.queue_transcript("tarde", delay=TIMEOUT * 3)

    with pytest.raises(LLMTimeoutError) as raised:
        transcribe(make_client(fake_openai, timeout=TIMEOUT))

    assert raised.value.attempts == 2


def test_an_empty_transcript_is_a_provider_error(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.queue_transcript("   ")

    with pytest.raises(LLMProviderError, match="empty transcript"):
        transcribe(make_client(fake_openai))


def test_a_refused_transcription_is_not_retried(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.queue_transcript_error(400)

    with pytest.raises(LLMProviderError, match="HTTP 400"):
        transcribe(make_client(fake_openai))

    assert len(fake_openai.transcriptions) == 1


def test_an_image_is_described_through_the_responses_api_as_an_input_image(
    fake_openai: FakeOpenAIServer,
) -> None:
    fake_openai.queue_text(
        "Foto de um frasco com a etiqueta Poço 2.",
        input_tokens=1300,
        cached_tokens=1152,
        output_tokens=12,
    )

    result = make_client(fake_openai).describe(
        model="gpt-4o-mini", image=PNG, mime_type="image/png", instructions="Descreva."
    )

    assert fake_openai.requests == [
        {
            "model": "gpt-4o-mini",
            "store": False,
            "instructions": "Descreva.",
            "input": [
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "input_image",
                            "image_url": "data:image/png;base64," + base64.b64encode(PNG).decode(),
                        }
                    ],
                }
            ],
        }
    ]
    assert (
        result.raw_response,
        result.tokens_input,
        result.tokens_cached,
        result.tokens_output,
    ) == ("Foto de um frasco com a etiqueta Poço 2.", 1300, 1152, 12)
