"""A Celery worker's CPU per turn, its send and read receipt included, with a zero-latency model.

    CELERY_BROKER_URL=redis://127.0.0.1:6379/0 \\
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/lab_attendance_bench \\
        .venv/bin/python bench/worker_cpu.py [--runs 3] [--turns 100] [--profile out.pstats]

The real stack, as production runs it: gunicorn (1 worker) serves the webhook and one Celery
worker (``celery -A config worker --pool solo``: one process, so its CPU time is the whole
worker's) consumes the tasks, on PostgreSQL (DATABASE_URL, created and migrated when missing,
emptied of conversations first) and the Redis of ``CELERY_BROKER_URL`` (every key under a prefix
of this run's own, deleted at the end: `tests.helpers.broker.IsolatedBroker`). The settings are
production's defaults (``LOG_LEVEL=INFO``, persistent database connections); the model and the
Graph API are this process's fake HTTP servers (tests/fakes/), the model answering at once with
a one-part reply (code 1).

A few warm-up turns first; then each run posts ``--turns`` signed first messages, each from a new
customer, to the webhook (no wait between them) and waits until every reply is accepted by the
fake Graph API, every inbound message is marked read and the broker's queue is empty, and reads
the worker's CPU time (utime + stime of /proc/<pid>/stat) over the run. The probe of
`bench.worker_cpu_probe`, loaded only by this bench's settings module
(`bench.worker_cpu_settings`), adds the CPU time spent inside each task's body, per task name,
and inside each read receipt sent on the worker's background threads; the rest is Celery's
(receiving, decoding, acknowledging, the consumer loop). With ``--profile`` the worker's main
thread runs under cProfile from the first run on and writes its stats there (the figures then
include the profiler's own cost: read them as proportions).

Prints per run the worker's CPU ms per turn and the wall time, the tasks per turn and their CPU,
then the median over the runs.
"""

import argparse
import json
import logging
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from uuid import uuid4

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pytest_httpserver import HTTPServer  # noqa: E402

from bench.soak import APP_SECRET, env_for, prepare_database  # noqa: E402
from bench.support import ensure_database  # noqa: E402
from tests.fakes.graph_server import FakeGraphAPI  # noqa: E402
from tests.fakes.openai_server import FakeOpenAIServer  # noqa: E402
from tests.helpers.broker import IsolatedBroker  # noqa: E402
from tests.helpers.processes import free_port, start, stop, wait_for  # noqa: E402
from tests.helpers.webhooks import healthy, post_delivery, text_delivery  # noqa: E402

DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/lab_attendance_bench"
REPLY = '{"s":1}Olá! Sou a Lia, do laboratório. Qual análise você procura?'
WARM_UP = 5
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """utime + stime of process `pid` (its threads included), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    # After the command's closing parenthesis: state is field 0, utime 11, stime 12.
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


class Worker:
    """The Celery worker (solo pool) with the bench's probe, and the probe's stats file."""

    def __init__(self, env: dict[str, str], logs: Path, profile: str, sql: bool) -> None:
        self.stats_path = str(logs / "worker-stats.json")
        Path(self.stats_path).unlink(missing_ok=True)  # a previous run's
        env = env | {
            "DJANGO_SETTINGS_MODULE": "bench.worker_cpu_settings",
            "WORKER_CPU_STATS": self.stats_path,
            "WORKER_CPU_PROFILE": profile,
            "WORKER_CPU_SQL": "1" if sql else "",
        }
        command = [
            sys.executable, "-m", "celery", "-A", "config", "worker", "--pool", "solo",
            "--without-gossip", "--without-mingle", "--without-heartbeat",
            f"--hostname=worker-cpu-{uuid4().hex[:8]}@localhost",
        ]  # fmt: skip
        self.process = start(command, env=env, log=logs / "worker.log")
        self.seq = -1
        self.stats()  # seq 0, written when the worker is ready

    def stats(self) -> dict[str, Any]:
        """Ask the probe for its totals (SIGUSR2) and wait for them."""
        if self.seq >= 0:
            os.kill(self.process.pid, signal.SIGUSR2)
        wanted = self.seq + 1

        def written() -> dict[str, Any] | None:
            try:
                document: dict[str, Any] = json.loads(Path(self.stats_path).read_text())
            except (OSError, ValueError):
                return None
            return document if document["seq"] >= wanted else None

        document: dict[str, Any] = wait_for(written, timeout=60, what="the worker's probe")
        self.seq = document["seq"]
        return document

    def stop(self) -> None:
        stop(self.process)


def post_turns(port: int, first: int, count: int) -> None:
    for number in range(first, first + count):
        phone = f"5511970{number:06d}"
        body = text_delivery(
            phone=phone,
            wamid=f"wamid.CPU.{number}",
            text="Oi, quero um orçamento de análise de água do meu poço",
            name=f"Cliente {number}",
        )
        status = post_delivery(port, body, secret=APP_SECRET)
        if status != 200:
            raise SystemExit(f"the webhook answered {status}")


def wait_answered(graph: FakeGraphAPI, broker: IsolatedBroker, total: int) -> None:
    def done() -> bool:
        return len(graph.sends) >= total and len(graph.reads) >= total

    wait_for(done, timeout=600, what=f"{total} replies and read receipts")
    client = broker.client()
    # The last task acknowledged (acks_late: after its body): nothing queued nor unacked.

    def drained() -> bool:
        for key in client.scan_iter(f"{broker.prefix}*"):
            kind = client.type(key)
            queued = (kind == b"list" and client.llen(key)) or (
                kind == b"hash" and client.hlen(key)
            )
            if queued and b"_kombu.binding" not in key:
                return False
        return True

    wait_for(drained, timeout=60, what="the broker's queues to empty")
    time.sleep(0.3)


def per_task(before: dict[str, Any], after: dict[str, Any]) -> dict[str, tuple[int, float]]:
    result = {}
    for name, (count, cpu) in after["tasks"].items():
        count0, cpu0 = before["tasks"].get(name, (0, 0.0))
        if count - count0:
            result[name] = (int(count - count0), cpu - cpu0)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--profile", default="", help="write the worker's cProfile stats here")
    parser.add_argument(
        "--sql", action="store_true", help="print the SQL each task's last run executed"
    )
    args = parser.parse_args()
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # the fakes' access log
    broker_url = os.environ.get("CELERY_BROKER_URL", "")
    if not broker_url.startswith("redis://"):
        sys.exit("bench/worker_cpu.py needs CELERY_BROKER_URL=redis://...")
    database_url = os.environ.get("DATABASE_URL") or DEFAULT_DATABASE_URL
    ensure_database(database_url, script="bench/worker_cpu.py")
    logs = Path(os.environ.get("WORKER_CPU_LOGS") or tempfile.mkdtemp(prefix="worker-cpu-"))
    logs.mkdir(parents=True, exist_ok=True)

    model_server = HTTPServer(host="127.0.0.1", port=0, threaded=True)
    graph_server = HTTPServer(host="127.0.0.1", port=0, threaded=True)
    model_server.start()
    graph_server.start()
    model = FakeOpenAIServer(model_server)
    graph = FakeGraphAPI(graph_server)
    for _ in range(WARM_UP + args.runs * args.turns):
        model.queue_text(REPLY, input_tokens=900, output_tokens=20)
    broker = IsolatedBroker(url=broker_url, prefix=f"bench:worker_cpu:{uuid4().hex}:")
    env = env_for(database_url, broker_url, model.base_url, graph.base_url)
    for soak_only in ("DB_CONN_MAX_AGE", "CELERY_TASK_SOFT_TIME_LIMIT", "CELERY_TASK_TIME_LIMIT"):
        del env[soak_only]  # production's defaults
    env |= broker.subprocess_env() | {"LOG_LEVEL": "INFO"}
    prepare_database(env)
    port = free_port()
    gunicorn = str(Path(sys.executable).with_name("gunicorn"))
    web = start(
        [gunicorn, "config.wsgi:application", f"--bind=127.0.0.1:{port}", "--workers=1"],
        env=env,
        log=logs / "web.log",
    )
    worker = None
    results: list[tuple[float, float]] = []
    try:
        wait_for(lambda: healthy(port), timeout=60, what="gunicorn")
        worker = Worker(env, logs, args.profile, args.sql)
        post_turns(port, 1, WARM_UP)
        wait_answered(graph, broker, WARM_UP)
        print(
            f"worker_cpu: {args.runs} runs x {args.turns} first turns, worker pid "
            f"{worker.process.pid} (--pool solo), load average {os.getloadavg()[0]:.2f}; "
            f"logs in {logs}"
        )
        answered = WARM_UP
        for run in range(args.runs):
            before = worker.stats()
            cpu0, wall0 = cpu_seconds(worker.process.pid), time.monotonic()
            post_turns(port, answered + 1, args.turns)
            answered += args.turns
            wait_answered(graph, broker, answered)
            wall = time.monotonic() - wall0 - 0.3
            cpu = cpu_seconds(worker.process.pid) - cpu0
            after = worker.stats()
            tasks = per_task(before, after)
            in_tasks = sum(task_cpu for _, task_cpu in tasks.values())
            per_turn = cpu * 1000 / args.turns
            results.append((per_turn, wall))
            print(
                f"run {run + 1}: worker CPU {per_turn:6.1f} ms/turn   wall {wall:5.1f} s   "
                f"({args.turns / wall:.1f} turns/s)"
            )
            for name, (count, task_cpu) in sorted(tasks.items()):
                print(
                    f"    {name:<36} {count / args.turns:4.2f}/turn  "
                    f"{task_cpu * 1000 / count:6.2f} ms each  "
                    f"{task_cpu * 1000 / args.turns:6.2f} ms/turn"
                )
            outside = (cpu - in_tasks) * 1000 / args.turns
            print(f"    {'outside task bodies (Celery)':<36} {'':16} {outside:6.2f} ms/turn")
            for name, statements in sorted(after.get("sql", {}).items()):
                print(f"    SQL of the last {name} ({len(statements)} statements):")
                for statement in statements:
                    print(f"        {statement[:160]}")
        if model.unanswered or model.request_count != answered:
            sys.exit(f"model requests: {model.request_count} for {answered} turns")
    finally:
        if worker is not None:
            worker.stop()
        stop(web)
        broker.clean()
        model_server.stop()
        graph_server.stop()
    cpus = [cpu for cpu, _ in results]
    walls = [wall for _, wall in results]
    print(
        f"median: worker CPU {statistics.median(cpus):.1f} ms/turn "
        f"(runs {', '.join(f'{c:.1f}' for c in cpus)}), wall {statistics.median(walls):.1f} s "
        f"per {args.turns} turns; load average {os.getloadavg()[0]:.2f}"
    )
    if args.profile:
        print(f"profile: {args.profile} (python -m pstats {args.profile})")


if __name__ == "__main__":
    main()
