"""OpenAIClient against a real fake `/v1/responses` server: the real SDK sends every request."""

import socket
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx2
import pytest

from agents.llm import (
    ChatMessage,
    LLMCallResult,
    LLMError,
    LLMProviderError,
    LLMRateLimitError,
    LLMTimeoutError,
    OpenAIClient,
)
from tests.fakes.openai_server import FakeOpenAIServer

MESSAGES = (
    ChatMessage("user", "Oi, preciso de uma análise de água"),
    ChatMessage("assistant", "Olá! Para qual finalidade?"),
    ChatMessage("user", "Potabilidade"),
)
# Short enough to keep the suite fast, long enough for a loopback answer on a busy CI box.
# The read timeout of the tests that make one time out; the others wait long enough for the
# fake's answer on a loaded CI machine.
TIMEOUT = 0.3
ANSWER_TIMEOUT = 5.0


def make_client(
    fake: FakeOpenAIServer, *, retry_max: int = 1, timeout: float = ANSWER_TIMEOUT
) -> OpenAIClient:
    return OpenAIClient(
        api_key="sk-test", base_url=fake.base_url, timeout=timeout, retry_max=retry_max
    )


def call(client: OpenAIClient) -> LLMCallResult:
    return client.chat(
        model="gpt-test-triage", instructions="Você é a Lia.", messages=MESSAGES, purpose="agent"
    )


def test_the_request_body_is_a_responses_create_with_instructions_and_ordered_input(
    fake_openai: FakeOpenAIServer,
) -> None:
    fake_openai.queue_text('{"s":1}Olá!')

    call(make_client(fake_openai))

    assert fake_openai.requests == [
        {
            "model": "gpt-test-triage",
            "instructions": "Você é a Lia.",
            "input": [
                {"role": "user", "content": "Oi, preciso de uma análise de água"},
                {"role": "assistant", "content": "Olá! Para qual finalidade?"},
                {"role": "user", "content": "Potabilidade"},
            ],
            "store": False,
        }
    ]
    assert fake_openai.request_headers[0]["authorization"] == "Bearer sk-test"


def test_text_tokens_model_and_latency_come_from_the_response(
    fake_openai: FakeOpenAIServer,
) -> None:
    fake_openai.queue_text(
        '{"s":1}Olá!',
        model="gpt-test-triage-2026-01-01",
        input_tokens=321,
        output_tokens=12,
        delay=0.05,
    )

    result = call(make_client(fake_openai))

    assert result.raw_response == '{"s":1}Olá!'
    assert result.model == "gpt-test-triage-2026-01-01"
    assert (result.tokens_input, result.tokens_output, result.attempts) == (321, 12, 1)
    assert 50 <= result.latency_ms < 1000


def usage_body(details: Any) -> dict[str, Any]:
    """A completed answer of 2,000 input tokens whose usage has these input token details
    (the key left out when `details` is `OMITTED`)."""
    usage: dict[str, Any] = {"input_tokens": 2000, "output_tokens": 30, "total_tokens": 2030}
    if details is not OMITTED:
        usage["input_tokens_details"] = details
    message = {"type": "output_text", "text": '{"s":1}Olá!', "annotations": []}
    return {
        "id": "resp_1",
        "object": "response",
        "created_at": 1,
        "model": "gpt-test-triage",
        "status": "completed",
        "output": [{"type": "message", "role": "assistant", "content": [message]}],
        "usage": usage,
    }


OMITTED = object()


@pytest.mark.parametrize(
    ("details", "cached"),
    [
        ({"cached_tokens": 1536}, 1536),
        ({"cached_tokens": 0}, 0),
        (OMITTED, 0),
        (None, 0),
        ({}, 0),
        ({"cached_tokens": None}, 0),
        ({"cached_tokens": "1536"}, 0),
        ({"cached_tokens": True}, 0),
        ({"cached_tokens": -1}, 0),
        ({"cached_tokens": 1999}, 1999),
        ({"cached_tokens": 2000}, 2000),
        # More than the input: clamped to it (the answer is kept).
        ({"cached_tokens": 2001}, 2000),
        ("1536", 0),
    ],
)
def test_the_cached_tokens_come_from_the_input_token_details(
    fake_openai: FakeOpenAIServer, details: Any, cached: int
) -> None:
    fake_openai.queue_raw(200, usage_body(details))

    result = call(make_client(fake_openai))

    assert (result.raw_response, result.tokens_input, result.tokens_cached) == (
        '{"s":1}Olá!',
        2000,
        cached,
    )


@pytest.mark.parametrize(
    ("shared_chars", "cached"),
    [
        # Shared prefix ÷ 4 = 1,023 tokens: under OpenAI's 1,024, nothing cached.
        (4095, 0),
        (4096, 1024),
        # 1,151 tokens: floored to the 128-token step.
        (4607, 1024),
        (4608, 1152),
    ],
)
def test_the_fake_counts_the_prefix_a_request_shares_with_an_earlier_one(
    fake_openai: FakeOpenAIServer, shared_chars: int, cached: int
) -> None:
    client = make_client(fake_openai)
    fake_openai.queue_text('{"s":1}Olá!', input_tokens=None)
    fake_openai.queue_text('{"s":1}Olá!', input_tokens=None)
    # Instructions of 5,008 characters differing after the first `shared_chars`, then
    # "\nuser: Oi" (9): prompt texts of 5,017 characters, 1,255 tokens.
    prompts = ["A" * shared_chars + end * (5008 - shared_chars) for end in ("B", "C")]

    first, second = (
        client.chat(
            model="gpt-test-triage",
            instructions=prompt,
            messages=[ChatMessage("user", "Oi")],
            purpose="agent",
        )
        for prompt in prompts
    )

    assert (first.tokens_input, first.tokens_cached) == (1255, 0)
    assert (second.tokens_input, second.tokens_cached) == (1255, cached)


def test_the_fake_caches_nothing_across_models(fake_openai: FakeOpenAIServer) -> None:
    client = make_client(fake_openai)
    for _ in range(2):
        fake_openai.queue_text('{"s":1}Olá!', input_tokens=None)
    results = [
        client.chat(
            model=model,
            instructions="A" * 6000,
            messages=[ChatMessage("user", "Oi")],
            purpose="agent",
        )
        for model in ("gpt-test-triage", "gpt-test-other")
    ]

    # 6,009 characters: 1,503 tokens, none cached for a model never asked before.
    assert [(r.tokens_input, r.tokens_cached) for r in results] == [(1503, 0), (1503, 0)]


@pytest.mark.parametrize("status", [500, 502, 503])
def test_a_5xx_is_retried_once_then_fails_as_provider_error(
    fake_openai: FakeOpenAIServer, status: int
) -> None:
    fake_openai.queue_error(status)
    fake_openai.queue_error(status)

    with pytest.raises(LLMProviderError, match=f"HTTP {status}") as caught:
        call(make_client(fake_openai))

    assert fake_openai.request_count == 2
    assert caught.value.attempts == 2
    assert type(caught.value) is LLMProviderError


def test_a_5xx_then_an_answer_succeeds_on_the_second_attempt(
    fake_openai: FakeOpenAIServer,
) -> None:
    fake_openai.queue_error(500)
    fake_openai.queue_text('{"s":1}Olá!', input_tokens=40, output_tokens=4)

    result = call(make_client(fake_openai))

    assert fake_openai.request_count == 2
    assert (result.raw_response, result.attempts, result.tokens_input) == ('{"s":1}Olá!', 2, 40)
    # Both attempts sent the same body.
    assert fake_openai.requests[0] == fake_openai.requests[1]


def test_a_timeout_is_retried_once_then_raises_llm_timeout_error(
    fake_openai: FakeOpenAIServer,
) -> None:
    fake_openai.queue_timeout(TIMEOUT * 4)
    fake_openai.queue_timeout(TIMEOUT * 4)

    with pytest.raises(LLMTimeoutError) as caught:
        call(make_client(fake_openai, timeout=TIMEOUT))

    assert fake_openai.request_count == 2
    assert caught.value.attempts == 2
    assert caught.value.outcome == "timeout"
    assert caught.value.latency_ms >= 2 * TIMEOUT * 1000


def test_retry_max_zero_makes_exactly_one_request(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.queue_error(503)

    with pytest.raises(LLMProviderError):
        call(make_client(fake_openai, retry_max=0))

    assert fake_openai.request_count == 1


def test_retry_max_two_makes_three_requests(fake_openai: FakeOpenAIServer) -> None:
    for _ in range(3):
        fake_openai.queue_error(500)

    with pytest.raises(LLMProviderError) as caught:
        call(make_client(fake_openai, retry_max=2))

    assert (fake_openai.request_count, caught.value.attempts) == (3, 3)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def test_connection_refused_is_retried_once_then_fails_as_provider_error() -> None:
    # Nothing listens on the port, so the requests are counted where the SDK sends them.
    sent: list[str] = []
    http_client = httpx2.Client(
        event_hooks={"request": [lambda request: sent.append(request.url.path)]}
    )
    client = OpenAIClient(
        api_key="sk-test",
        base_url=f"http://127.0.0.1:{_closed_port()}/v1",
        timeout=TIMEOUT,
        retry_max=1,
        http_client=http_client,
    )

    with pytest.raises(LLMProviderError, match="connection error") as caught:
        call(client)

    assert sent == ["/v1/responses", "/v1/responses"]
    assert caught.value.attempts == 2
    assert caught.value.transient is True  # a provider failure for the circuit breaker


@pytest.mark.parametrize(
    ("status", "code"),
    [
        (400, "invalid_value"),
        (401, "invalid_api_key"),
        (403, None),
        (404, "model_not_found"),
        (422, None),
    ],
)
def test_a_4xx_fails_at_once_as_provider_error(
    fake_openai: FakeOpenAIServer, status: int, code: str | None
) -> None:
    fake_openai.queue_error(status, code=code)
    fake_openai.queue_text('{"s":1}never served')

    with pytest.raises(LLMProviderError, match=f"HTTP {status}") as caught:
        call(make_client(fake_openai))

    assert fake_openai.request_count == 1
    assert caught.value.attempts == 1
    assert fake_openai.pending == 1
    fake_openai.reset()


@pytest.mark.parametrize(
    ("code", "quota_exhausted", "outcome"),
    [
        ("rate_limit_exceeded", False, "rate_limited"),
        (None, False, "rate_limited"),
        ("insufficient_quota", True, "quota_exceeded"),
    ],
)
def test_a_429_fails_at_once_and_tells_quota_exhaustion_apart(
    fake_openai: FakeOpenAIServer, code: str | None, quota_exhausted: bool, outcome: str
) -> None:
    fake_openai.queue_error(429, code=code)

    with pytest.raises(LLMRateLimitError) as caught:
        call(make_client(fake_openai))

    assert fake_openai.request_count == 1
    assert caught.value.quota_exhausted is quota_exhausted
    assert caught.value.outcome == outcome
    assert caught.value.attempts == 1


def test_an_incomplete_response_is_a_provider_error_not_a_text_to_parse(
    fake_openai: FakeOpenAIServer,
) -> None:
    fake_openai.queue_incomplete('{"s":1}Olá, tudo bem? Eu posso aju', reason="max_output_tokens")

    with pytest.raises(LLMProviderError) as caught:
        call(make_client(fake_openai))

    assert str(caught.value) == "response status 'incomplete' (max_output_tokens)"
    assert fake_openai.request_count == 1


@pytest.mark.parametrize("status", ["failed", "in_progress", "cancelled"])
def test_any_status_but_completed_is_a_provider_error(
    fake_openai: FakeOpenAIServer, status: str
) -> None:
    fake_openai.queue_raw(
        200,
        {
            "id": "resp_1",
            "object": "response",
            "created_at": 1,
            "model": "m",
            "status": status,
            "output": [],
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
        },
    )

    with pytest.raises(LLMProviderError, match=f"response status '{status}'"):
        call(make_client(fake_openai))


def test_a_completed_response_without_text_is_a_provider_error(
    fake_openai: FakeOpenAIServer,
) -> None:
    fake_openai.queue_text("")

    with pytest.raises(LLMProviderError, match="empty output text"):
        call(make_client(fake_openai))


def completed(output: Any) -> dict[str, Any]:
    return {
        "id": "resp_1",
        "object": "response",
        "created_at": 1,
        "model": "m",
        "status": "completed",
        "output": output,
        "usage": {"input_tokens": 7, "output_tokens": 3, "total_tokens": 10},
    }


def test_the_text_is_every_output_text_of_the_messages_joined_as_the_sdk_reads_it(
    fake_openai: FakeOpenAIServer,
) -> None:
    fake_openai.queue_raw(
        200,
        completed(
            [
                {"type": "reasoning", "id": "rs_1", "summary": []},
                {
                    "type": "message",
                    "id": "msg_1",
                    "role": "assistant",
                    "status": "completed",
                    "content": [
                        {"type": "output_text", "text": '{"s":1}Olá', "annotations": []},
                        {"type": "refusal", "refusal": "não"},
                        {"type": "output_text", "text": ", tudo bem?", "annotations": []},
                    ],
                },
            ]
        ),
    )

    result = call(make_client(fake_openai))

    assert (result.raw_response, result.model, result.tokens_input, result.tokens_output) == (
        '{"s":1}Olá, tudo bem?',
        "m",
        7,
        3,
    )


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ("<html>bad gateway</html>", "malformed response: not JSON"),
        ("[1, 2]", "malformed response: not a JSON object"),
        (completed(None), "malformed response: no output text"),
        (completed([{"type": "message", "content": None}]), "empty output text"),
    ],
)
def test_a_2xx_that_is_no_response_is_a_provider_error_after_one_request(
    fake_openai: FakeOpenAIServer, body: Any, error: str
) -> None:
    fake_openai.queue_raw(200, body)

    with pytest.raises(LLMProviderError) as caught:
        call(make_client(fake_openai))

    assert (str(caught.value), caught.value.attempts, caught.value.transient) == (error, 1, False)
    assert fake_openai.request_count == 1


def test_without_an_api_key_no_request_is_sent(fake_openai: FakeOpenAIServer) -> None:
    client = OpenAIClient(api_key="", base_url=fake_openai.base_url, timeout=TIMEOUT, retry_max=1)

    with pytest.raises(LLMProviderError, match="OPENAI_API_KEY is not set") as caught:
        call(client)

    assert (caught.value.attempts, fake_openai.request_count) == (0, 0)


def test_every_error_is_an_llm_error() -> None:
    assert issubclass(LLMTimeoutError, LLMError)
    assert issubclass(LLMRateLimitError, LLMError)
    assert issubclass(LLMProviderError, LLMError)


def test_from_settings_uses_base_url_key_timeout_and_retries(
    openai_settings: FakeOpenAIServer,
) -> None:
    openai_settings.queue_error(500)
    openai_settings.queue_text('{"s":8}Até logo!')

    result = OpenAIClient.from_settings().chat(
        model="gpt-test", instructions="x", messages=[ChatMessage("user", "tchau")], purpose="agent"
    )

    assert result.raw_response == '{"s":8}Até logo!'
    assert openai_settings.request_count == 2
    assert openai_settings.request_headers[0]["authorization"] == "Bearer test-openai-key"


def test_a_provider_error_echoing_the_key_is_raised_without_it(
    fake_openai: FakeOpenAIServer,
) -> None:
    key = "sk-proj-SENTINEL0123456789abcdefXYZ"
    fake_openai.queue_error(
        401, code="invalid_api_key", message=f"Incorrect API key provided: {key}."
    )
    client = OpenAIClient(api_key=key, base_url=fake_openai.base_url, timeout=TIMEOUT, retry_max=1)

    with pytest.raises(LLMProviderError) as caught:
        call(client)

    # The message is what is logged and stored (LLMCall.error, the handoff detail).
    assert str(caught.value) == (
        "HTTP 401: Error code: 401 - Incorrect API key provided: sk-[redacted]."
    )
    assert fake_openai.request_headers[0]["authorization"] == f"Bearer {key}"


@pytest.mark.parametrize(
    ("queue", "transient"),
    [
        (lambda fake: fake.queue_error(500), True),
        (lambda fake: fake.queue_error(503), True),
        (lambda fake: fake.queue_timeout(TIMEOUT * 4), True),
        (lambda fake: fake.queue_error(400), False),
        (lambda fake: fake.queue_error(401), False),
        (lambda fake: fake.queue_error(429), False),
        (lambda fake: fake.queue_incomplete(), False),
    ],
)
def test_an_error_says_whether_the_provider_itself_failed(
    fake_openai: FakeOpenAIServer, queue: Any, transient: bool
) -> None:
    """What the circuit breaker counts (agents/circuit.py): timeouts, connection errors, 5xx."""
    queue(fake_openai)

    with pytest.raises(LLMError) as caught:
        call(make_client(fake_openai, retry_max=0, timeout=TIMEOUT))

    assert caught.value.transient is transient


def test_each_thread_sends_through_its_own_sdk_client_and_all_share_one_tls_context(
    fake_openai: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A threads worker's turns in flight do not share one connection pool (agents/llm.py, _sdk).
    contexts: list[object] = []
    real_context = httpx2.create_ssl_context

    def counted_context(*args: Any, **kwargs: Any) -> Any:
        contexts.append(real_context(*args, **kwargs))
        return contexts[-1]

    monkeypatch.setattr(httpx2, "create_ssl_context", counted_context)
    for n in range(6):
        fake_openai.queue_text(f'{{"s":1}}resposta {n}')
    client = make_client(fake_openai)
    start = threading.Barrier(3)

    def two_calls() -> tuple[int, int, list[str]]:
        start.wait()
        answers = [call(client).raw_response for _ in range(2)]
        first, second = client._sdk(), client._sdk()
        return id(first), id(second), answers

    with ThreadPoolExecutor(3) as pool:
        results = list(pool.map(lambda _: two_calls(), range(3)))

    assert len({first for first, _, _ in results}) == 3
    assert all(first == second for first, second, _ in results)
    assert sorted(a for _, _, answers in results for a in answers) == [
        f'{{"s":1}}resposta {n}' for n in range(6)
    ]
    assert len(contexts) == 1
    assert fake_openai.request_count == 6


def test_a_given_http_client_is_the_one_every_thread_uses(fake_openai: FakeOpenAIServer) -> None:
    sent: list[str] = []
    http_client = httpx2.Client(
        event_hooks={"request": [lambda request: sent.append(threading.current_thread().name)]}
    )
    client = OpenAIClient(
        api_key="sk-test", base_url=fake_openai.base_url, timeout=TIMEOUT, retry_max=0,
        http_client=http_client,
    )  # fmt: skip
    for _ in range(2):
        fake_openai.queue_text('{"s":1}Oi')

    with ThreadPoolExecutor(2, thread_name_prefix="caller") as pool:
        sdks = list(pool.map(lambda _: (call(client), client._sdk())[1], range(2)))

    assert sdks[0] is sdks[1]
    assert len(sent) == 2
