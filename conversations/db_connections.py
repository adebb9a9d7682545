"""A Celery worker's PostgreSQL connection pool, and a thread's connection going back to it
while the thread waits on the model.

`worker_connection_pool_enable` switches the worker's process to Django's psycopg pool
(``settings.DATABASE_WORKER_POOL``, from ``DB_POOL_*``) when the worker starts, before any
connection is made; the web and beat keep their persistent connections (config/settings.py).

With the pool a worker runs many turns at
once on threads, each waiting a second or more on the model; a connection held across that wait
would make the pool's size the number of turns in flight. No transaction is ever open across a
model call (the turn thinks outside any transaction: conversations.turns.think), so the thread's
connection can be returned before the request and taken again by the next query, which costs a
pool hand-over (microseconds, no round trip) instead of a held connection per waiting turn.

Without the pool (SQLite, ``DB_POOL_MAX_SIZE=0``) nothing is closed: closing would mean a new
connection per model call. Inside a transaction (a test's, or a caller's ``atomic``) nothing is
closed either: Django would mark the transaction broken.
"""

from collections.abc import Sequence

from django.conf import settings
from django.db import connections

from agents.llm import CallPurpose, ChatMessage, LLMCallResult, LLMClient, MediaReader


def worker_connection_pool_enable() -> bool:
    """Use the connection pool in this process from now on (a Celery worker, at start-up);
    False when there is none to use (SQLite, ``DB_POOL_MAX_SIZE=0``)."""
    pool = settings.DATABASE_WORKER_POOL
    if pool is None:
        return False
    # Open connections were made without the pool: close them first (Django refuses to pool
    # with persistent connections, hence CONN_MAX_AGE 0: closing returns one to the pool).
    connections.close_all()
    database = settings.DATABASES["default"]
    database["CONN_MAX_AGE"] = 0
    database.setdefault("OPTIONS", {})["pool"] = dict(pool)
    return True


def pooled_connections_release() -> int:
    """Return this thread's idle pooled connections to their pools; returns how many."""
    released = 0
    for connection in connections.all(initialized_only=True):
        if (
            connection.connection is not None
            and connection.settings_dict.get("OPTIONS", {}).get("pool")
            and not connection.in_atomic_block
        ):
            connection.close()
            released += 1
    return released


class ConnectionReleasingClient:
    """An `LLMClient` that gives the thread's pooled connections back before each model call."""

    def __init__(self, inner: LLMClient) -> None:
        self.inner = inner

    def chat(
        self,
        *,
        model: str,
        instructions: str,
        messages: Sequence[ChatMessage],
        purpose: CallPurpose,
        cache_key: str = "",
    ) -> LLMCallResult:
        pooled_connections_release()
        return self.inner.chat(
            model=model,
            instructions=instructions,
            messages=messages,
            purpose=purpose,
            cache_key=cache_key,
        )


class ConnectionReleasingReader:
    """A `MediaReader` that gives the thread's pooled connections back before each model call."""

    def __init__(self, inner: MediaReader) -> None:
        self.inner = inner

    def transcribe(
        self, *, model: str, audio: bytes, filename: str, mime_type: str, language: str
    ) -> LLMCallResult:
        pooled_connections_release()
        return self.inner.transcribe(
            model=model, audio=audio, filename=filename, mime_type=mime_type, language=language
        )

    def describe(
        self, *, model: str, image: bytes, mime_type: str, instructions: str
    ) -> LLMCallResult:
        pooled_connections_release()
        return self.inner.describe(
            model=model, image=image, mime_type=mime_type, instructions=instructions
        )
