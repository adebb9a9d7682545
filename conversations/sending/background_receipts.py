"""Read receipts sent in the background of the process that runs the turn.

A turn marks its newest inbound message read, with a typing indicator, as it starts, so the
customer sees "digitando..." while the model thinks. The receipt is best effort: no retries, and
a failure costs nothing but the blue ticks. As a Celery task of its own it cost the worker a fifth
of a turn's CPU (publish, deliver, acknowledge, two log lines and a read of the database,
bench/worker_cpu.py) for one HTTP request; here it is that request alone, on one of a few threads
of the worker process, while the turn's own thread goes on to the model.

Bounded: at most `max_pending` receipts wait or run at once; beyond that (the Graph API is slow
or down and receipts pile up) a receipt is dropped, counted
(``lab_attendance_read_receipts_total{outcome="dropped"}``) and logged as
``read_receipt_dropped`` — at most once every `DROP_LOG_SECONDS`, with the number dropped since
the last line, so an outage does not flood the log. At worker shutdown the receipts not yet
started are dropped (`close`), so a stop never waits on them.
"""

import logging
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from conversations.prometheus import read_receipt_counted
from conversations.sending import ReadReceipt

logger = logging.getLogger(__name__)

DROP_LOG_SECONDS = 10.0


class BackgroundReadReceipts:
    """Sends `ReadReceipt`s with `send` on `max_workers` threads; thread-safe, one per process."""

    def __init__(
        self,
        *,
        send: Callable[[ReadReceipt], bool],
        max_workers: int,
        max_pending: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._send = send
        self._clock = clock
        self._dropped = 0  # since the last `read_receipt_dropped` line
        self._dropped_logged_at: float | None = None
        self._max_pending = max_pending
        self._executor = ThreadPoolExecutor(max_workers, thread_name_prefix="read-receipts")
        self._pending = 0
        self._idle = threading.Condition()
        # The process that made the threads: a forked child must build its own (`for_process`).
        self.pid = os.getpid()

    def submit(self, receipt: ReadReceipt) -> bool:
        """Queue `receipt`; False (and logged) when `max_pending` are already waiting or closed."""
        with self._idle:
            if self._pending >= self._max_pending:
                self._drop(receipt, "backlog")
                return False
            self._pending += 1
        try:
            future = self._executor.submit(self._run, receipt)
        except RuntimeError:  # closed: the worker is stopping
            self._done()
            with self._idle:
                self._drop(receipt, "closed")
            return False
        # Run when the receipt was sent, failed or was cancelled by `close`.
        future.add_done_callback(self._done)
        return True

    def wait_idle(self, timeout: float) -> bool:
        """Wait until no receipt waits or runs; False when `timeout` seconds passed first."""
        with self._idle:
            return self._idle.wait_for(lambda: self._pending == 0, timeout=timeout)

    def close(self) -> None:
        """Drop the receipts not started yet; the ones being sent finish on their own."""
        self._executor.shutdown(wait=False, cancel_futures=True)

    def _drop(self, receipt: ReadReceipt, reason: str) -> None:
        # Called holding `_idle`.
        read_receipt_counted("dropped")
        self._dropped += 1
        now = self._clock()
        if self._dropped_logged_at is None or now - self._dropped_logged_at >= DROP_LOG_SECONDS:
            logger.warning(
                "read_receipt_dropped",
                extra={
                    "message_id": receipt.message_id,
                    "reason": reason,
                    "dropped": self._dropped,
                },
            )
            self._dropped, self._dropped_logged_at = 0, now

    def _run(self, receipt: ReadReceipt) -> None:
        try:
            self._send(receipt)
        except Exception:
            # `send` logs the Graph API's refusals itself; this is anything else (a bug), which
            # must not kill the thread nor reach the turn.
            logger.exception("read_receipt_failed", extra={"message_id": receipt.message_id})

    def _done(self, _future: object = None) -> None:
        with self._idle:
            self._pending -= 1
            if self._pending <= 0:
                self._idle.notify_all()
