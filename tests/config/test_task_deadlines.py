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
