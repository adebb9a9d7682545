"""The probe bench/latency.py's steady mode loads into its Celery workers (through
`bench.latency_settings`) for ``--detail``: the wall-clock time (``time.time()``, comparable with
the bench's own clock on the same machine) at which each turn's task started (Celery's
``task_prerun``), its turn began thinking (`turn_think`), its commit began and ended
(`turn_commit`, the reply's send included: the send runs on the commit) and its reply's send
began and ended (the turn's ``send``), one JSON line per event, keyed by session id, appended to
the file named by ``LATENCY_PROBE`` (one ``write`` per line with ``O_APPEND``, so the worker's
threads and processes never interleave a line). On SIGUSR2 a worker appends its connection
pool's statistics since the last signal (psycopg_pool's ``pop_stats``: requests, how many waited
and for how long), keyed by its pid. Production code carries no probe.
"""

import json
import os
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

from celery.signals import task_prerun, worker_process_init, worker_ready

_local = threading.local()
_state: dict[str, int] = {}


def _event(kind: str, session_id: int, started: float, ended: float | None = None) -> None:
    line = json.dumps({"e": kind, "s": session_id, "t": started, "u": ended}) + "\n"
    os.write(_state["fd"], line.encode())


def _timed(kind: str, func: Callable[..., Any], session_of: Callable[..., int]) -> Any:
    def timed(*args: Any, **kwargs: Any) -> Any:
        session_id = session_of(*args, **kwargs)
        _local.session_id = session_id
        started = time.time()
        try:
            return func(*args, **kwargs)
        finally:
            _event(kind, session_id, started, time.time())

    return timed


def _wrap() -> None:
    from conversations.turns import commit, run, tasks, think

    # `run` calls them by the names it imported: those are the ones replaced.
    run.turn_think = _timed(  # type: ignore[attr-defined]
        "think", think.turn_think, lambda **kw: kw["turn"].session_id
    )
    run.turn_commit = _timed(  # type: ignore[attr-defined]
        "commit", commit.turn_commit, lambda **kw: kw["turn"].session_id
    )
    send = tasks._send

    def timed_send(message_id: int) -> None:
        started = time.time()
        try:
            send(message_id)
        finally:
            _event("send", getattr(_local, "session_id", 0), started, time.time())

    tasks._send = timed_send


def _pool_stats(_signum: int, _frame: Any) -> None:
    from django.db import connection

    pool = getattr(connection, "pool", None)  # PostgreSQL's wrapper only
    stats = pool.pop_stats() if pool is not None else {}
    line = json.dumps({"e": "pool", "s": os.getpid(), "t": time.time(), "stats": stats}) + "\n"
    os.write(_state["fd"], line.encode())


def install(path: str) -> None:
    def before(task: Any = None, args: Any = None, **_kwargs: Any) -> None:
        if getattr(task, "name", "") == "conversations.process_session" and args:
            _event("pickup", int(args[0]), time.time())

    def ready(**_kwargs: Any) -> None:
        if "fd" not in _state:
            _state["fd"] = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            _wrap()  # the apps are loaded now
            signal.signal(signal.SIGUSR2, _pool_stats)  # after Celery's own handlers

    task_prerun.connect(before, weak=False)
    worker_ready.connect(ready, weak=False)
    worker_process_init.connect(ready, weak=False)
