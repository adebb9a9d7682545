"""The LLM port: what the rest of the code needs from a model provider (DESIGN.md §9).

`LLMClient` is the Protocol every collaborator is typed against; `OpenAIClient` (this module) is
the real adapter for the OpenAI Responses API. Errors are typed so the pipeline can map each to a
precise handoff reason.
"""

import base64
import contextlib
import functools
import logging
import ssl
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

from agents.redaction import redact

if TYPE_CHECKING:
    # The SDK takes ~0.7 s to import; the port (Protocol, result, errors) must stay light.
    import httpx2
    import openai

logger = logging.getLogger(__name__)

# "developer": the per-call context item the invoker sends after the history.
Role = Literal["user", "assistant", "developer"]
CallPurpose = Literal["agent", "repair", "summary", "transcription", "description"]


@dataclass(frozen=True, slots=True)
class ChatMessage:
    role: Role
    content: str


@dataclass(frozen=True, slots=True)
class LLMCallResult:
    raw_response: str
    model: str
    tokens_input: int
    tokens_output: int
    latency_ms: int
    attempts: int = 1
    # The part of `tokens_input` the provider read from its prompt cache (priced lower,
    # conversations.model_prices); never more than `tokens_input`.
    tokens_cached: int = 0


class LLMError(Exception):
    """A call that produced no usable answer. `attempts` counts the HTTP requests made.

    The message is redacted here, where every provider error is made: the provider's text may
    echo the credential (``Incorrect API key provided: sk-…``) or the customer's data, and this
    text is logged, stored on `LLMCall.error` and in the handoff's SYSTEM event.
    """

    outcome = "provider_error"
    # A sign that the provider itself is failing (a timeout, a connection error, a 5xx), as
    # opposed to an answer it gave (4xx, 429, an incomplete response); the circuit breaker
    # (agents/circuit.py) counts only these.
    transient = False

    def __init__(self, message: str, *, attempts: int = 1, latency_ms: int = 0) -> None:
        super().__init__(redact(message))
        self.attempts = attempts
        self.latency_ms = latency_ms


class LLMTimeoutError(LLMError):
    outcome = "timeout"
    transient = True


class LLMRateLimitError(LLMError):
    """HTTP 429. `quota_exhausted` tells `insufficient_quota` apart from a transient rate limit."""

    outcome = "rate_limited"

    def __init__(
        self, message: str, *, quota_exhausted: bool = False, attempts: int = 1, latency_ms: int = 0
    ) -> None:
        super().__init__(message, attempts=attempts, latency_ms=latency_ms)
        self.quota_exhausted = quota_exhausted
        if quota_exhausted:
            self.outcome = "quota_exceeded"


class LLMProviderError(LLMError):
    """Any other failure: 4xx, 5xx after the retries, a non-`completed` response, no text."""

    outcome = "provider_error"


class LLMClient(Protocol):
    def chat(
        self,
        *,
        model: str,
        instructions: str,
        messages: Sequence[ChatMessage],
        purpose: CallPurpose,
        cache_key: str = "",
    ) -> LLMCallResult:
        """`cache_key`, when given, is sent as the provider's prompt-cache routing key
        (``prompt_cache_key``): a stable identifier, never personal data."""
        ...


class MediaReader(Protocol):
    """What the bot needs to read a customer's media: a voice note as text, an image described."""

    def transcribe(
        self, *, model: str, audio: bytes, filename: str, mime_type: str, language: str
    ) -> LLMCallResult:
        """The audio's transcript as `raw_response`."""
        ...

    def describe(
        self, *, model: str, image: bytes, mime_type: str, instructions: str
    ) -> LLMCallResult:
        """A description of the image as `raw_response` (Responses API, ``input_image``)."""
        ...


class OpenAIClient:
    """`LLMClient` over the OpenAI Responses API (or any compatible server at `base_url`).

    The SDK's own retries are off (`max_retries=0`), so this loop is the only retry policy and
    `attempts` is exactly the number of HTTP requests sent: `1 + retry_max` at most. Timeouts,
    connection errors and 5xx are retried at once (no backoff: the customer is waiting and the
    Celery task has a time limit); any 4xx, 429 included, fails at once. `timeout` bounds each
    read of one attempt, not the whole call.

    Requests are sent with ``store=False``: the conversation carries customers' personal data,
    and the provider does not need to keep it (every call sends the full context anyway).
    """

    def __init__(
        self,
        *,
        api_key: str,
        base_url: str | None,
        timeout: float,
        retry_max: int,
        http_client: "httpx2.Client | None" = None,
    ) -> None:
        """`http_client`, when given, is the one HTTP client every thread uses (its owner's to
        configure); otherwise each calling thread gets an SDK client of its own (see `_sdk`)."""
        if retry_max < 0:
            raise ValueError("retry_max must be >= 0")
        self.retry_max = retry_max
        self._api_key = api_key
        self._base_url = base_url
        self._timeout = timeout
        self._shared: openai.OpenAI | None = None
        self._local = threading.local()
        self._lock = threading.Lock()
        self._tls: ssl.SSLContext | None = None
        if api_key and http_client is not None:
            self._shared = self._build(http_client)

    def _build(self, http_client: "httpx2.Client") -> "openai.OpenAI":
        import openai

        return openai.OpenAI(
            api_key=self._api_key,
            base_url=self._base_url,
            timeout=self._timeout,
            max_retries=0,
            http_client=http_client,
        )

    def _sdk(self) -> "openai.OpenAI":
        """This thread's SDK client: one keep-alive connection pool per thread, all sharing one
        TLS context. One pool shared by a threads worker's hundred turns in flight costs more CPU
        per request the more requests are in flight (httpcore re-scans its connections under a
        lock each time a request starts or ends), as for the Graph API's client
        (whatsapp/client.py). A thread's client goes with the thread, or with this
        object."""
        if self._shared is not None:
            return self._shared
        sdk: openai.OpenAI | None = getattr(self._local, "sdk", None)
        if sdk is None:
            with self._lock:
                if self._tls is None:
                    # The SDK's own default context, built once: one costs tens of ms of CPU.
                    import httpx2

                    self._tls = httpx2.create_ssl_context()
            # The SDK's defaults (limits, redirects), closed when the thread's client is freed.
            sdk = self._local.sdk = self._build(_closing_http_client()(verify=self._tls))
        return sdk

    @classmethod
    def from_settings(cls) -> "OpenAIClient":
        """Built from OPENAI_API_KEY, OPENAI_BASE_URL, LLM_TIMEOUT_SECONDS and LLM_RETRY_MAX."""
        from django.conf import settings

        return cls(
            api_key=settings.OPENAI_API_KEY,
            base_url=settings.OPENAI_BASE_URL,
            timeout=settings.LLM_TIMEOUT_SECONDS,
            retry_max=settings.LLM_RETRY_MAX,
        )

    def chat(
        self,
        *,
        model: str,
        instructions: str,
        messages: Sequence[ChatMessage],
        purpose: CallPurpose,
        cache_key: str = "",
    ) -> LLMCallResult:
        import httpx2

        payload: list[Any] = [{"role": m.role, "content": m.content} for m in messages]
        body: dict[str, Any] = {
            "model": model,
            "store": False,
            "instructions": instructions,
            "input": payload,
        }
        if cache_key:
            body["prompt_cache_key"] = cache_key

        def send(sdk: "openai.OpenAI") -> Any:
            # POST /responses through the SDK's generic `post`, its documented way to call
            # an endpoint as given: the SDK still sends the request (key, base URL, timeouts,
            # its typed errors), and hands back the HTTP response, whose JSON is read here.
            # `responses.create` would walk every message of the history through its
            # request transform to return them unchanged, and build a typed model of the
            # whole response for the three fields read: together a third of a turn's model
            # call in CPU (bench/worker_cpu.py). The body sent is the same
            # (tests/agents/test_openai_client.py).
            return sdk.post("/responses", body=body, cast_to=httpx2.Response).json()

        return self._call(model=model, purpose=purpose, send=send, read=_result_from)

    def transcribe(
        self, *, model: str, audio: bytes, filename: str, mime_type: str, language: str
    ) -> LLMCallResult:
        """``audio.transcriptions.create`` (multipart upload of the file, JSON answer)."""

        def send(sdk: "openai.OpenAI") -> Any:
            return sdk.audio.transcriptions.create(
                model=model,
                file=(filename, audio, mime_type),
                language=language,
                response_format="json",
            )

        return self._call(model=model, purpose="transcription", send=send, read=_transcript_from)

    def describe(
        self, *, model: str, image: bytes, mime_type: str, instructions: str
    ) -> LLMCallResult:
        import httpx2

        data_url = f"data:{mime_type};base64,{base64.b64encode(image).decode()}"
        body = {
            "model": model,
            "store": False,
            "instructions": instructions,
            "input": [
                {"role": "user", "content": [{"type": "input_image", "image_url": data_url}]}
            ],
        }

        def send(sdk: "openai.OpenAI") -> Any:
            return sdk.post("/responses", body=body, cast_to=httpx2.Response).json()

        return self._call(model=model, purpose="description", send=send, read=_result_from)

    def _call(
        self,
        *,
        model: str,
        purpose: CallPurpose,
        send: "Callable[[openai.OpenAI], Any]",
        read: Callable[[Any, str, int, int], LLMCallResult],
    ) -> LLMCallResult:
        """`send` with this client's retry policy (see the class docstring); its answer `read`."""
        started = time.perf_counter()
        if not self._api_key:
            # No request is sent; the pipeline hands off like for any provider failure.
            raise LLMProviderError("OPENAI_API_KEY is not set", attempts=0)
        import openai

        max_attempts = 1 + self.retry_max
        last_error: LLMError | None = None
        for attempt in range(1, max_attempts + 1):
            try:
                answer = send(self._sdk())
            except ValueError as exc:  # a 2xx whose body is not JSON
                raise LLMProviderError(
                    "malformed response: not JSON",
                    attempts=attempt,
                    latency_ms=_elapsed_ms(started),
                ) from exc
            except openai.APIError as exc:
                error, retryable = _translate(exc, attempt, _elapsed_ms(started))
                error.transient = retryable
                if not retryable or attempt == max_attempts:
                    logger.warning(
                        "llm_call_failed",
                        extra={
                            "model": model,
                            "purpose": purpose,
                            "attempts": attempt,
                            "outcome": error.outcome,
                            "error": str(error),
                        },
                    )
                    raise error from exc
                last_error = error
                logger.info(
                    "llm_call_retry",
                    extra={
                        "model": model,
                        "purpose": purpose,
                        "attempt": attempt,
                        "outcome": error.outcome,
                        "error": str(error),
                    },
                )
                continue
            return read(answer, model, attempt, _elapsed_ms(started))
        # Unreachable: the loop either returns or raises on its last attempt.
        raise last_error or LLMProviderError("no attempt made", attempts=0)


@functools.cache
def _closing_http_client() -> "type[httpx2.Client]":
    """The SDK's default HTTP client class (its limits, timeout and redirects), closing its
    connections when it is freed, as the client the SDK builds for itself does; made on first
    use because the SDK's import is deferred."""
    import openai

    class ClosingHttpClient(openai.DefaultHttpxClient):
        def __del__(self) -> None:
            # A client freed half-built, or at interpreter exit, may have nothing left to close.
            with contextlib.suppress(Exception):
                self.close()

    return ClosingHttpClient


def _elapsed_ms(started: float) -> int:
    return int((time.perf_counter() - started) * 1000)


def _translate(exc: "openai.APIError", attempt: int, latency_ms: int) -> tuple[LLMError, bool]:
    """The typed error for an SDK exception, and whether another attempt may help."""
    import openai

    if isinstance(exc, openai.APITimeoutError):
        return LLMTimeoutError("timed out", attempts=attempt, latency_ms=latency_ms), True
    if isinstance(exc, openai.APIConnectionError):
        return (
            LLMProviderError(f"connection error: {exc}", attempts=attempt, latency_ms=latency_ms),
            True,
        )
    if isinstance(exc, openai.RateLimitError):
        quota = exc.code == "insufficient_quota"
        return (
            LLMRateLimitError(
                f"HTTP 429 ({exc.code or 'rate_limit'}): {exc.message}",
                quota_exhausted=quota,
                attempts=attempt,
                latency_ms=latency_ms,
            ),
            False,
        )
    if isinstance(exc, openai.APIStatusError):
        retryable = exc.status_code >= 500
        return (
            LLMProviderError(
                f"HTTP {exc.status_code}: {exc.message}", attempts=attempt, latency_ms=latency_ms
            ),
            retryable,
        )
    return LLMProviderError(str(exc), attempts=attempt, latency_ms=latency_ms), False


def _result_from(body: Any, model: str, attempts: int, latency_ms: int) -> LLMCallResult:
    """The result of a Responses API answer, read as the SDK's `Response` reads it."""

    def malformed(what: str) -> LLMProviderError:
        return LLMProviderError(
            f"malformed response: {what}", attempts=attempts, latency_ms=latency_ms
        )

    if not isinstance(body, dict):
        raise malformed("not a JSON object")
    status = body.get("status")
    if status != "completed":
        details = body.get("incomplete_details")
        reason = details.get("reason") if isinstance(details, dict) else None
        raise LLMProviderError(
            f"response status {status!r}" + (f" ({reason})" if reason else ""),
            attempts=attempts,
            latency_ms=latency_ms,
        )
    output = body.get("output")
    if not isinstance(output, list):
        raise malformed("no output text")
    text = _output_text(output)
    if not text:
        raise LLMProviderError("empty output text", attempts=attempts, latency_ms=latency_ms)
    usage = body.get("usage")
    usage = usage if isinstance(usage, dict) else {}
    tokens_input = int(usage.get("input_tokens") or 0)
    return LLMCallResult(
        raw_response=text,
        model=body.get("model") or model,
        tokens_input=tokens_input,
        tokens_output=int(usage.get("output_tokens") or 0),
        latency_ms=latency_ms,
        attempts=attempts,
        tokens_cached=_cached_tokens(usage.get("input_tokens_details"), tokens_input),
    )


def _cached_tokens(details: Any, tokens_input: int) -> int:
    """``usage.input_tokens_details.cached_tokens``, 0 when absent, null or not a count. A
    count above `tokens_input` is clamped to it rather than the call failed: the cached tokens
    are a part of the input, and the answer itself is usable (and paid for); clamped, the
    call's uncached input is never negative."""
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    # bool is an int subclass: a `true` is no count.
    if not isinstance(cached, int) or isinstance(cached, bool) or cached < 0:
        return 0
    return min(cached, tokens_input)


def _transcript_from(answer: Any, model: str, attempts: int, latency_ms: int) -> LLMCallResult:
    """The result of ``audio.transcriptions.create``: its text, and its token usage when the
    model reports one (the gpt-4o transcription models do; whisper-1 reports seconds). The
    transcription usage has no cached count (its ``input_token_details`` splits audio from text
    tokens only), so `tokens_cached` stays 0."""
    text = getattr(answer, "text", None)
    if not isinstance(text, str) or not text.strip():
        raise LLMProviderError("empty transcript", attempts=attempts, latency_ms=latency_ms)
    usage = getattr(answer, "usage", None)
    tokens_input = getattr(usage, "input_tokens", 0) if usage is not None else 0
    tokens_output = getattr(usage, "output_tokens", 0) if usage is not None else 0
    return LLMCallResult(
        raw_response=text.strip(),
        model=model,
        tokens_input=int(tokens_input or 0),
        tokens_output=int(tokens_output or 0),
        latency_ms=latency_ms,
        attempts=attempts,
    )


def _output_text(output: list[Any]) -> str:
    """The text parts of the output's messages, joined: the SDK's ``Response.output_text``."""
    return "".join(
        part["text"]
        for item in output
        if isinstance(item, dict) and item.get("type") == "message"
        for part in item.get("content") or ()
        if isinstance(part, dict)
        and part.get("type") == "output_text"
        and isinstance(part.get("text"), str)
    )
