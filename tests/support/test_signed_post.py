"""The signed POST against a receiver that misbehaves below HTTP (a raw socket server on
127.0.0.1): one deadline for the whole POST however slowly the answer drips, and an answer read
a few KB at most however long it is."""

import time
import tracemalloc

import pytest

from support.signed_post import Delivered, RetryableDeliveryError, signed_post
from tests.fakes.webhook_receiver import OK_ANSWER, SlowReceiver, slow_receiver  # noqa: F401

DOCUMENT = {"event": "lead.created", "lead_id": 7}
HUGE = 100 * 1024 * 1024


def post(receiver: SlowReceiver, timeout: float) -> Delivered:
    return signed_post(url=receiver.url, secret="s3cret", document=DOCUMENT, timeout=timeout)


def test_an_answer_dripped_a_byte_at_a_time_ends_at_the_deadline(
    slow_receiver: SlowReceiver,  # noqa: F811
) -> None:
    """85 bytes, one every 0.2 s (17 s): each read gets a byte well within any per-read timeout."""
    slow_receiver.respond(OK_ANSWER, drip=0.2)
    started = time.monotonic()

    with pytest.raises(RetryableDeliveryError) as raised:
        post(slow_receiver, timeout=1.0)

    elapsed = time.monotonic() - started
    assert raised.value.error == "sem resposta em 1 s"
    assert 1.0 <= elapsed < 1.5
    assert len(slow_receiver.received) == 1


def test_an_answer_dripped_within_the_deadline_is_accepted(
    slow_receiver: SlowReceiver,  # noqa: F811
) -> None:
    slow_receiver.respond(OK_ANSWER, drip=0.005)  # about 0.45 s in all

    assert post(slow_receiver, timeout=3.0) == Delivered(200)


def test_each_post_has_its_own_deadline(slow_receiver: SlowReceiver) -> None:  # noqa: F811
    slow_receiver.respond(OK_ANSWER, drip=0.2)
    with pytest.raises(RetryableDeliveryError):
        post(slow_receiver, timeout=0.5)
    time.sleep(0.6)  # the first POST's deadline is long gone when the second one starts

    assert post(slow_receiver, timeout=0.5) == Delivered(200)


def huge_answer(status: bytes) -> bytes:
    return b"HTTP/1.1 " + status + b"\r\nContent-Length: " + str(HUGE).encode() + b"\r\n\r\n"


@pytest.mark.parametrize(
    ("status", "delivered"),
    [
        (b"200 OK", Delivered(200)),
        (b"422 Unprocessable Entity", Delivered(422, error="HTTP 422: " + "x" * 200)),
    ],
    ids=["accepted", "refused"],
)
def test_a_huge_answer_is_read_a_few_kb_at_most(
    slow_receiver: SlowReceiver,  # noqa: F811
    status: bytes,
    delivered: Delivered,
) -> None:
    slow_receiver.respond(huge_answer(status), filler=HUGE)
    tracemalloc.start()
    try:
        answer = post(slow_receiver, timeout=10.0)
        _now, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert answer == delivered
    # A 64 KiB read and the 4 KiB kept, not 100 MB (nor a copy of it as text).
    assert peak < 1_000_000
    # The connection was closed, not drained: most of the answer was never sent.
    wait_until_sent(slow_receiver)
    assert slow_receiver.sent[0] < HUGE // 2


def wait_until_sent(receiver: SlowReceiver) -> None:
    deadline = time.monotonic() + 5
    while not receiver.sent and time.monotonic() < deadline:
        time.sleep(0.02)
