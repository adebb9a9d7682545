"""Without a broker, the handoff alert and the lead's POST run on threads of the web process.

In the embedded default (no broker: eager Celery) a task runs where it is called. The alert and
the CRM's POST are called after the commit of a turn that itself runs inside Meta's webhook
request, so inline they would hold that request as long as the receiver takes: three attempts of
up to `SIGNED_POST_TIMEOUT_SECONDS` each. Here they are handed to a few threads of the process
(`DeliveryThreads.submit`) and the request answers at once; the thread runs the same task,
eagerly, with its in-process retries, and records the outcome as a worker would (the SYSTEM
``handoff_alert`` event, the lead's status).

Unbounded queue, a few threads: the embedded default is one developer's machine, and a delivery
dropped would leave its lead ``pending``. A normal stop of the process lets the queued deliveries
finish (Python joins the threads at exit); a killed process loses them — no beat sweeps the leads
there, so they stay ``pending`` until resent from the admin ("Reenviar ao CRM").
"""

import logging
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from celery import Task
from django.db import connections

logger = logging.getLogger(__name__)

DELIVERY_THREADS = 4


class DeliveryThreads:
    """Runs ``task.apply((object_id,))`` on `max_workers` threads, each closing its database
    connection after every task (the thread outlives the request that submitted it).

    `apply`, not an eager `delay`: an eager `delay` sets Celery's process-wide "a join would
    block" flag and restores the value it found when it ends, so two threads running eager
    `delay`s at once can leave it set for good (the second restores the first's value)."""

    def __init__(self, *, max_workers: int) -> None:
        self._executor = ThreadPoolExecutor(max_workers, thread_name_prefix="deliveries")
        self._pending = 0
        self._idle = threading.Condition()
        # The process that made the threads: a forked child must build its own.
        self.pid = os.getpid()

    def submit(self, task: Task[[int], Any], object_id: int) -> None:
        with self._idle:
            self._pending += 1
        self._executor.submit(self._run, task, object_id)

    def wait_idle(self, timeout: float) -> bool:
        """Wait until no task waits or runs; False when `timeout` seconds passed first."""
        with self._idle:
            return self._idle.wait_for(lambda: self._pending == 0, timeout=timeout)

    def _run(self, task: Task[[int], Any], object_id: int) -> None:
        try:
            task.apply((object_id,))
        except Exception:
            # The task records its own outcomes; this is anything else (a bug, the database
            # gone), which must not kill the thread.
            logger.exception(
                "delivery_thread_failed", extra={"task": task.name, "object_id": object_id}
            )
        finally:
            connections.close_all()
            with self._idle:
                self._pending -= 1
                self._idle.notify_all()


_threads: DeliveryThreads | None = None
_threads_lock = threading.Lock()


def delivery_threads() -> DeliveryThreads:
    """This process's delivery threads, built on first use (and again in a forked child)."""
    global _threads
    with _threads_lock:
        if _threads is None or _threads.pid != os.getpid():
            _threads = DeliveryThreads(max_workers=DELIVERY_THREADS)
        return _threads
