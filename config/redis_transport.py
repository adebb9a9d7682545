"""kombu's Redis transport, with one redis-py client per channel for publishing.

kombu's Redis channel builds a new ``redis.Redis`` client for every publish (`Channel._put`
through `conn_or_acquire`); a client is only a facade over the channel's connection pool, but
redis-py builds its table of response callbacks (about 170 entries) in each one. On the webhook
that was a fifth of the Celery publish's CPU (bench/webhook.py). This channel keeps one client
per connection pool and hands it out again; the pool, its connections and everything else are
kombu's own. Selected by settings when the broker URL is ``redis://`` or ``rediss://``.

This module is the project's one adapter over kombu's private API
(docs/architecture.md, Private APIs of libraries): it overrides
``kombu.transport.redis.Channel._create_client(asynchronous=...)`` and reads ``Channel.pool``; of
redis-py it reads only the public ``Redis.connection_pool``. Checked against kombu 5.7
(`CHECKED_VERSIONS`, pinned to pyproject.toml by tests/compat/test_kombu_redis.py).
"""

from typing import Any

from kombu.transport import redis

# Requirement specifier this module was checked against, as declared in pyproject.toml.
CHECKED_VERSIONS = {"kombu": "~=5.7.0"}


class Channel(redis.Channel):
    _publish_client: Any = None

    # Overrides a private method (the point of this module) that celery-types does not declare:
    # the two calls of kombu's own below are the `type: ignore[misc]`.
    def _create_client(self, asynchronous: bool = False) -> Any:
        if asynchronous:
            return super()._create_client(asynchronous=True)  # type: ignore[misc]
        pool = self.pool
        client = self._publish_client
        # The pool is replaced after a fork or a reconnection: a client of the old one is stale.
        if client is None or client.connection_pool is not pool:
            client = self._publish_client = super()._create_client()  # type: ignore[misc]
        return client


class Transport(redis.Transport):
    Channel = Channel
