"""config.redis_transport: kombu's Redis transport with one publishing client per channel,
against the real Redis broker (CELERY_BROKER_URL; skipped without it), under keys of the test's
own (tests.helpers.broker)."""

import subprocess
import sys

import pytest
from kombu import Exchange, Producer, Queue

from config.redis_transport import Channel, Transport
from tests.helpers.broker import IsolatedBroker
from tests.helpers.processes import BASE_DIR


@pytest.mark.redis
def test_publishing_reuses_one_client_and_every_message_arrives_in_order(
    isolated_broker: IsolatedBroker,
) -> None:
    queue = Queue("transport-test", Exchange("", type="direct"), routing_key="transport-test")
    with isolated_broker.connection(transport=Transport) as connection:
        channel = connection.default_channel
        assert isinstance(channel, Channel)
        producer = Producer(channel)
        for n in range(3):
            producer.publish({"n": n}, routing_key="transport-test", declare=[queue])
        first, second = channel._create_client(), channel._create_client()
        pool = channel.pool

        # kombu takes a Queue or a name; celery-types declares a name only.
        with connection.SimpleQueue(queue) as simple:  # type: ignore[arg-type]
            received = [simple.get(timeout=5) for _ in range(3)]
            payloads = [message.payload for message in received]
            for message in received:
                message.ack()

    assert type(channel) is Channel
    assert first is second
    assert first.connection_pool is pool
    assert payloads == [{"n": 0}, {"n": 1}, {"n": 2}]


@pytest.mark.redis
def test_a_new_pool_after_a_fork_gets_a_new_client_that_still_publishes(
    isolated_broker: IsolatedBroker,
) -> None:
    with isolated_broker.connection(transport=Transport) as connection:
        channel = connection.default_channel
        assert isinstance(channel, Channel)
        before = channel._create_client()
        # What kombu does in a forked child (a private method, absent from celery-types).
        channel._disconnect_pools()  # type: ignore[attr-defined]
        after = channel._create_client()
        Producer(channel).publish({"after": "fork"}, routing_key="after-fork")

    assert after is not before
    assert after.connection_pool is not before.connection_pool
    assert isolated_broker.client().llen(f"{isolated_broker.prefix}after-fork") == 1


@pytest.mark.parametrize(
    ("url", "transport"),
    [
        ("redis://127.0.0.1:6379/0", "config.redis_transport:Transport"),
        ("rediss://127.0.0.1:6380/0", "config.redis_transport:Transport"),
        ("amqp://guest@127.0.0.1//", "None"),
        ("", "None"),
    ],
)
def test_settings_pick_the_transport_for_redis_urls_only(url: str, transport: str) -> None:
    code = (
        "from django.conf import settings;print(getattr(settings, 'CELERY_BROKER_TRANSPORT', None))"
    )
    env = {
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "ENV_FILE": "/nonexistent/.env",
        "DEBUG": "True",
        "CELERY_BROKER_URL": url,
        "PATH": "/usr/bin:/bin",
    }
    result = subprocess.run(
        [sys.executable, "-c", f"import django; django.setup(); {code}"],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout.split() == [transport]
