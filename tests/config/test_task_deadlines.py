"""The soft time limit on a threads worker (config/task_deadlines.py): the watchdog raises
`SoftTimeLimitExceeded` in the task's own thread once its limit passes, and never in a thread
whose task has ended. (End to end on a real worker: tests/conversations/turns/test_worker.py's
slow model ending in an ``llm_timeout`` handoff.)"""

import threading
import time

from celery.exceptions import SoftTimeLimitExceeded

from config.task_deadlines import SoftLimitWatchdog


def run_in_thread(
    watchdog: SoftLimitWatchdog, *, limit: float, work: float, done_at: float
) -> dict[str, float | str]:
    """A "task" with soft limit `limit` that runs Python for `work` seconds and tells the
    watchdog it ended after `done_at` seconds; what it saw."""
    seen: dict[str, float | str] = {}

    def task() -> None:
        started = time.monotonic()
        watchdog.watch("task-1", limit)
        try:
            while time.monotonic() - started < work:
                if "done" not in seen and time.monotonic() - started >= done_at:
                    watchdog.done()
                    seen["done"] = "yes"
                time.sleep(0.01)
            seen["outcome"] = "finished"
            if "done" not in seen:
                # Every task ends so: a deadline left behind would fire into whichever thread
                # reuses this one's ident (a later test's).
                watchdog.done()
        except SoftTimeLimitExceeded:
            seen["outcome"] = "interrupted"
            seen["after"] = time.monotonic() - started
            watchdog.done()

    thread = threading.Thread(target=task)
    thread.start()
    thread.join(timeout=10)
    return seen


def test_a_task_past_its_soft_limit_is_interrupted_in_its_thread() -> None:
    seen = run_in_thread(SoftLimitWatchdog(), limit=0.3, work=5, done_at=99)

    assert seen["outcome"] == "interrupted"
    assert 0.3 <= float(seen["after"]) < 1.5


def test_a_task_that_ended_is_never_interrupted() -> None:
    watchdog = SoftLimitWatchdog()
    seen = run_in_thread(watchdog, limit=0.3, work=0.8, done_at=0.1)

    assert seen == {"done": "yes", "outcome": "finished"}


def test_each_thread_has_its_own_deadline() -> None:
    watchdog = SoftLimitWatchdog()
    results: list[dict[str, float | str]] = []
    threads = [
        threading.Thread(
            target=lambda: results.append(run_in_thread(watchdog, limit=0.3, work=5, done_at=99))
        ),
        threading.Thread(
            target=lambda: results.append(run_in_thread(watchdog, limit=30, work=1, done_at=99))
        ),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=15)

    assert sorted(str(r["outcome"]) for r in results) == ["finished", "interrupted"]


def test_a_shorter_limit_watched_after_a_longer_one_still_fires_on_time() -> None:
    # The watchdog is woken only for a deadline before its next look: here, the second task's.
    watchdog = SoftLimitWatchdog()
    long_started = threading.Event()
    release = threading.Event()

    def long_task() -> None:
        watchdog.watch("task-long", 30)
        long_started.set()
        release.wait(timeout=10)
        watchdog.done()

    holder = threading.Thread(target=long_task)
    holder.start()
    long_started.wait(timeout=5)
    time.sleep(0.1)  # the watchdog is now asleep until the long task's deadline

    seen = run_in_thread(watchdog, limit=0.3, work=5, done_at=99)
    release.set()
    holder.join(timeout=10)

    assert seen["outcome"] == "interrupted"
    assert 0.3 <= float(seen["after"]) < 1.5


def test_a_later_deadline_does_not_wake_the_watchdog() -> None:
    watchdog = SoftLimitWatchdog()
    watchdog.watch("task-1", 30)
    time.sleep(0.1)  # the watchdog looked and sleeps until task-1's deadline
    wake_at = watchdog._wake_at
    notified: list[bool] = []
    real_notify = watchdog._changed.notify

    def counted_notify(n: int = 1) -> None:
        notified.append(True)
        real_notify(n)

    watchdog._changed.notify = counted_notify  # type: ignore[method-assign]

    def later_task() -> None:
        watchdog.watch("task-2", 60)
        watchdog.done()  # as every task ends (see run_in_thread)

    other = threading.Thread(target=later_task)
    other.start()
    other.join(timeout=5)
    watchdog.done()

    assert wake_at is not None
    assert notified == []
