"""Signed JSON POSTs to the company's own receivers: the handoff alert and the CRM's lead.

The body is the JSON document's exact bytes (UTF-8, compact, keys sorted); the header
``X-Signature-256: sha256=<hex HMAC-SHA256 of those bytes with the receiver's secret>`` lets the
receiver check it, in constant time, as Meta's ``X-Hub-Signature-256`` is checked here. Without a
secret (allowed in DEBUG only, `config.settings`) the header is left out.

`signed_post` sorts every outcome into three: accepted (2xx), refused for good (any other
status below 500: a 4xx says the request is wrong, sending it again would not help) and
`RetryableDeliveryError` (a timeout, a connection error, a 5xx), which the tasks retry with
backoff. Neither the URL (a receiver's URL may carry a token) nor the secret is ever logged or
stored: outcomes name the host and the status.

**One deadline per POST** (the caller's `timeout`, `SIGNED_POST_TIMEOUT_SECONDS`). An HTTP
client's timeouts bound each socket operation, not the request: a receiver that drips a byte every
few seconds — in its status line, its headers or its body — would hold the POST until the task's
soft time limit killed it. Here every socket operation of a POST (connecting, the TLS handshake,
each write, each read, the wait for a pooled connection) waits at most what is left of the POST's
deadline (`DeadlineBackend`, httpcore's documented network-backend interface); past it the POST is
a timeout, retried like any other. Name resolution is the one wait the deadline cannot bound (the
resolver is blocking C code): the task's soft time limit bounds that.

**The answer is streamed, never read whole**: at most `ANSWER_MAX_BYTES` of it are read (the start
of a refusal is what its error keeps), then the connection is closed instead of being drained, so
a receiver answering 400 MB costs the worker a few KB.

httpcore directly, not httpx (which has no way to hand its pool a network backend, nor needs the
rest): one connection pool per process, reused across calls; a process forked from one that had
used it (Celery's prefork pool) starts with a fresh one. Environment proxies (``HTTPS_PROXY``) are
not used, since a proxy's connection would escape the deadline; CA bundles from the environment
(``SSL_CERT_FILE``) are, through httpx's SSL context.
"""

import hashlib
import hmac
import json
import os
import threading
import time
from collections.abc import Iterable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpcore
import httpx

from agents.redaction import redact

SIGNATURE_HEADER = "X-Signature-256"
# What a refusal keeps of the receiver's answer: the start, enough to say what was wrong.
_ERROR_BODY_CHARS = 200
# What is read of any answer at most; the rest is never received (the connection is closed).
ANSWER_MAX_BYTES = 4096

# When the POST running in this thread (or task) must be over, on time.monotonic()'s clock.
_deadline: ContextVar[float | None] = ContextVar("signed_post_deadline", default=None)


def _left(timeout: float | None, error: type[Exception]) -> float | None:
    """`timeout` cut to what is left of the current POST's deadline; raises `error` past it."""
    deadline = _deadline.get()
    if deadline is None:
        return timeout
    left = deadline - time.monotonic()
    if left <= 0:
        raise error("the POST's deadline passed")
    return left if timeout is None else min(timeout, left)


class DeadlineStream(httpcore.NetworkStream):
    """A connection whose every operation ends by the current POST's deadline."""

    def __init__(self, stream: httpcore.NetworkStream) -> None:
        self._stream = stream

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._stream.read(max_bytes, _left(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        # The body is a few KB: one send into the socket's buffer, bounded like a read.
        self._stream.write(buffer, _left(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._stream.close()

    def start_tls(
        self,
        ssl_context: Any,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        return DeadlineStream(
            self._stream.start_tls(
                ssl_context, server_hostname, _left(timeout, httpcore.ConnectTimeout)
            )
        )

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class DeadlineBackend(httpcore.NetworkBackend):
    """httpcore's own sockets (`httpcore.SyncBackend`), as `DeadlineStream`s."""

    def __init__(self, backend: httpcore.NetworkBackend | None = None) -> None:
        self._backend = backend or httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        stream = self._backend.connect_tcp(
            host, port, _left(timeout, httpcore.ConnectTimeout), local_address, socket_options
        )
        return DeadlineStream(stream)

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        stream = self._backend.connect_unix_socket(
            path, _left(timeout, httpcore.ConnectTimeout), socket_options
        )
        return DeadlineStream(stream)

    def sleep(self, seconds: float) -> None:
        self._backend.sleep(seconds)


_pool: httpcore.ConnectionPool | None = None
_pool_lock = threading.Lock()


def connection_pool() -> httpcore.ConnectionPool:
    """The process's pool (created on first use; the deadline is given per request)."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = httpcore.ConnectionPool(
                ssl_context=httpx.create_ssl_context(),
                # httpx's defaults: a threads worker may post from many threads at once.
                max_connections=100,
                max_keepalive_connections=20,
                keepalive_expiry=5.0,
                network_backend=DeadlineBackend(),
            )
        return _pool


def _forget_pool_after_fork() -> None:
    # A pool's sockets must not be shared by two processes: the child opens its own.
    global _pool, _pool_lock
    _pool = None
    _pool_lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_pool_after_fork)


class RetryableDeliveryError(Exception):
    """A timeout, a connection error or a 5xx: the same POST may succeed later."""

    def __init__(self, error: str) -> None:
        super().__init__(error)
        self.error = error


@dataclass(frozen=True, slots=True)
class Delivered:
    """The receiver's answer to one POST: accepted (2xx) or refused for good (< 500)."""

    status: int
    error: str = ""

    @property
    def accepted(self) -> bool:
        return 200 <= self.status < 300


def json_body(document: Any) -> bytes:
    """The exact bytes posted (and signed): compact UTF-8 JSON, keys sorted."""
    return json.dumps(document, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode()


def signature(body: bytes, secret: str) -> str:
    """The header's value: ``sha256=`` and the hex HMAC-SHA256 of `body` keyed with `secret`."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def host_of(url: str) -> str:
    """What logs and errors may say about a receiver: its host, never the path or query."""
    return urlsplit(url).hostname or ""


# What httpcore raises when the receiver could not be reached or spoke no HTTP.
_CONNECTION_ERRORS = (
    httpcore.NetworkError,
    httpcore.ProtocolError,
    httpcore.ProxyError,
    httpcore.UnsupportedProtocol,
)


# The error of a POST that the task's time limit cut short (`deadline_errors`).
OUT_OF_TIME_ERROR = "tempo limite da tarefa esgotado"


def signed_post(
    *,
    url: str,
    secret: str,
    document: Any,
    timeout: float,
    deadline_errors: tuple[type[BaseException], ...] = (),
) -> Delivered:
    """POST `document` signed with `secret`, all over within `timeout` seconds; raises
    `RetryableDeliveryError` when worth retrying — also for `deadline_errors`, what the caller's
    task raises when its own time limit passes during the POST (Celery's soft time limit)."""
    body = json_body(document)
    headers = [
        (b"Content-Type", b"application/json; charset=utf-8"),
        # A compressed answer would have to be inflated to be read: ask for none.
        (b"Accept-Encoding", b"identity"),
    ]
    if secret:
        headers.append((SIGNATURE_HEADER.encode(), signature(body, secret).encode()))
    each = {"connect": timeout, "read": timeout, "write": timeout, "pool": timeout}
    token = _deadline.set(time.monotonic() + timeout)
    try:
        with connection_pool().stream(
            "POST", url, headers=headers, content=body, extensions={"timeout": each}
        ) as response:
            status = response.status
            answer = answer_start(response.iter_stream())
    except deadline_errors:
        raise RetryableDeliveryError(OUT_OF_TIME_ERROR) from None
    except httpcore.TimeoutException:
        raise RetryableDeliveryError(f"sem resposta em {timeout:g} s") from None
    except _CONNECTION_ERRORS as exc:
        raise RetryableDeliveryError(f"erro de conexão ({type(exc).__name__})") from None
    finally:
        _deadline.reset(token)
    if status >= 500:
        raise RetryableDeliveryError(f"HTTP {status}")
    if 200 <= status < 300:
        return Delivered(status)
    # Redacted: a receiver may echo what it refused (an e-mail, a document) back.
    text = answer.decode("utf-8", errors="replace")
    shown = redact(" ".join(text[:_ERROR_BODY_CHARS].split()))
    return Delivered(status, error=f"HTTP {status}" + (f": {shown}" if shown else ""))


def answer_start(chunks: Iterable[bytes]) -> bytes:
    """The first `ANSWER_MAX_BYTES` of an answer whose status is known: what arrives of it before
    the deadline (the status alone decides the outcome; the body only explains a refusal)."""
    kept = bytearray()
    try:
        for chunk in chunks:
            kept += chunk[: ANSWER_MAX_BYTES - len(kept)]
            if len(kept) >= ANSWER_MAX_BYTES:
                break
    except (httpcore.TimeoutException, *_CONNECTION_ERRORS):
        pass
    return bytes(kept)
