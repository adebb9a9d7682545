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

One httpx client per process, reused across calls (its connection pool); a process forked from
one that had used it (Celery's prefork pool) starts with a fresh one.
"""

import hashlib
import hmac
import json
import os
import threading
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx

from agents.redaction import redact

SIGNATURE_HEADER = "X-Signature-256"
# What a refusal keeps of the receiver's answer: the start, enough to say what was wrong.
_ERROR_BODY_CHARS = 200

_client: httpx.Client | None = None
_client_lock = threading.Lock()


def http_client() -> httpx.Client:
    """The process's client (created on first use; timeouts are given per request)."""
    global _client
    with _client_lock:
        if _client is None:
            _client = httpx.Client(follow_redirects=False)
        return _client


def _forget_client_after_fork() -> None:
    # A pool's sockets must not be shared by two processes: the child opens its own.
    global _client, _client_lock
    _client = None
    _client_lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_client_after_fork)


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


def signed_post(*, url: str, secret: str, document: Any, timeout: float) -> Delivered:
    """POST `document` signed with `secret`; raises `RetryableDeliveryError` when worth retrying."""
    body = json_body(document)
    headers = {"Content-Type": "application/json; charset=utf-8"}
    if secret:
        headers[SIGNATURE_HEADER] = signature(body, secret)
    try:
        response = http_client().post(url, content=body, headers=headers, timeout=timeout)
    except httpx.TimeoutException:
        raise RetryableDeliveryError(f"sem resposta em {timeout:g} s") from None
    except httpx.TransportError as exc:
        raise RetryableDeliveryError(f"erro de conexão ({type(exc).__name__})") from None
    if response.status_code >= 500:
        raise RetryableDeliveryError(f"HTTP {response.status_code}")
    if 200 <= response.status_code < 300:
        return Delivered(response.status_code)
    # Redacted: a receiver may echo what it refused (an e-mail, a document) back.
    answer = redact(" ".join(response.text[:_ERROR_BODY_CHARS].split()))
    error = f"HTTP {response.status_code}" + (f": {answer}" if answer else "")
    return Delivered(response.status_code, error=error)
