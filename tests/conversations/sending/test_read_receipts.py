"""Read receipts in the background of the worker process (conversations/sending/background_receipts.py):
the turn hands a receipt over and goes on; a few threads send it through the real Graph client
to the fake Graph API; a backlog is bounded, counted and logged without flooding; a failure is
logged and costs nothing else; a stopping worker drops what it has not started."""

import logging
import threading
from collections.abc import Iterator

import pytest
from django.test import Client
from pytest_django import Settings

from conversations.sending import ReadReceipt
from conversations.sending import worker as whatsapp_tasks
from conversations.sending.background_receipts import DROP_LOG_SECONDS, BackgroundReadReceipts
from conversations.sending.worker import read_receipt_submit, read_receipts
from tests.fakes.graph_server import FakeGraphAPI
from tests.helpers.metrics import TOKEN, increase, scrape

PHONE_NUMBER_ID = "100000000000001"


def receipt(number: int, *, simulated: bool = False) -> ReadReceipt:
    return ReadReceipt(
        message_id=number,
        wamid=f"wamid.IN{number}",
        phone_number_id=PHONE_NUMBER_ID,
        access_token="tok-1",
        simulated=simulated,
    )


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


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


@pytest.mark.django_db
def test_receipts_reach_the_graph_api_from_the_background_threads_and_are_counted(
    fake_graph: FakeGraphAPI, settings: Settings, client: Client
) -> None:
    settings.CELERY_TASK_ALWAYS_EAGER = False
    settings.METRICS_TOKEN = TOKEN
    fake_graph.respond_error(400, 100, "Invalid parameter")  # the first receipt's answer
    receipts = BackgroundReadReceipts(
        send=whatsapp_tasks._read_receipt_send, max_workers=1, max_pending=10
    )
    before = scrape(client)

    accepted = [receipts.submit(receipt(n)) for n in (1, 2, 3)]

    assert accepted == [True, True, True]
    assert receipts.wait_idle(timeout=10) is True
    assert [r.json["message_id"] for r in fake_graph.reads] == [
        "wamid.IN1",
        "wamid.IN2",
        "wamid.IN3",
    ]
    assert {(r.phone_number_id, r.headers["Authorization"]) for r in fake_graph.reads} == {
        (PHONE_NUMBER_ID, "Bearer tok-1")
    }
    assert increase(before, scrape(client), "lab_attendance_read_receipts") == {
        'lab_attendance_read_receipts_total{outcome="failed"}': 1.0,
        'lab_attendance_read_receipts_total{outcome="sent"}': 2.0,
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


@pytest.mark.django_db
def test_a_backlog_beyond_max_pending_is_dropped_counted_and_logged_once_per_interval(
    blocking: BlockingSend,
    caplog: pytest.LogCaptureFixture,
    client: Client,
    settings: Settings,
) -> None:
    settings.METRICS_TOKEN = TOKEN
    clock = Clock()
    receipts = BackgroundReadReceipts(send=blocking, max_workers=1, max_pending=2, clock=clock)
    before = scrape(client)

    accepted = [receipts.submit(receipt(n)) for n in (1, 2, 3, 4, 5)]
    clock.now += DROP_LOG_SECONDS
    accepted.append(receipts.submit(receipt(6)))

    assert accepted == [True, True, False, False, False, False]
    # The first drop at once; then one line per interval with the number dropped since.
    assert [
        (vars(r)["message_id"], vars(r)["reason"], vars(r)["dropped"])
        for r in caplog.records
        if r.message == "read_receipt_dropped"
    ] == [(3, "backlog", 1), (6, "backlog", 3)]
    assert increase(before, scrape(client), "lab_attendance_read_receipts") == {
        'lab_attendance_read_receipts_total{outcome="dropped"}': 4.0
    }
    blocking.release.set()
    assert receipts.wait_idle(timeout=10) is True
    assert blocking.sent == [1, 2]
    # The slots are given back: the next one is accepted.
    assert receipts.submit(receipt(7)) is True
    assert receipts.wait_idle(timeout=10) is True
    assert blocking.sent == [1, 2, 7]
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

    with caplog.at_level(logging.ERROR, logger="conversations.sending.background_receipts"):
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
    assert (vars(dropped)["message_id"], vars(dropped)["reason"], vars(dropped)["dropped"]) == (
        4,
        "closed",
        1,
    )
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
