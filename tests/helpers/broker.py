"""A Redis broker of one test's own on the shared Redis, so concurrent runs never collide.

Every key kombu writes (queues, bindings, unacked messages, pidbox) goes under a prefix unique to
the test (kombu's ``global_keyprefix`` transport option), in the Redis database of
``CELERY_BROKER_URL``. A worker of this test consumes only this test's tasks; cleaning up deletes
only this test's keys. Two developers' runs, CI and a developer, or pytest-xdist workers can share
one Redis: a fixed database per module, flushed before and after, let one run flush another's
queue and one run's worker take another's tasks.

Subprocesses (gunicorn, a Celery worker) get the prefix through `subprocess_env`: the project's
own settings (``config.settings``) plus the prefix, in `tests.helpers.broker_settings`. The
fixture is ``isolated_broker`` (tests/conftest.py).
"""

from dataclasses import dataclass
from typing import Any
from uuid import uuid4

import redis
from celery import Celery
from django.conf import settings
from kombu import Connection, Exchange, Queue

PREFIX_VARIABLE = "TEST_BROKER_KEY_PREFIX"
SETTINGS_MODULE = "tests.helpers.broker_settings"


@dataclass(frozen=True)
class IsolatedBroker:
    url: str
    prefix: str

    @classmethod
    def new(cls, label: str) -> "IsolatedBroker":
        """This run's broker (``CELERY_BROKER_URL``), keys under ``test:<label>:<random>:``."""
        return cls(
            url=settings.CELERY_INTEGRATION_BROKER_URL, prefix=f"test:{label}:{uuid4().hex}:"
        )

    @property
    def transport_options(self) -> dict[str, Any]:
        return {**settings.CELERY_BROKER_TRANSPORT_OPTIONS, "global_keyprefix": self.prefix}

    def connection(self, **kwargs: Any) -> Connection:
        """A kombu connection that reads and writes under the prefix (Celery prefers the
        CELERY_BROKER_URL of the environment to a `broker=` argument: pass this instead)."""
        return Connection(self.url, transport_options=self.transport_options, **kwargs)

    def subprocess_env(self) -> dict[str, str]:
        """What a subprocess of the project needs to use this broker."""
        return {
            "CELERY_BROKER_URL": self.url,
            "DJANGO_SETTINGS_MODULE": SETTINGS_MODULE,
            PREFIX_VARIABLE: self.prefix,
        }

    def client(self) -> redis.Redis:
        return redis.Redis.from_url(self.url)

    def keys(self) -> list[str]:
        """This test's keys, without the prefix."""
        found = self.client().scan_iter(match=f"{self.prefix}*", count=1000)
        return sorted(key.decode().removeprefix(self.prefix) for key in found)

    def clean(self) -> None:
        """Delete this test's keys, and no other."""
        client = self.client()
        keys = list(client.scan_iter(match=f"{self.prefix}*", count=1000))
        if keys:
            client.delete(*keys)


class BrokerClient:
    """Sends tasks to the worker's broker.

    Celery prefers the CELERY_BROKER_URL environment variable to any `broker=` argument, so the
    connection is given explicitly; the queue (default: the default queue) is declared first, so
    a task sent before the worker has started waits for it instead of being dropped.
    """

    def __init__(self, broker: IsolatedBroker) -> None:
        self.broker = broker
        self.app = Celery(set_as_current=False)

    def send(self, task: str, *args: Any, queue: str = "celery") -> None:
        with self.broker.connection() as connection:
            Queue(queue, Exchange(queue, type="direct"), routing_key=queue).bind(
                connection
            ).declare()
            self.app.send_task(task, args=list(args), connection=connection, queue=queue)
