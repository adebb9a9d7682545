"""config.redis_transport, the project's adapter over kombu's private API: the private method it
overrides exists with the signature it calls, on the kombu version pyproject.toml pins — an
upgrade of kombu fails here first. (Its behaviour against a real broker:
tests/config/test_redis_transport.py.)"""

import inspect

from kombu.transport import redis

from config.redis_transport import CHECKED_VERSIONS, Channel
from tests.compat.pins import assert_pinned


def test_the_checked_version_is_pyprojects_and_the_installed_one() -> None:
    assert CHECKED_VERSIONS == {"kombu": "~=5.7.0"}
    assert_pinned(CHECKED_VERSIONS)


def test_the_private_method_the_channel_overrides_exists_with_its_signature() -> None:
    # The private method pinned here is absent from celery-types' stubs (both ignores).
    parameters = inspect.signature(redis.Channel._create_client).parameters  # type: ignore[attr-defined]

    assert list(parameters) == ["self", "asynchronous"]
    assert parameters["asynchronous"].default is False
    assert isinstance(inspect.getattr_static(redis.Channel, "pool"), property)
    assert Channel._create_client is not redis.Channel._create_client  # type: ignore[attr-defined]
