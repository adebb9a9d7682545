"""The probe bench/worker_cpu.py loads into its Celery worker (through
`bench.worker_cpu_settings`): the CPU time each task's body takes (``task_prerun`` to
``task_postrun``, `time.thread_time`: the solo pool runs tasks in the main thread), summed per
task name, the CPU time of each background read receipt (on its own thread,
`conversations.sending.background_receipts`) under the name `READ_RECEIPTS`, and optionally a
cProfile of the main thread.

On SIGUSR2 the probe writes its totals so far to the stats file (JSON, written whole then
renamed), with a sequence number the bench waits for; with a profile path, the first SIGUSR2
starts cProfile (timed in CPU time) and each later one dumps its cumulative stats there (pstats
format) too. With ``sql``, it also keeps the SQL statements of each task name's latest run.
"""

import cProfile
import json
import os
import signal
import threading
import time
from collections import defaultdict
from typing import Any

from celery.signals import task_postrun, task_prerun, worker_ready

READ_RECEIPTS = "read receipt (background thread)"

_started: dict[str, float] = {}
# Task name -> the SQL statements its latest run executed (with ``sql=True``).
_statements: dict[str, list[str]] = {}
_current: list[str] = []
_totals: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
_state: dict[str, Any] = {"seq": 0, "profiler": None}
_totals_lock = threading.Lock()


def _time_read_receipts() -> None:
    from conversations.sending.background_receipts import BackgroundReadReceipts

    run = BackgroundReadReceipts._run

    def timed(self: BackgroundReadReceipts, receipt: Any) -> None:
        started = time.thread_time()
        try:
            run(self, receipt)
        finally:
            with _totals_lock:
                totals = _totals[READ_RECEIPTS]
                totals[0] += 1
                totals[1] += time.thread_time() - started

    BackgroundReadReceipts._run = timed  # type: ignore[method-assign]


def install(stats_path: str, *, profile_path: str = "", sql: bool = False) -> None:
    def record(execute: Any, statement: str, params: Any, many: bool, context: Any) -> Any:
        if _current:
            _statements[_current[0]].append(statement)
        return execute(statement, params, many, context)

    def before(task_id: str | None = None, task: Any = None, **_kwargs: Any) -> None:
        if sql:
            from django.db import connection

            name = getattr(task, "name", "?")
            _current[:] = [name]
            _statements[name] = []
            if record not in connection.execute_wrappers:
                connection.execute_wrappers.append(record)
        _started[task_id or ""] = time.thread_time()

    def after(task_id: str | None = None, task: Any = None, **_kwargs: Any) -> None:
        started = _started.pop(task_id or "", None)
        if started is not None:
            with _totals_lock:
                totals = _totals[getattr(task, "name", "?")]
                totals[0] += 1
                totals[1] += time.thread_time() - started

    def write() -> None:
        document = {
            "seq": _state["seq"],
            "cpu": time.process_time(),
            "tasks": {name: list(totals) for name, totals in _totals.items()},
            "sql": _statements,
        }
        with open(stats_path + ".tmp", "w") as out:
            json.dump(document, out)
        os.replace(stats_path + ".tmp", stats_path)

    def dump(_signum: int, _frame: Any) -> None:
        profiler = _state["profiler"]
        if profile_path:
            if profiler is None:
                _state["profiler"] = profiler = cProfile.Profile(time.thread_time)
                profiler.enable()
            else:
                profiler.disable()
                profiler.dump_stats(profile_path)
                profiler.enable()
        _state["seq"] += 1
        write()

    def ready(**_kwargs: Any) -> None:
        # After Celery's own signal set-up, in the worker's main (and, with --pool solo, only)
        # process.
        signal.signal(signal.SIGUSR2, dump)
        _time_read_receipts()  # the apps are loaded now
        write()  # seq 0: the bench's sign that the worker consumes

    task_prerun.connect(before, weak=False)
    task_postrun.connect(after, weak=False)
    worker_ready.connect(ready, weak=False)
