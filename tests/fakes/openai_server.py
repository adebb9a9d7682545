"""A fake OpenAI Responses API on 127.0.0.1, so the real `openai` SDK runs in tests.

openai 3.x sends through httpx2, which respx cannot intercept; this is a real HTTP server
(pytest-httpserver, threaded so a slow answer does not block the retry). Each POST to
``/v1/responses`` takes the next queued answer; a request that finds the queue empty gets a 418
and fails the test at teardown, so an unexpected model call never passes silently.

Usage (the `fake_openai` fixture is registered for the whole suite in tests/conftest.py)::

    def test_something(fake_openai):
        fake_openai.queue_text('{"s":1}Olá!', input_tokens=120, output_tokens=9)
        fake_openai.queue_error(429, code="insufficient_quota")
        client = OpenAIClient(api_key="k", base_url=fake_openai.base_url, timeout=0.5,
                              retry_max=1)
        ...
        assert fake_openai.request_count == 1
        assert fake_openai.requests[0]["model"] == "gpt-4o-mini"

To point code that reads settings at the fake, use the `openai_settings` fixture (it sets
OPENAI_BASE_URL and OPENAI_API_KEY through pytest-django's `settings`).

Token usage. An answer reports the `input_tokens` and `cached_tokens` it was queued with (10 and
0 by default). Queued with ``input_tokens=None``, the fake counts them from the request instead,
so a test can assert what OpenAI's prompt cache would do with the requests the code sends:

- the request's prompt text is its ``instructions``, then for each ``input`` item a newline, its
  ``role``, ``": "`` and its ``content`` (a string as is; anything else as
  ``json.dumps(content, sort_keys=True, ensure_ascii=False)``);
- ``input_tokens`` = the prompt text's length in characters ÷ 4, rounded up;
- the cached prefix = the longest common prefix, in characters, of this prompt text and that of
  any earlier ``/v1/responses`` request to this fake with the same ``model`` (whatever answer
  those requests got), ÷ 4 rounded down;
- ``cached_tokens`` = 0 when that prefix is under 1024 tokens (so also when the request is),
  else the prefix floored to a multiple of 128 tokens (OpenAI caches from 1,024 tokens on, in
  steps of 128).

For example, two requests of the same model whose prompt texts share their first 4,600
characters: the prefix is 1,150 tokens, the second reports ``cached_tokens`` 1,024.
"""

import itertools
import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

RESPONSES_PATH = "/v1/responses"
TRANSCRIPTIONS_PATH = "/v1/audio/transcriptions"
CHARS_PER_TOKEN = 4
CACHE_MIN_TOKENS = 1024
CACHE_STEP_TOKENS = 128
_ids = itertools.count(1)


def prompt_text(body: dict[str, Any]) -> str:
    """A request's prompt as the fake counts it (see the module docstring)."""
    parts = [str(body.get("instructions") or "")]
    items = body.get("input") or []
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    for item in items:
        item = item if isinstance(item, dict) else {"content": item}
        content = item.get("content")
        if not isinstance(content, str):
            content = json.dumps(content, sort_keys=True, ensure_ascii=False)
        parts.append(f"{item.get('role', '')}: {content}")
    return "\n".join(parts)


def _shared_chars(one: str, other: str) -> int:
    """How many leading characters the two texts have in common (a binary search on slices
    compared in C: prompts run to tens of thousands of characters)."""
    low, high = 0, min(len(one), len(other))
    while low < high:
        middle = (low + high + 1) // 2
        if one[:middle] == other[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def counted_usage(text: str, earlier: list[str]) -> tuple[int, int]:
    """(input_tokens, cached_tokens) of a prompt `text` after the `earlier` prompts of its
    model (see the module docstring)."""
    input_tokens = -(-len(text) // CHARS_PER_TOKEN)
    shared = max((_shared_chars(text, other) for other in earlier), default=0)
    prefix = shared // CHARS_PER_TOKEN
    if prefix < CACHE_MIN_TOKENS:
        return input_tokens, 0
    return input_tokens, prefix // CACHE_STEP_TOKENS * CACHE_STEP_TOKENS


@dataclass(frozen=True)
class Transcription:
    """One ``POST /v1/audio/transcriptions`` as received (a multipart form)."""

    model: str
    language: str
    response_format: str
    filename: str
    content_type: str
    content: bytes


@dataclass(frozen=True)
class _Answer:
    status: int
    body: dict[str, Any] | str
    delay: float = 0.0


def responses_object(
    text: str,
    *,
    model: str,
    status: str = "completed",
    input_tokens: int = 10,
    output_tokens: int = 5,
    cached_tokens: int = 0,
    incomplete_reason: str | None = None,
) -> dict[str, Any]:
    """A full Responses API object with one `message` output item holding `text`."""
    number = next(_ids)
    return {
        "id": f"resp_fake_{number}",
        "object": "response",
        "created_at": 1_767_225_600 + number,
        "model": model,
        "status": status,
        "error": None,
        "incomplete_details": (
            {"reason": incomplete_reason} if incomplete_reason is not None else None
        ),
        "instructions": None,
        "metadata": {},
        "output": [
            {
                "type": "message",
                "id": f"msg_fake_{number}",
                "status": "completed" if status == "completed" else "incomplete",
                "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        ],
        "parallel_tool_calls": True,
        "temperature": 1.0,
        "tool_choice": "auto",
        "tools": [],
        "top_p": 1.0,
        "usage": {
            "input_tokens": input_tokens,
            "input_tokens_details": {"cached_tokens": cached_tokens},
            "output_tokens": output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": input_tokens + output_tokens,
        },
    }


def error_body(
    *, message: str, type_: str, code: str | None, param: str | None = None
) -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


_DEFAULT_ERRORS: dict[int, tuple[str, str]] = {
    400: ("invalid_request_error", "Invalid value for 'input'."),
    401: ("invalid_request_error", "Incorrect API key provided."),
    403: ("invalid_request_error", "Project does not have access to the model."),
    404: ("invalid_request_error", "The model does not exist."),
    429: ("requests", "Rate limit reached for requests."),
    500: ("server_error", "The server had an error while processing your request."),
    502: ("server_error", "Bad gateway."),
    503: ("server_error", "The engine is currently overloaded."),
}


def _counts_tokens(answer: _Answer) -> bool:
    spec = answer.body
    return isinstance(spec, dict) and "input_tokens" in spec and spec["input_tokens"] is None


class FakeOpenAIServer:
    """Queue answers, then read what the SDK sent."""

    def __init__(self, server: HTTPServer) -> None:
        self._server = server
        self._lock = threading.Lock()
        self._queue: deque[_Answer] = deque()
        self._requests: list[dict[str, Any]] = []
        self._headers: list[dict[str, str]] = []
        self.unanswered: list[dict[str, Any]] = []
        self._transcript_queue: deque[_Answer] = deque()
        self._transcriptions: list[Transcription] = []
        # The prompt texts received, by model: what a counted answer's cache is read from.
        self._prompts: dict[str, list[str]] = {}
        self._script: Callable[[dict[str, Any]], str | None] | None = None
        server.expect_request(RESPONSES_PATH, method="POST").respond_with_handler(self._handle)
        server.expect_request(TRANSCRIPTIONS_PATH, method="POST").respond_with_handler(
            self._transcribe
        )

    @property
    def base_url(self) -> str:
        """What to give the SDK as `base_url` (it appends ``/responses``)."""
        return self._server.url_for("/v1")

    # --- queueing ---------------------------------------------------------------------------

    def queue_text(
        self,
        text: str,
        *,
        model: str | None = None,
        input_tokens: int | None = 10,
        output_tokens: int = 5,
        cached_tokens: int = 0,
        delay: float = 0.0,
    ) -> None:
        """A completed response whose output_text is `text`; `model` defaults to the request's.
        `input_tokens=None`: the input and cached tokens are counted from the request (see the
        module docstring), and `cached_tokens` must stay 0."""
        if input_tokens is None and cached_tokens:
            raise ValueError("counted tokens: cached_tokens is counted too")
        self._push(
            _Answer(
                200,
                {
                    "text": text,
                    "model": model,
                    "status": "completed",
                    "input_tokens": input_tokens,
                    "cached_tokens": cached_tokens,
                    "output_tokens": output_tokens,
                },
                delay,
            )
        )

    def answer_with(self, script: Callable[[dict[str, Any]], str | None] | None) -> None:
        """Answer each request that finds the queue empty with ``script(request body)``'s text
        (10 input and 5 output tokens); a None from it leaves the request unanswered (a 418, and
        the test fails). For conversations whose answers depend on what the code sends."""
        with self._lock:
            self._script = script

    def queue_incomplete(
        self,
        text: str = "",
        *,
        reason: str = "max_output_tokens",
        input_tokens: int = 10,
        output_tokens: int = 5,
    ) -> None:
        """A 200 whose status is `incomplete` (the model stopped early)."""
        self._push(
            _Answer(
                200,
                {
                    "text": text,
                    "model": None,
                    "status": "incomplete",
                    "incomplete_reason": reason,
                    "input_tokens": input_tokens,
                    "cached_tokens": 0,
                    "output_tokens": output_tokens,
                },
            )
        )

    def queue_error(
        self,
        status: int,
        *,
        code: str | None = None,
        type_: str | None = None,
        message: str | None = None,
        delay: float = 0.0,
    ) -> None:
        """An HTTP error with OpenAI's error envelope, e.g. ``queue_error(429,
        code="insufficient_quota")``."""
        default_type, default_message = _DEFAULT_ERRORS.get(status, ("error", "Error."))
        body = error_body(
            message=message or default_message, type_=type_ or default_type, code=code
        )
        self._push(_Answer(status, body, delay))

    def queue_raw(self, status: int, body: dict[str, Any] | str, *, delay: float = 0.0) -> None:
        """Exactly this status and body (a dict is sent as JSON)."""
        self._push(_Answer(status, {"raw": body}, delay))

    def queue_timeout(self, seconds: float) -> None:
        """Answer only after `seconds` (longer than the client's timeout makes it time out)."""
        self.queue_text('{"s":1}tarde demais', delay=seconds)

    def queue_transcript(
        self, text: str, *, input_tokens: int = 0, output_tokens: int = 0, delay: float = 0.0
    ) -> None:
        """The next ``POST /v1/audio/transcriptions`` answers `text` (with token usage when
        either count is given, as the gpt-4o transcription models report it)."""
        body: dict[str, Any] = {"text": text}
        if input_tokens or output_tokens:
            body["usage"] = {
                "type": "tokens",
                "input_tokens": input_tokens,
                "output_tokens": output_tokens,
                "total_tokens": input_tokens + output_tokens,
            }
        self._transcript_queue.append(_Answer(200, body, delay))

    def queue_transcript_error(self, status: int, *, delay: float = 0.0) -> None:
        default_type, default_message = _DEFAULT_ERRORS.get(status, ("error", "Error."))
        body = error_body(message=default_message, type_=default_type, code=None)
        self._transcript_queue.append(_Answer(status, body, delay))

    @property
    def transcriptions(self) -> list["Transcription"]:
        """The transcription requests received, in order."""
        with self._lock:
            return list(self._transcriptions)

    # --- reading ----------------------------------------------------------------------------

    @property
    def requests(self) -> list[dict[str, Any]]:
        """The JSON bodies received, in order."""
        with self._lock:
            return list(self._requests)

    @property
    def request_headers(self) -> list[dict[str, str]]:
        with self._lock:
            return list(self._headers)

    @property
    def request_count(self) -> int:
        with self._lock:
            return len(self._requests)

    @property
    def pending(self) -> int:
        """Queued answers not served yet."""
        with self._lock:
            return len(self._queue)

    def reset(self) -> None:
        with self._lock:
            self._queue.clear()
            self._requests.clear()
            self._headers.clear()
            self.unanswered.clear()
            self._transcript_queue.clear()
            self._transcriptions.clear()
            self._prompts.clear()
            self._script = None

    # --- server side ------------------------------------------------------------------------

    def _push(self, answer: _Answer) -> None:
        with self._lock:
            self._queue.append(answer)

    def _handle(self, request: Request) -> Response:
        try:
            body = json.loads(request.get_data(as_text=True) or "{}")
        except ValueError:
            body = {"_unparsable": request.get_data(as_text=True)}
        text, model = ("", "")
        if isinstance(body, dict):
            text, model = prompt_text(body), str(body.get("model", ""))
        with self._lock:
            self._requests.append(body)
            self._headers.append({k.lower(): v for k, v in request.headers.items()})
            earlier = self._prompts.setdefault(model, [])
            answer = self._queue.popleft() if self._queue else None
            if answer is None and self._script is not None and isinstance(body, dict):
                scripted = self._script(body)
                if scripted is not None:
                    answer = _Answer(200, _text_spec(scripted))
            # Counted only for an answer that asks (most tests send many long prompts).
            counted = (0, 0)
            if answer is not None and _counts_tokens(answer):
                counted = counted_usage(text, earlier)
            earlier.append(text)
            if answer is None:
                self.unanswered.append(body)
        if answer is None:
            return Response("fake OpenAI server: no answer queued", status=418)
        if answer.delay:
            time.sleep(answer.delay)
        return self._render(answer, body, counted)

    def _transcribe(self, request: Request) -> Response:
        upload = request.files.get("file")
        received = Transcription(
            model=request.form.get("model", ""),
            language=request.form.get("language", ""),
            response_format=request.form.get("response_format", ""),
            filename=upload.filename or "" if upload else "",
            content_type=upload.mimetype if upload else "",
            content=upload.read() if upload else b"",
        )
        with self._lock:
            self._transcriptions.append(received)
            answer = self._transcript_queue.popleft() if self._transcript_queue else None
            if answer is None:
                self.unanswered.append({"transcription": received.filename})
        if answer is None:
            return Response("fake OpenAI server: no transcript queued", status=418)
        if answer.delay:
            time.sleep(answer.delay)
        return Response(
            json.dumps(answer.body), status=answer.status, content_type="application/json"
        )

    @staticmethod
    def _render(
        answer: _Answer, request_body: dict[str, Any], counted: tuple[int, int]
    ) -> Response:
        """`counted`: the request's (input_tokens, cached_tokens), for an answer queued with
        ``input_tokens=None``."""
        spec = answer.body
        assert isinstance(spec, dict)
        if "raw" in spec:
            raw = spec["raw"]
            text = raw if isinstance(raw, str) else json.dumps(raw)
            return Response(text, status=answer.status, content_type="application/json")
        if answer.status != 200:
            return Response(json.dumps(spec), status=answer.status, content_type="application/json")
        input_tokens, cached_tokens = (
            counted
            if spec["input_tokens"] is None
            else (spec["input_tokens"], spec["cached_tokens"])
        )
        payload = responses_object(
            spec["text"],
            model=spec["model"] or str(request_body.get("model", "")),
            status=spec["status"],
            input_tokens=input_tokens,
            output_tokens=spec["output_tokens"],
            cached_tokens=cached_tokens,
            incomplete_reason=spec.get("incomplete_reason"),
        )
        return Response(json.dumps(payload), status=200, content_type="application/json")


def _text_spec(text: str) -> dict[str, Any]:
    return {
        "text": text,
        "model": None,
        "status": "completed",
        "input_tokens": 10,
        "cached_tokens": 0,
        "output_tokens": 5,
    }


@pytest.fixture(scope="session")
def _openai_httpserver() -> Iterator[HTTPServer]:
    server = HTTPServer(host="127.0.0.1", port=0, threaded=True)
    server.start()
    yield server
    server.clear()
    if server.is_running():
        server.stop()


@pytest.fixture
def fake_openai(_openai_httpserver: HTTPServer) -> Iterator[FakeOpenAIServer]:
    """A fresh fake `/v1/responses`; fails the test if a request found no queued answer."""
    _openai_httpserver.clear()
    fake = FakeOpenAIServer(_openai_httpserver)
    yield fake
    unanswered = list(fake.unanswered)
    _openai_httpserver.clear()
    assert not unanswered, (
        f"{len(unanswered)} request(s) to the fake OpenAI server found no queued answer; "
        "queue one with fake_openai.queue_text(...)"
    )


@pytest.fixture
def openai_settings(settings: Any, fake_openai: FakeOpenAIServer) -> FakeOpenAIServer:
    """Point OPENAI_BASE_URL (and a dummy key) at the fake; short timeout, one retry."""
    settings.OPENAI_BASE_URL = fake_openai.base_url
    settings.OPENAI_API_KEY = "test-openai-key"
    settings.LLM_TIMEOUT_SECONDS = 0.5
    settings.LLM_RETRY_MAX = 1
    return fake_openai
