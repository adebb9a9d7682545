"""A thread's database connection goes back to the pool while the thread waits on the model.

With the PostgreSQL pool (config/settings.py, ``DB_POOL_MAX_SIZE``) a worker runs many turns at
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

from django.db import connections

from agents.llm import CallPurpose, ChatMessage, LLMCallResult, LLMClient


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
    ) -> LLMCallResult:
        pooled_connections_release()
        return self.inner.chat(
            model=model, instructions=instructions, messages=messages, purpose=purpose
        )
