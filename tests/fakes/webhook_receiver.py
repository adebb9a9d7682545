"""A fake receiver of the app's signed POSTs (the handoff alert, the CRM's lead) on 127.0.0.1.

A real HTTP server (pytest-httpserver, threaded so a slow answer does not hold back the retry),
so the real httpx client, its timeouts and the signature run as in production. Every POST to
``/hook`` is recorded with its raw body and headers; answers are scripted in order with
`respond` (a status, optionally after a delay) and default to 200 ``{"ok": true}``.
"""

import json
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response


@dataclass(frozen=True)
class Received:
    body: bytes
    headers: dict[str, str]

    @property
    def json(self) -> Any:
        return json.loads(self.body)


@dataclass(frozen=True)
class _Answer:
    status: int
    delay: float
    body: str


class WebhookReceiver:
    def __init__(self, server: HTTPServer) -> None:
        self.server = server
        self.received: list[Received] = []
        self._answers: deque[_Answer] = deque()
        self._lock = threading.Lock()
        server.expect_request("/hook", method="POST").respond_with_handler(self._handle)

    @property
    def url(self) -> str:
        return self.server.url_for("/hook")

    def respond(self, status: int, *, delay: float = 0.0, body: str = "") -> None:
        self._answers.append(_Answer(status, delay, body))

    def _handle(self, request: Request) -> Response:
        with self._lock:
            self.received.append(Received(request.get_data(), dict(request.headers)))
            answer = self._answers.popleft() if self._answers else _Answer(200, 0.0, "")
        if answer.delay:
            time.sleep(answer.delay)
        return Response(answer.body or '{"ok": true}', status=answer.status)


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    server = HTTPServer(host="127.0.0.1", port=0, threaded=True)
    server.start()
    try:
        yield WebhookReceiver(server)
    finally:
        server.clear()
        server.stop()
