"""The tasks' soft time limit on a worker whose pool runs tasks in threads (threads, solo).

Celery enforces ``task_soft_time_limit`` and ``task_time_limit`` in the prefork pool only (a
signal in the child process); in the threads pool it ignores both. The turn relies on the soft
limit: ``conversations.process_session`` ends a turn that overruns it in an ``llm_timeout``
handoff and releases the lease (conversations.turns.run). So on such a worker one watchdog
thread per process raises `SoftTimeLimitExceeded` in the task's own thread when its soft limit
passes (CPython's ``PyThreadState_SetAsyncExc``): the exception surfaces at the thread's next
Python instruction — at once in Python code, after the current socket read in a blocked call
(each read of the model is bounded by ``LLM_TIMEOUT_SECONDS``). That is the prefork pool's
behaviour as far as the task can tell: the prefork soft limit is also an exception raised
wherever the task happens to be.

The hard limit has no equivalent for a thread (nothing can kill one): a task that swallows the
soft limit keeps running. What protects the guarantees then is what protected them against a
prefork child stuck in C code: the turn's lease expires (hard limit + 30 s) and every write of a
turn re-checks it under a row lock, and Redis redelivers an unacknowledged task only after the
visibility timeout (4x the hard limit).
"""

import ctypes
import logging
import threading
import time
from typing import Any

from celery import Task
from celery.exceptions import SoftTimeLimitExceeded

logger = logging.getLogger(__name__)


class SoftLimitWatchdog:
    """One thread that raises `SoftTimeLimitExceeded` in the threads whose deadline passed."""

    def __init__(self) -> None:
        self._deadlines: dict[int, tuple[float, str]] = {}  # thread ident -> (deadline, task id)
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None
        self._wake_at: float | None = None  # when the watchdog looks next; None: not before a watch

    def watch(self, task_id: str, seconds: float) -> None:
        """The calling thread runs `task_id` and must be interrupted after `seconds`."""
        deadline = time.monotonic() + seconds
        with self._changed:
            self._deadlines[threading.get_ident()] = (deadline, task_id)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="soft-time-limit-watchdog", daemon=True
                )
                self._thread.start()
            # Wake the watchdog only for a deadline before its next look: with one soft limit for
            # every task that is never, and a threads worker starting a hundred tasks a second
            # would otherwise hand it the GIL and the lock for each.
            if self._wake_at is None or deadline < self._wake_at:
                self._changed.notify()

    def done(self) -> None:
        """The calling thread's task ended (whatever the outcome)."""
        ident = threading.get_ident()
        with self._changed:
            fired = self._deadlines.pop(ident, None) is None
        if fired:
            # The limit passed as the task was ending: drop the exception if it is still
            # pending, so the next task of this thread does not receive it.
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(ident), None)

    def _run(self) -> None:
        while True:
            with self._changed:
                now = time.monotonic()
                expired = [
                    (ident, task_id)
                    for ident, (deadline, task_id) in self._deadlines.items()
                    if deadline <= now
                ]
                for ident, task_id in expired:
                    # Raised while holding the lock; a task that ends meanwhile clears it
                    # (`done`).
                    del self._deadlines[ident]
                    logger.warning("task_soft_time_limit_exceeded", extra={"task_id": task_id})
                    ctypes.pythonapi.PyThreadState_SetAsyncExc(
                        ctypes.c_ulong(ident), ctypes.py_object(SoftTimeLimitExceeded)
                    )
                upcoming = [deadline for deadline, _ in self._deadlines.values()]
                timeout = max(0.05, min(upcoming) - now) if upcoming else None
                self._wake_at = None if timeout is None else now + timeout
                self._changed.wait(timeout=timeout)


WATCHDOG = SoftLimitWatchdog()
# Set at worker start-up when its pool runs tasks in threads of this process (threads, solo).
enabled = False


def task_started(task: Task[Any, Any], task_id: str) -> None:
    seconds = soft_time_limit(task) if enabled else None
    if seconds:
        WATCHDOG.watch(task_id, seconds)


def task_ended() -> None:
    if not enabled:
        return
    try:
        WATCHDOG.done()
    except SoftTimeLimitExceeded:
        # The limit fired between the task's end and here: it is over, nothing to interrupt.
        WATCHDOG.done()


def soft_time_limit(task: Task[Any, Any]) -> float | None:
    """The task's soft limit in seconds: the call's own, else the task's, else the app's."""
    limits = task.request.timelimit or (None, None)
    soft = limits[1] if len(limits) > 1 else None
    return soft or task.soft_time_limit or task.app.conf.task_soft_time_limit or None
