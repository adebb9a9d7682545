"""Turns per second under model latency: the real topology, 100 first messages at a time.

    PYTHONPATH=. .venv/bin/python bench/latency.py [--customers 100] [--latencies 0,0.5,1,2]
                                                   [--web-workers 2] [--no-solo]

gunicorn (``--web-workers`` sync workers) serves the webhook and one Celery worker started as
``celery -A config worker`` with no flags (its pool, concurrency and queues come from the
settings: docs/operations.md, Capacity) runs the turns, on PostgreSQL (DATABASE_URL, default
``postgres://postgres@127.0.0.1:5432/lab_attendance_latency``, created and migrated when
missing, emptied of conversations first) and a throwaway redis-server of its own
(tests/helpers/throwaway.py). The model and the Graph API are fake HTTP servers in this process:
the model answers every request after the round's latency with a greeting (code 1, so each turn
is one model call and one send); the Graph API accepts every send and read receipt.

Each round posts, as fast as 8 connections allow, one signed first message from each of
``--customers`` new customers, and waits until each has had its answer at the Graph API. It
prints, per round: the completion time (first POST to last answer), turns/s, the worker's peak
RSS (the process and its children), the worker's CPU per turn (user + system, the turn, its
send and its read receipt), and the peak of PostgreSQL connections held by the worker and by
gunicorn (pg_stat_activity, by application_name, sampled every 50 ms). First, unless
``--no-solo``, the baseline: the same round at zero latency on a worker started with
``--pool solo`` (one task at a time in one process). A warm-up round of 5 customers precedes
each worker's measured rounds. Exits 1 when a customer got no answer or more than one.

A round's completion time is one model latency ``L`` (no answer can come back before the model's
first one) plus the round's customers at the rate the worker keeps up: ``completion ≈ L +
customers / rate``. So the *sustained* turns/s, ``customers / (completion - L)``, is the worker's
throughput at latency ``L``, and the latency is hidden when it is at least the solo process's
turns/s at zero latency; the last lines say so for each latency. The round's own turns/s
(``customers / completion``) cannot tell: with 100 customers, on a machine where the solo process
answers them in 1.2 s, any worker at 1 s of latency needs that second plus the POSTs.

``--detail`` also prints, under each round, when the webhook POSTs ended and when the model
requests and the answers reached the fakes (quantiles, seconds from the first POST), and the CPU
each part of the machine spent in the round: the worker, gunicorn, PostgreSQL (the whole
server), Redis and this process (the fakes, the posters and the sampler).

The fakes are aiohttp servers on one event-loop thread of this process, kept-alive connections
and no thread per request, so they take little of the two cores the system under test needs (the
real model and Graph API take none of them); the sampler reads its processes' RSS from a process
list it refreshes every second.
"""

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit
from uuid import uuid4

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import psutil  # noqa: E402
import psycopg  # noqa: E402
from aiohttp import web  # noqa: E402

from bench.support import ensure_database  # noqa: E402
from tests.fakes.openai_server import responses_object  # noqa: E402
from tests.helpers.throwaway import ThrowawayRedis, free_port  # noqa: E402
from tests.helpers.webhooks import PHONE_NUMBER_ID, healthy, post_delivery, text_delivery  # noqa: E402

DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/lab_attendance_latency"
APP_SECRET = "latency-bench-app-secret"
ANSWER = '{"s":1}Olá! Sou a Lia. Como posso ajudar?'
WORKER_APP, WEB_APP, SAMPLER_APP = "bench-worker", "bench-web", "bench-sampler"
POSTERS = 8


@dataclass
class Fakes:
    """The fake model and Graph API; `latency` is the model's, in seconds, for the next calls."""

    model_url: str = ""
    graph_url: str = ""
    latency: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)
    sends: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    model_calls: int = 0
    model_requests: list[float] = field(default_factory=list)  # when each call arrived

    def answered(self, phones: list[str]) -> int:
        with self.lock:
            return sum(1 for phone in phones if self.sends.get(phone))

    async def _model(self, request: web.Request) -> web.Response:
        arrived = time.monotonic()
        body = json.loads(await request.read() or b"{}")
        with self.lock:
            self.model_requests.append(arrived)
        await asyncio.sleep(self.latency)
        with self.lock:
            self.model_calls += 1
        payload = responses_object(ANSWER, model=str(body.get("model", "")))
        return web.json_response(payload)

    async def _graph(self, request: web.Request) -> web.Response:
        body = json.loads(await request.read() or b"{}")
        if body.get("status") == "read":
            return web.json_response({"success": True})
        phone = body.get("to", "")
        with self.lock:
            self.sends[phone].append(time.monotonic())
        return web.json_response(
            {
                "messaging_product": "whatsapp",
                "contacts": [{"input": phone, "wa_id": phone}],
                "messages": [{"id": f"wamid.LAT{uuid4().hex}"}],
            }
        )


async def _serve(app: web.Application) -> tuple[web.AppRunner, int]:
    """`app` served on a free port of 127.0.0.1; its runner and the port."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.SockSite(runner, listener, backlog=1024).start()
    return runner, listener.getsockname()[1]


@contextmanager
def fakes_running() -> Iterator[Fakes]:
    """The fakes, served by one event loop on a thread of this process until the block ends."""
    fakes = Fakes()
    model = web.Application()
    model.router.add_post("/v1/responses", fakes._model)
    graph = web.Application()
    graph.router.add_post(r"/v23.0/{phone_number_id:\d+}/messages", fakes._graph)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="bench-fakes", daemon=True)
    thread.start()
    runners: list[web.AppRunner] = []
    try:
        for app in (model, graph):
            runner, port = asyncio.run_coroutine_threadsafe(_serve(app), loop).result(timeout=10)
            runners.append(runner)
            url = f"http://127.0.0.1:{port}"
            if app is model:
                fakes.model_url = f"{url}/v1"
            else:
                fakes.graph_url = f"{url}/v23.0"
        yield fakes
    finally:
        for runner in runners:
            asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.close()


def with_application_name(database_url: str, name: str) -> str:
    """The URL with ``?application_name=`` (pg_stat_activity tells the processes apart)."""
    parts = urlsplit(database_url)
    query = "&".join(q for q in (parts.query, f"application_name={name}") if q)
    return urlunsplit(parts._replace(query=query))


def bench_env(*, database_url: str, broker: str, fakes: Fakes) -> dict[str, str]:
    """The production settings (DEBUG=False) against the fakes; no .env."""
    return os.environ | {
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "ENV_FILE": "/nonexistent/.env",
        "DEBUG": "False",
        "SECRET_KEY": "latency-bench-secret-key",
        "FIELD_ENCRYPTION_KEYS": "bGF0ZW5jeS1iZW5jaC1maWVsZC1lbmNyeXB0aW9uISE=",
        "WHATSAPP_APP_SECRET": APP_SECRET,
        "ALLOWED_HOSTS": "127.0.0.1",
        "SECURE_SSL_REDIRECT": "False",
        "DATABASE_URL": database_url,
        "CELERY_BROKER_URL": broker,
        "OPENAI_API_KEY": "latency-bench-key",
        "OPENAI_BASE_URL": fakes.model_url,
        "LLM_TIMEOUT_SECONDS": "30",
        "WHATSAPP_API_BASE_URL": fakes.graph_url,
        "WHATSAPP_ACCESS_TOKEN": "latency-bench-token",
        "LOG_LEVEL": "WARNING",
        "PYTHONPATH": str(ROOT),
    }


@dataclass
class Topology:
    """gunicorn and a worker, started; `worker` is the worker's main process."""

    port: int
    web: subprocess.Popen[bytes]
    worker: subprocess.Popen[bytes]

    @property
    def worker_process(self) -> psutil.Process:
        return psutil.Process(self.worker.pid)


@contextmanager
def topology(
    env: Mapping[str, str],
    *,
    logs: Path,
    worker_args: tuple[str, ...] = (),
    web_workers: int = 2,
) -> Iterator[Topology]:
    """gunicorn and ``celery -A config worker`` (plus `worker_args`), each with `env` and its
    own application_name, until the block ends."""
    port = free_port()
    database_url = env["DATABASE_URL"]
    web_env = {**env, "DATABASE_URL": with_application_name(database_url, WEB_APP)}
    worker_env = {**env, "DATABASE_URL": with_application_name(database_url, WORKER_APP)}
    gunicorn = str(Path(sys.executable).with_name("gunicorn"))
    web_command = [gunicorn, "config.wsgi:application", f"--bind=127.0.0.1:{port}"]
    web_command.append(f"--workers={web_workers}")
    worker_command = [sys.executable, "-m", "celery", "-A", "config", "worker", *worker_args]
    logs.mkdir(parents=True, exist_ok=True)
    with (logs / "web.log").open("a") as web_log, (logs / "worker.log").open("a") as worker_log:
        web = subprocess.Popen(web_command, cwd=ROOT, env=web_env, stdout=web_log, stderr=web_log)
        worker = subprocess.Popen(
            worker_command, cwd=ROOT, env=worker_env, stdout=worker_log, stderr=worker_log
        )
    try:
        deadline = time.monotonic() + 60
        while not healthy(port):
            if time.monotonic() > deadline:
                raise RuntimeError(f"gunicorn did not answer; see {logs / 'web.log'}")
            time.sleep(0.2)
        yield Topology(port=port, web=web, worker=worker)
    finally:
        for process in (worker, web):
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)


def _tree(process: psutil.Process) -> list[psutil.Process]:
    try:
        return [process, *process.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def _cpu_seconds(processes: list[psutil.Process]) -> float:
    total = 0.0
    for each in processes:
        try:
            times = each.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system
    return total


def _rss_bytes(processes: list[psutil.Process]) -> int:
    total = 0
    for each in processes:
        try:
            total += each.memory_info().rss
        except psutil.NoSuchProcess:
            continue
    return total


def _named(prefix: str) -> list[psutil.Process]:
    return [p for p in psutil.process_iter(["name"]) if (p.info["name"] or "").startswith(prefix)]


def cpu_by_part(topo: "Topology") -> dict[str, float]:
    """CPU seconds so far of each part of the machine (`--detail`)."""
    return {
        "worker": _cpu_seconds(_tree(topo.worker_process)),
        "gunicorn": _cpu_seconds(_tree(psutil.Process(topo.web.pid))),
        "PostgreSQL": _cpu_seconds(_named("postgres")),
        "Redis": _cpu_seconds(_named("redis-server")),
        "this process": _cpu_seconds([psutil.Process()]),  # its own threads, not its children
    }


class Sampler:
    """Samples the worker's RSS and the PostgreSQL connections per application every 50 ms."""

    # The worker's process list (a prefork pool's children) is read again this often: listing
    # children walks every process of the machine, too dear to do 20 times a second.
    REFRESH_SECONDS = 1.0

    def __init__(self, worker: psutil.Process, dsn: str) -> None:
        self.worker = worker
        self.dsn = dsn
        self.rss_peak = 0
        self.connections_peak: dict[str, int] = defaultdict(int)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "Sampler":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        processes: list[psutil.Process] = []
        listed = -self.REFRESH_SECONDS
        with psycopg.connect(self.dsn, autocommit=True, application_name=SAMPLER_APP) as conn:
            while not self._stop.is_set():
                if time.monotonic() - listed >= self.REFRESH_SECONDS:
                    processes, listed = _tree(self.worker), time.monotonic()
                self.rss_peak = max(self.rss_peak, _rss_bytes(processes))
                rows = conn.execute(
                    "SELECT application_name, count(*) FROM pg_stat_activity"
                    " WHERE datname = current_database() GROUP BY 1"
                ).fetchall()
                for application, count in rows:
                    self.connections_peak[application] = max(
                        self.connections_peak[application], count
                    )
                time.sleep(0.05)


@dataclass(frozen=True)
class Round:
    label: str
    latency: float
    customers: int
    seconds: float
    answered: int
    duplicates: int
    rss_peak_mb: float
    cpu_ms_per_turn: float
    worker_connections: int
    web_connections: int
    detail: str = ""

    @property
    def turns_per_second(self) -> float:
        return self.answered / self.seconds if self.seconds else 0.0

    @property
    def sustained_turns_per_second(self) -> float:
        """The rate the worker keeps up once the model's first answer can have come back: the
        round's turns over its completion time less one model latency (see the module)."""
        busy = self.seconds - self.latency
        return self.answered / busy if busy > 0 else 0.0

    def line(self) -> str:
        return (
            f"| {self.label} | {self.latency:g} | {self.answered}/{self.customers} | "
            f"{self.seconds:.1f} | {self.turns_per_second:.1f} | "
            f"{self.sustained_turns_per_second:.1f} | {self.rss_peak_mb:.0f} | "
            f"{self.cpu_ms_per_turn:.0f} | {self.worker_connections} | {self.web_connections} |"
        )


HEADER = (
    "| worker | model latency s | answered | completion s | turns/s | sustained turns/s "
    "| worker RSS peak MB | worker CPU ms/turn | PG conns worker (peak) | PG conns web (peak) |\n"
    "|---|---|---|---|---|---|---|---|---|---|"
)


def run_round(
    *,
    label: str,
    fakes: Fakes,
    topo: Topology,
    dsn: str,
    latency: float,
    customers: int,
    timeout: float = 300,
    detail: bool = False,
) -> Round:
    """Post one first message from each of `customers` new customers; wait for every answer."""
    fakes.latency = latency
    batch = uuid4().int % 10**6
    phones = [f"55119{batch:06d}{n:04d}" for n in range(customers)]
    bodies = [
        text_delivery(phone=phone, wamid=f"wamid.LAT{uuid4().hex}", text="Oi, bom dia!")
        for phone in phones
    ]
    worker = topo.worker_process
    cpu_before = _cpu_seconds(_tree(worker))
    parts_before = cpu_by_part(topo) if detail else {}
    with Sampler(worker, dsn) as sampler:
        started = time.monotonic()
        with ThreadPoolExecutor(POSTERS) as posters:
            statuses = list(
                posters.map(lambda body: post_delivery(topo.port, body, secret=APP_SECRET), bodies)
            )
        posted = time.monotonic()
        if statuses != [200] * customers:
            raise RuntimeError(f"the webhook answered {sorted(set(statuses))}")
        deadline = started + timeout
        while fakes.answered(phones) < customers and time.monotonic() < deadline:
            time.sleep(0.02)
        with fakes.lock:
            last = max((fakes.sends[p][0] for p in phones if fakes.sends.get(p)), default=started)
        time.sleep(0.5)  # a duplicate send would come now
    cpu = _cpu_seconds(_tree(worker)) - cpu_before
    with fakes.lock:
        answered = sum(1 for p in phones if fakes.sends.get(p))
        duplicates = sum(max(0, len(fakes.sends.get(p, [])) - 1) for p in phones)
        model_requests = [at - started for at in fakes.model_requests if at >= started]
        answers = [fakes.sends[p][0] - started for p in phones if fakes.sends.get(p)]
    lines = ""
    if detail:
        parts = cpu_by_part(topo)
        lines = (
            f"  POSTs ended at {posted - started:.2f} s; at the fakes"
            f" (min p10 p25 p50 p75 p90 max): model requests {_quantiles(model_requests)},"
            f" answers {_quantiles(answers)}\n"
            "  CPU s in the round: "
            + ", ".join(f"{name} {parts[name] - parts_before[name]:.2f}" for name in parts)
        )
    return Round(
        label=label,
        latency=latency,
        customers=customers,
        seconds=last - started,
        answered=answered,
        duplicates=duplicates,
        rss_peak_mb=sampler.rss_peak / 2**20,
        cpu_ms_per_turn=cpu * 1000 / max(answered, 1),
        worker_connections=sampler.connections_peak.get(WORKER_APP, 0),
        web_connections=sampler.connections_peak.get(WEB_APP, 0),
        detail=lines,
    )


def _quantiles(seconds: list[float]) -> str:
    if not seconds:
        return "-"
    ordered = sorted(seconds)
    at = [ordered[round(q * (len(ordered) - 1))] for q in (0, 0.1, 0.25, 0.5, 0.75, 0.9, 1)]
    return " ".join(f"{value:.2f}" for value in at)


def prepare_database(env: Mapping[str, str]) -> None:
    python = sys.executable
    subprocess.run(
        [python, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=ROOT, env=env, check=True
    )
    setup = (
        "import django; django.setup();"
        "from conversations.models import Instance, Session, WebhookDelivery, ProviderCircuit;"
        "Session.objects.all().delete(); WebhookDelivery.objects.all().delete();"
        "ProviderCircuit.objects.all().delete();"
        f"Instance.objects.update_or_create(phone_number_id='{PHONE_NUMBER_ID}',"
        "defaults={'name': 'Latency bench', 'is_active': True})"
    )
    subprocess.run([python, "-c", setup], cwd=ROOT, env=env, check=True)


def libpq_dsn(database_url: str) -> str:
    """A DSN psycopg accepts for a django-environ ``postgres://`` URL."""
    parts = urlsplit(database_url)
    return urlunsplit(parts._replace(scheme="postgresql", query=""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--customers", type=int, default=100)
    parser.add_argument("--latencies", default="0,0.5,1,2", help="model latencies, seconds")
    parser.add_argument("--web-workers", type=int, default=2)
    parser.add_argument("--no-solo", action="store_true", help="skip the solo baseline")
    parser.add_argument(
        "--detail", action="store_true", help="the round's timeline and CPU per part, too"
    )
    args = parser.parse_args()
    database_url = os.environ.get("DATABASE_URL", DEFAULT_DATABASE_URL)
    ensure_database(database_url, script="bench/latency.py")
    dsn = libpq_dsn(database_url)
    logs = Path(os.environ.get("LATENCY_LOGS", "/tmp/latency-bench"))
    latencies = [float(value) for value in args.latencies.split(",")]
    rounds: list[Round] = []
    redis_server = ThrowawayRedis().start()
    try:
        with fakes_running() as fakes:
            env = bench_env(database_url=database_url, broker=redis_server.url(), fakes=fakes)
            prepare_database(env)
            workers: list[tuple[str, tuple[str, ...], list[float]]] = []
            if not args.no_solo:
                workers.append(("solo (--pool solo)", ("--pool", "solo"), [0.0]))
            workers.append(("no flags", (), latencies))
            for label, worker_args, worker_latencies in workers:
                with topology(
                    env, logs=logs, worker_args=worker_args, web_workers=args.web_workers
                ) as topo:
                    run_round(label="warm-up", fakes=fakes, topo=topo, dsn=dsn, latency=0,
                              customers=5)  # fmt: skip
                    for latency in worker_latencies:
                        result = run_round(
                            label=label,
                            fakes=fakes,
                            topo=topo,
                            dsn=dsn,
                            latency=latency,
                            customers=args.customers,
                            detail=args.detail,
                        )
                        rounds.append(result)
                        print(result.line() if len(rounds) > 1 else f"{HEADER}\n{result.line()}")
                        if result.detail:
                            print(result.detail)
                        sys.stdout.flush()
    finally:
        redis_server.stop()
    load = os.getloadavg()
    print(f"\nload average at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} "
          f"({os.cpu_count()} cores); logs in {logs}")  # fmt: skip
    solo = next((r for r in rounds if r.label.startswith("solo")), None)
    for each in rounds:
        if solo is not None and each is not solo and each.latency > 0:
            hidden = each.sustained_turns_per_second >= solo.turns_per_second
            print(
                f"latency {each.latency:g} s: sustained {each.sustained_turns_per_second:.1f}"
                f" turns/s against the solo process's {solo.turns_per_second:.1f} at 0:"
                f" {'hidden' if hidden else 'NOT hidden'}"
            )
    bad = [r for r in rounds if r.answered != r.customers or r.duplicates]
    if bad:
        print("customers without exactly one answer in:", ", ".join(r.line() for r in bad))
        sys.exit(1)


if __name__ == "__main__":
    main()
