"""A fake receiver of the app's signed POSTs (the handoff alert, the CRM's lead) on 127.0.0.1.

A real HTTP server (pytest-httpserver, threaded so a slow answer does not hold back the retry),
so the real httpx client, its timeouts and the signature run as in production. Every POST to
``/hook`` is recorded with its raw body and headers; answers are scripted in order with
`respond` (a status, optionally after a delay) and default to 200 ``{"ok": true}``.

`SlowReceiver` is a raw socket server for what such a server cannot do: an answer dripped a byte
at a time from its status line on, or one far too long to read.
"""

import json
import socket
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


# --- A receiver that misbehaves below HTTP: drips its answer, or answers without end -----------

OK_ANSWER = (
    b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 12\r\n\r\n{"ok": true}'
)


@dataclass(frozen=True)
class _RawAnswer:
    raw: bytes
    drip: float  # seconds before each byte of `raw` (0: all at once)
    filler: int  # bytes sent after `raw`, 64 KiB at a time, while the client reads them


class SlowReceiver:
    """A raw TCP server on 127.0.0.1 speaking just enough HTTP/1.1 to be a receiver, for what
    a well-behaved server cannot do: drip its status line and headers a byte at a time (which
    every per-read timeout lets through), or send an answer far longer than anyone should read.

    Each connection reads one request (recorded, as `WebhookReceiver` records it), sends the next
    scripted answer (`respond`; default: 200 ``{"ok": true}`` at once) and closes. `sent` counts
    the bytes each answer got out before the client hung up."""

    def __init__(self) -> None:
        self.received: list[Received] = []
        self.sent: list[int] = []
        self._answers: deque[_RawAnswer] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.2)
        self._thread = threading.Thread(target=self._serve, name="slow-receiver", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._listener.getsockname()[1]}/hook"

    def respond(self, raw: bytes = OK_ANSWER, *, drip: float = 0.0, filler: int = 0) -> None:
        self._answers.append(_RawAnswer(raw, drip, filler))

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join(timeout=5)
        self._listener.close()

    def _serve(self) -> None:
        while not self._stopping.is_set():
            try:
                conn, _address = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(30)
            request = self._read_request(conn)
            if request is None:
                return
            with self._lock:
                self.received.append(request)
                answer = self._answers.popleft() if self._answers else _RawAnswer(OK_ANSWER, 0, 0)
            sent = 0
            try:
                if answer.drip:
                    for byte in answer.raw:
                        if self._stopping.wait(answer.drip):
                            return
                        conn.sendall(bytes([byte]))
                        sent += 1
                else:
                    conn.sendall(answer.raw)
                    sent += len(answer.raw)
                chunk, left = b"x" * 65536, answer.filler
                while left > 0:
                    piece = chunk[:left]
                    conn.sendall(piece)
                    sent, left = sent + len(piece), left - len(piece)
            except OSError:
                pass  # the client hung up: what it refused to read is the point
            finally:
                with self._lock:
                    self.sent.append(sent)

    @staticmethod
    def _read_request(conn: socket.socket) -> Received | None:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                return None
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")[1:]
        headers = dict(line.split(": ", 1) for line in lines if ": " in line)
        length = int({k.lower(): v for k, v in headers.items()}.get("content-length", "0"))
        while len(body) < length:
            chunk = conn.recv(65536)
            if not chunk:
                return None
            body += chunk
        return Received(body, headers)


@pytest.fixture
def slow_receiver() -> Iterator[SlowReceiver]:
    server = SlowReceiver()
    try:
        yield server
    finally:
        server.stop()
