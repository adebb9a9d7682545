"""Read receipts in the background of the worker process (conversations/whatsapp/read_receipts.py):
the turn hands a receipt over and goes on; a few threads send it through the real Graph client
to the fake Graph API; a backlog is bounded; a failure is logged and costs nothing else; a
stopping worker drops what it has not started."""

import logging
import threading
from collections.abc import Iterator

import pytest
from pytest_django import Settings

from conversations.sending import ReadReceipt
from conversations.whatsapp import tasks as whatsapp_tasks
from conversations.whatsapp.read_receipts import BackgroundReadReceipts
from conversations.whatsapp.tasks import read_receipt_submit, read_receipts
from tests.fakes.graph_server import FakeGraphAPI

PHONE_NUMBER_ID = "100000000000001"


def receipt(number: int, *, simulated: bool = False) -> ReadReceipt:
    return ReadReceipt(
        message_id=number,
        wamid=f"wamid.IN{number}",
        phone_number_id=PHONE_NUMBER_ID,
        access_token="tok-1",
        simulated=simulated,
    )


class BlockingSend:
    """A `send` that records each receipt and holds until released (a slow Graph API)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.started = threading.Semaphore(0)
        self.sent: list[int] = []

    def __call__(self, receipt: ReadReceipt) -> bool:
        self.started.release()
        assert self.release.wait(timeout=10)
        self.sent.append(receipt.message_id)
        return True


@pytest.fixture
def blocking() -> Iterator[BlockingSend]:
    send = BlockingSend()
    yield send
    send.release.set()  # never leave a thread blocked after a failed assertion


def test_receipts_reach_the_graph_api_from_the_background_threads(
    fake_graph: FakeGraphAPI, settings: Settings
) -> None:
    settings.CELERY_TASK_ALWAYS_EAGER = False
    receipts = BackgroundReadReceipts(
        send=whatsapp_tasks._read_receipt_send, max_workers=2, max_pending=10
    )

    accepted = [receipts.submit(receipt(n)) for n in (1, 2, 3)]

    assert accepted == [True, True, True]
    assert receipts.wait_idle(timeout=10) is True
    assert sorted(r.json["message_id"] for r in fake_graph.reads) == [
        "wamid.IN1",
        "wamid.IN2",
        "wamid.IN3",
    ]
    assert {(r.phone_number_id, r.headers["Authorization"]) for r in fake_graph.reads} == {
        (PHONE_NUMBER_ID, "Bearer tok-1")
    }
    receipts.close()


def test_the_turn_is_not_held_by_a_slow_graph_api(blocking: BlockingSend) -> None:
    receipts = BackgroundReadReceipts(send=blocking, max_workers=1, max_pending=10)

    assert receipts.submit(receipt(1)) is True
    assert blocking.started.acquire(timeout=10) is True

    # The receipt is being sent, the caller already went on.
    assert (blocking.sent, receipts.wait_idle(timeout=0.05)) == ([], False)
    blocking.release.set()
    assert receipts.wait_idle(timeout=10) is True
    assert blocking.sent == [1]
    receipts.close()


def test_a_backlog_beyond_max_pending_is_dropped_and_logged(
    blocking: BlockingSend, caplog: pytest.LogCaptureFixture
) -> None:
    receipts = BackgroundReadReceipts(send=blocking, max_workers=1, max_pending=2)

    accepted = [receipts.submit(receipt(n)) for n in (1, 2, 3)]

    assert accepted == [True, True, False]
    [dropped] = [r for r in caplog.records if r.message == "read_receipt_dropped"]
    assert (vars(dropped)["message_id"], vars(dropped)["reason"]) == (3, "backlog")
    blocking.release.set()
    assert receipts.wait_idle(timeout=10) is True
    assert blocking.sent == [1, 2]
    # The slots are given back: the next one is accepted.
    assert receipts.submit(receipt(4)) is True
    assert receipts.wait_idle(timeout=10) is True
    assert blocking.sent == [1, 2, 4]
    receipts.close()


def test_a_send_that_raises_is_logged_and_the_next_receipt_still_goes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sent: list[int] = []

    def send(receipt: ReadReceipt) -> bool:
        if receipt.message_id == 1:
            raise RuntimeError("a bug")
        sent.append(receipt.message_id)
        return True

    receipts = BackgroundReadReceipts(send=send, max_workers=1, max_pending=10)

    with caplog.at_level(logging.ERROR, logger="conversations.whatsapp.read_receipts"):
        assert [receipts.submit(receipt(n)) for n in (1, 2)] == [True, True]
        assert receipts.wait_idle(timeout=10) is True

    assert sent == [2]
    [failed] = [r for r in caplog.records if r.message == "read_receipt_failed"]
    assert (vars(failed)["message_id"], failed.exc_info is not None) == (1, True)
    receipts.close()


def test_close_drops_the_receipts_not_started_and_refuses_new_ones(
    blocking: BlockingSend, caplog: pytest.LogCaptureFixture
) -> None:
    receipts = BackgroundReadReceipts(send=blocking, max_workers=1, max_pending=10)
    assert [receipts.submit(receipt(n)) for n in (1, 2, 3)] == [True, True, True]
    assert blocking.started.acquire(timeout=10) is True  # 1 is being sent; 2 and 3 wait

    receipts.close()
    blocking.release.set()

    assert receipts.wait_idle(timeout=10) is True
    assert blocking.sent == [1]
    assert receipts.submit(receipt(4)) is False
    [dropped] = [r for r in caplog.records if r.message == "read_receipt_dropped"]
    assert (vars(dropped)["message_id"], vars(dropped)["reason"]) == (4, "closed")
    assert receipts.wait_idle(timeout=0) is True


def test_a_forked_child_builds_its_own_receipts(monkeypatch: pytest.MonkeyPatch) -> None:
    parent = read_receipts()
    assert read_receipts() is parent
    # As in a prefork child: the pid changed, and the parent's threads are gone.
    monkeypatch.setattr(parent, "pid", -1)

    child = read_receipts()

    assert child is not parent
    assert child.pid > 0
    assert read_receipts() is child


def test_eager_runs_the_receipt_inline_and_a_worker_in_the_background(
    fake_graph: FakeGraphAPI, settings: Settings
) -> None:
    settings.CELERY_TASK_ALWAYS_EAGER = True
    read_receipt_submit(receipt(1))
    # Inline: sent before the call returned.
    assert [r.json["message_id"] for r in fake_graph.reads] == ["wamid.IN1"]

    settings.CELERY_TASK_ALWAYS_EAGER = False
    read_receipt_submit(receipt(2))
    assert read_receipts().wait_idle(timeout=10) is True
    assert [r.json["message_id"] for r in fake_graph.reads] == ["wamid.IN1", "wamid.IN2"]


def test_a_simulated_session_s_receipt_reaches_nothing(
    fake_graph: FakeGraphAPI, settings: Settings
) -> None:
    settings.CELERY_TASK_ALWAYS_EAGER = False
    read_receipt_submit(receipt(1, simulated=True))

    assert read_receipts().wait_idle(timeout=10) is True
    assert fake_graph.requests == []
