"""Turns per second under model latency: the real topology, 100 first messages at a time.

    PYTHONPATH=. .venv/bin/python bench/latency.py [--customers 100] [--latencies 0,0.5,1,2]
                                                   [--web-workers 2] [--no-solo]
    PYTHONPATH=. .venv/bin/python bench/latency.py --rates 5,10,20,40 [--duration 20]
                                                   [--latency 1] [--worker-processes 1] [--detail]

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

The steady mode (``--rates``) asks how long the pipeline itself keeps a reply, at a steady rate
of new customers rather than in bursts: for each rate in turn, for ``--duration`` seconds, a
process of its own POSTs one first message from a new customer every ``1 / rate`` s (open loop,
each on a new connection; a late server does not delay the next POST), and the fake model
answers each after ``--latency`` s. Per rate it prints "in", from the moment the POST was sent
(so the web's queue counts) to the model request at the fake model, and "out", from the model's
answer to the send at the fake Graph API, as p50 / p99; how late the posters ever were against
their schedule; and the CPU each part of the machine spent, as a share of one core. The workers
are ``--worker-processes`` times ``celery -A config worker`` (each its own ``--hostname`` when
more than one); gunicorn runs 4 sync workers unless ``--web-workers`` says otherwise, as the
deploy files do. ``--detail`` loads a probe into the workers (`bench.latency_probe`, through
`bench.latency_settings`) and prints under each rate where the time went: the POST, Celery's
pickup, the turn's reads before it thinks, thinking to the model request, the answer to the
commit (the call's record), the commit's writes until the send, the send's request and whole
call, the read receipt after the POST, and how often the workers' connection pools made a
thread queue for a connection, and for how long.

The fakes are aiohttp servers on one event-loop thread of this process, kept-alive connections
and no thread per request, so they take little of the two cores the system under test needs (the
real model and Graph API take none of them); the sampler reads its processes' RSS from a process
list it refreshes every second.
"""

import argparse
import asyncio
import json
import math
import multiprocessing
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
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
from tests.helpers.webhooks import (  # noqa: E402
    PHONE_NUMBER_ID,
    WEBHOOK_PATH,
    healthy,
    post_delivery,
    text_delivery,
)
from whatsapp.signature import compute_signature  # noqa: E402

DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/lab_attendance_latency"
APP_SECRET = "latency-bench-app-secret"
ANSWER = '{"s":1}Olá! Sou a Lia. Como posso ajudar?'
WORKER_APP, WEB_APP, SAMPLER_APP = "bench-worker", "bench-web", "bench-sampler"
POSTERS = 8
# The steady mode's gunicorn runs what deploy/compose.yaml and the systemd unit run (--workers 4):
# sync workers wait on PostgreSQL and Redis, and two of them leave a webhook only 50 ms of wall
# time each at 40 deliveries a second before the web's queue grows without end.
STEADY_WEB_WORKERS = 4
# A steady-mode customer's text carries its reference, which the fake model finds in the request.
REFERENCE = re.compile(rb"LATREF([0-9a-f]{12})")


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
    # The steady mode's wall-clock times (time.time(), as the posters' and the probe's): a
    # model call's arrival and answer by the customer's reference in its text, the first send
    # and the read receipt by phone and wamid.
    model_arrived: dict[str, float] = field(default_factory=dict)
    model_answered: dict[str, float] = field(default_factory=dict)
    sent_wall: dict[str, float] = field(default_factory=dict)
    read_wall: dict[str, float] = field(default_factory=dict)

    def answered(self, phones: list[str]) -> int:
        with self.lock:
            return sum(1 for phone in phones if self.sends.get(phone))

    async def _model(self, request: web.Request) -> web.Response:
        arrived, arrived_wall = time.monotonic(), time.time()
        raw = await request.read()
        body = json.loads(raw or b"{}")
        reference = REFERENCE.search(raw)
        with self.lock:
            self.model_requests.append(arrived)
            if reference is not None:
                self.model_arrived.setdefault(reference.group(1).decode(), arrived_wall)
        await asyncio.sleep(self.latency)
        payload = responses_object(ANSWER, model=str(body.get("model", "")))
        response = web.json_response(payload)
        with self.lock:
            self.model_calls += 1
            if reference is not None:
                self.model_answered.setdefault(reference.group(1).decode(), time.time())
        return response

    async def _graph(self, request: web.Request) -> web.Response:
        body = json.loads(await request.read() or b"{}")
        if body.get("status") == "read":
            with self.lock:
                self.read_wall.setdefault(str(body.get("message_id", "")), time.time())
            return web.json_response({"success": True})
        phone = body.get("to", "")
        with self.lock:
            self.sends[phone].append(time.monotonic())
            self.sent_wall.setdefault(phone, time.time())
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
    """gunicorn and the workers, started; `worker` is the first worker's main process."""

    port: int
    web: subprocess.Popen[bytes]
    workers: list[subprocess.Popen[bytes]]

    @property
    def worker(self) -> subprocess.Popen[bytes]:
        return self.workers[0]

    @property
    def worker_process(self) -> psutil.Process:
        return psutil.Process(self.worker.pid)

    def worker_processes(self) -> list[psutil.Process]:
        """Every worker's processes (a prefork pool's children too)."""
        return [each for w in self.workers for each in _tree(psutil.Process(w.pid))]


@contextmanager
def topology(
    env: Mapping[str, str],
    *,
    logs: Path,
    worker_args: tuple[str, ...] = (),
    web_workers: int = 2,
    worker_processes: int = 1,
    worker_env: Mapping[str, str] | None = None,
) -> Iterator[Topology]:
    """gunicorn and `worker_processes` times ``celery -A config worker`` (plus `worker_args`;
    a ``--hostname`` each when there are several), each with `env` (the workers' updated with
    `worker_env`) and its own application_name, until the block ends."""
    port = free_port()
    database_url = env["DATABASE_URL"]
    web_env = {**env, "DATABASE_URL": with_application_name(database_url, WEB_APP)}
    workers_env = {
        **env,
        **(worker_env or {}),
        "DATABASE_URL": with_application_name(database_url, WORKER_APP),
    }
    gunicorn = str(Path(sys.executable).with_name("gunicorn"))
    web_command = [gunicorn, "config.wsgi:application", f"--bind=127.0.0.1:{port}"]
    web_command.append(f"--workers={web_workers}")
    worker_command = [sys.executable, "-m", "celery", "-A", "config", "worker", *worker_args]
    logs.mkdir(parents=True, exist_ok=True)
    workers: list[subprocess.Popen[bytes]] = []
    with (logs / "web.log").open("a") as web_log, (logs / "worker.log").open("a") as worker_log:
        web = subprocess.Popen(web_command, cwd=ROOT, env=web_env, stdout=web_log, stderr=web_log)
        for n in range(worker_processes):
            hostname = [f"--hostname=bench{n}@%h"] if worker_processes > 1 else []
            workers.append(
                subprocess.Popen(
                    [*worker_command, *hostname],
                    cwd=ROOT,
                    env=workers_env,
                    stdout=worker_log,
                    stderr=worker_log,
                )
            )
    try:
        deadline = time.monotonic() + 60
        while not healthy(port):
            if time.monotonic() > deadline:
                raise RuntimeError(f"gunicorn did not answer; see {logs / 'web.log'}")
            time.sleep(0.2)
        yield Topology(port=port, web=web, workers=workers)
    finally:
        for process in (*workers, web):
            process.terminate()
        for process in (*workers, web):
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
        "worker": _cpu_seconds(topo.worker_processes()),
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


def steady_schedule(*, rate: float, duration: float) -> list[float]:
    """When each POST of a steady run is due, seconds from its start: one every ``1 / rate`` s
    for ``duration`` s (the first at 0; a rate of 0 posts nothing)."""
    if rate <= 0 or duration <= 0:
        return []
    return [n / rate for n in range(math.ceil(rate * duration - 1e-9))]


def quantile(values: list[float], q: float) -> float:
    """The nearest-rank `q`-quantile of `values` (the smallest value with at least ``q`` of
    them at or below it); NaN when there are none."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def _ms(values: list[float]) -> str:
    """p50 / p99 of `values` (seconds) in whole milliseconds."""
    if not values:
        return "-"
    return f"{quantile(values, 0.5) * 1000:,.0f} / {quantile(values, 0.99) * 1000:,.0f}"


@dataclass(frozen=True)
class SteadyRun:
    """One rate's run: the customers posted and answered, and per customer (seconds) "in", from
    the POST's send to the model request at the fake, and "out", from the model's answer to the
    send at the fake Graph API."""

    rate: float
    posted: int
    answered: int
    duplicates: int
    inbound: list[float]
    outbound: list[float]
    poster_lag: float  # the latest a POST left after it was due, seconds
    cpu_share: dict[str, float]  # of one core, per part, over the run
    detail: str = ""

    def line(self) -> str:
        shares = ", ".join(f"{name} {share:.0%}" for name, share in self.cpu_share.items())
        return (
            f"| {self.rate:g} | {self.answered}/{self.posted} | {_ms(self.inbound)} | "
            f"{_ms(self.outbound)} | {self.poster_lag * 1000:.0f} | {shares} |"
        )


STEADY_HEADER = (
    "| new customers/s | answered | in p50 / p99 ms | out p50 / p99 ms | poster lag max ms "
    "| CPU, share of one core |\n|---|---|---|---|---|---|"
)


@dataclass(frozen=True)
class Posted:
    """What the posters saw: per POST the wall-clock time it was sent and its response read, and
    its status; the latest a POST left after it was due (s), and the posters' CPU seconds."""

    sent: list[float]
    done: list[float]
    statuses: list[int]
    lag: float
    cpu: float


def post_steadily(port: int, bodies: list[bytes], offsets: list[float]) -> Posted:
    """POST each body at its offset from now (open loop: a slow server does not delay the next
    POST), each on a new connection as Meta's deliveries come, from a process of its own (spawned:
    the fakes' event loop and the posters' never wait on each other's GIL)."""
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=1, mp_context=spawn) as posters:
        # The child's start-up (imports) is not on the schedule: it starts counting when ready.
        return posters.submit(_post_in_this_process, port, bodies, offsets).result()


def _post_in_this_process(port: int, bodies: list[bytes], offsets: list[float]) -> Posted:
    import aiohttp

    sent = [0.0] * len(bodies)
    done = [0.0] * len(bodies)
    statuses = [0] * len(bodies)
    url = f"http://127.0.0.1:{port}{WEBHOOK_PATH}"
    headers = [
        {
            "Content-Type": "application/json",
            "X-Hub-Signature-256": compute_signature(body=body, secret=APP_SECRET),
        }
        for body in bodies
    ]

    async def run() -> float:
        loop = asyncio.get_running_loop()
        connector = aiohttp.TCPConnector(limit=0, force_close=True)
        timeout = aiohttp.ClientTimeout(total=120)
        lag = 0.0
        async with aiohttp.ClientSession(connector=connector, timeout=timeout) as client:
            start = loop.time() + 0.1

            async def one(n: int) -> None:
                nonlocal lag
                await asyncio.sleep(max(0.0, start + offsets[n] - loop.time()))
                lag = max(lag, loop.time() - start - offsets[n])
                sent[n] = time.time()
                try:
                    async with client.post(url, data=bodies[n], headers=headers[n]) as response:
                        await response.read()
                        statuses[n] = response.status
                except (aiohttp.ClientError, TimeoutError):
                    statuses[n] = 0
                done[n] = time.time()

            await asyncio.gather(*(one(n) for n in range(len(bodies))))
        return lag

    cpu = time.process_time()
    lag = asyncio.run(run())
    return Posted(sent, done, statuses, lag, time.process_time() - cpu)


def _signal_workers(topo: Topology) -> None:
    for worker in topo.workers:
        worker.send_signal(signal.SIGUSR2)


def _pool_line(path: Path | None, since: float) -> str:
    """The workers' connection pools over the run: requests, how many waited, their mean wait."""
    if path is None or not path.exists():
        return ""
    requests = waiting = wait_ms = 0
    for line in path.read_text().splitlines():
        event = json.loads(line)
        if event["e"] == "pool" and event["t"] >= since:
            stats = event["stats"]
            requests += stats.get("requests_num", 0)
            waiting += stats.get("requests_queued", 0)
            wait_ms += stats.get("requests_wait_ms", 0)
    return (
        f"  connection pools: {requests} requests, {waiting} queued for a connection,"
        f" {wait_ms / max(requests, 1):.1f} ms waited per request"
    )


def _probe_events(path: Path | None, sessions: set[int]) -> dict[str, dict[int, list[float]]]:
    """The probe's events of these sessions: kind -> session -> [start, end] (the first)."""
    events: dict[str, dict[int, list[float]]] = defaultdict(dict)
    if path is None or not path.exists():
        return events
    for line in path.read_text().splitlines():
        event = json.loads(line)
        if event["s"] in sessions:
            events[event["e"]].setdefault(event["s"], [event["t"], event["u"] or event["t"]])
    return events


def _sessions_by_wamid(dsn: str, wamids: list[str]) -> dict[str, int]:
    # The bench's own process runs no Django (it drives the system from outside, as its
    # pg_stat_activity sampler does): it reads the sessions of the replies it saw with psycopg.
    with psycopg.connect(dsn, autocommit=True, application_name=SAMPLER_APP) as conn:
        rows = conn.execute(
            "SELECT wa_message_id, session_id FROM conversations_message"
            " WHERE wa_message_id = ANY(%s)",
            [wamids],
        ).fetchall()
    return {wamid: session for wamid, session in rows}


def run_steady(
    *,
    fakes: Fakes,
    topo: Topology,
    dsn: str,
    rate: float,
    duration: float,
    latency: float,
    detail: bool = False,
    probe: Path | None = None,
) -> SteadyRun:
    """New customers each sending a first message at `rate` a second for `duration` s; wait
    for every answer (at most a minute past the last POST)."""
    fakes.latency = latency
    offsets = steady_schedule(rate=rate, duration=duration)
    batch = uuid4().int % 10**6
    references = [uuid4().hex[:12] for _ in offsets]
    phones = [f"55219{batch:06d}{n:04d}" for n in range(len(offsets))]
    wamids = [f"wamid.LAT{uuid4().hex}" for _ in offsets]
    bodies = [
        text_delivery(phone=phone, wamid=wamid, text=f"Oi, bom dia! LATREF{reference}")
        for phone, wamid, reference in zip(phones, wamids, references, strict=True)
    ]
    if probe is not None:
        _signal_workers(topo)  # the pools' statistics start again from here
    parts_before = cpu_by_part(topo)
    started = time.time()
    posted = post_steadily(topo.port, bodies, offsets)
    sent, done = posted.sent, posted.done
    if set(posted.statuses) != {200}:
        raise RuntimeError(f"the webhook answered {sorted(set(posted.statuses))}")
    deadline = time.monotonic() + 60
    while fakes.answered(phones) < len(phones) and time.monotonic() < deadline:
        time.sleep(0.05)
    ended = time.time()
    parts = cpu_by_part(topo)
    if probe is not None:
        _signal_workers(topo)
        time.sleep(0.2)  # the workers write their pools' statistics
    time.sleep(0.5)  # a duplicate send would come now
    window = ended - started
    cpu_share = {name: (parts[name] - parts_before[name]) / window for name in parts}
    cpu_share["posters"] = posted.cpu / window
    with fakes.lock:
        arrived = [fakes.model_arrived.get(r) for r in references]
        answered_at = [fakes.model_answered.get(r) for r in references]
        sent_at = [fakes.sent_wall.get(p) for p in phones]
        read_at = [fakes.read_wall.get(w) for w in wamids]
        duplicates = sum(max(0, len(fakes.sends.get(p, [])) - 1) for p in phones)
        answered = sum(1 for p in phones if fakes.sends.get(p))
    inbound = [a - s for a, s in zip(arrived, sent, strict=True) if a is not None]
    outbound = [
        g - a for a, g in zip(answered_at, sent_at, strict=True) if a is not None and g is not None
    ]
    lines = ""
    if detail:
        sessions = _sessions_by_wamid(dsn, wamids)
        events = _probe_events(probe, set(sessions.values()))

        def spans(first: Callable[[int, int], float | None]) -> list[float]:
            values = []
            for n, wamid in enumerate(wamids):
                session = sessions.get(wamid)
                if session is None:
                    continue
                value = first(n, session)
                if value is not None:
                    values.append(value)
            return values

        def at(kind: str, session: int, end: int = 0) -> float | None:
            span = events[kind].get(session)
            return None if span is None else span[end]

        def gap(a: float | None, b: float | None) -> float | None:
            return None if a is None or b is None else b - a

        rows = {
            "the POST (web queue and webhook, until its response)": spans(
                lambda n, _s: done[n] - sent[n]
            ),
            "the response to the task's start (Celery pickup)": spans(
                lambda n, s: gap(done[n], at("pickup", s))
            ),
            "the task's start to the turn's thinking (lease, reads, receipt handed off)": spans(
                lambda _n, s: gap(at("pickup", s), at("think", s))
            ),
            "thinking to the model request (prompt, model client)": spans(
                lambda n, s: gap(at("think", s), arrived[n])
            ),
            "the model's answer to the commit (parse, call record)": spans(
                lambda n, s: gap(answered_at[n], at("commit", s))
            ),
            "the commit's start to the send's (the turn's DB writes)": spans(
                lambda _n, s: gap(at("commit", s), at("send", s))
            ),
            "the send's start to the Graph API": spans(lambda n, s: gap(at("send", s), sent_at[n])),
            "the send's whole call (request and the wamid's store)": spans(
                lambda _n, s: gap(at("send", s), at("send", s, 1))
            ),
            "the POST's send to the read receipt at the Graph API": spans(
                lambda n, _s: gap(sent[n], read_at[n])
            ),
        }
        lines = "\n".join(f"  {name}: p50 / p99 {_ms(values)} ms" for name, values in rows.items())
        lines += "\n" + _pool_line(probe, ended)
    return SteadyRun(
        rate=rate,
        posted=len(offsets),
        answered=answered,
        duplicates=duplicates,
        inbound=inbound,
        outbound=outbound,
        poster_lag=posted.lag,
        cpu_share=cpu_share,
        detail=lines,
    )


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


def steady_main(args: argparse.Namespace) -> None:
    """The steady mode: one topology, then each rate in turn (see the module docstring)."""
    database_url = os.environ.get("DATABASE_URL", DEFAULT_DATABASE_URL)
    ensure_database(database_url, script="bench/latency.py")
    dsn = libpq_dsn(database_url)
    logs = Path(os.environ.get("LATENCY_LOGS", "/tmp/latency-bench"))
    logs.mkdir(parents=True, exist_ok=True)
    rates = [float(value) for value in args.rates.split(",")]
    probe = logs / f"probe-{os.getpid()}.jsonl" if args.detail else None
    worker_env = (
        {"DJANGO_SETTINGS_MODULE": "bench.latency_settings", "LATENCY_PROBE": str(probe)}
        if probe is not None
        else {}
    )
    runs: list[SteadyRun] = []
    redis_server = ThrowawayRedis().start()
    try:
        with fakes_running() as fakes:
            env = bench_env(database_url=database_url, broker=redis_server.url(), fakes=fakes)
            prepare_database(env)
            with topology(
                env,
                logs=logs,
                web_workers=args.web_workers,
                worker_processes=args.worker_processes,
                worker_env=worker_env,
            ) as topo:
                run_round(label="warm-up", fakes=fakes, topo=topo, dsn=dsn, latency=0,
                          customers=10)  # fmt: skip
                print(
                    f"{args.worker_processes} worker process(es), {args.web_workers} gunicorn"
                    f" workers, model {args.latency:g} s, {args.duration:g} s per rate\n"
                    + STEADY_HEADER
                )
                for rate in rates:
                    load = os.getloadavg()[0]
                    run = run_steady(
                        fakes=fakes,
                        topo=topo,
                        dsn=dsn,
                        rate=rate,
                        duration=args.duration,
                        latency=args.latency,
                        detail=args.detail,
                        probe=probe,
                    )
                    runs.append(run)
                    print(f"{run.line()} load {load:.2f}")
                    if run.detail:
                        print(run.detail)
                    sys.stdout.flush()
                    time.sleep(2)  # the previous rate's stragglers (receipts) settle
    finally:
        redis_server.stop()
        if probe is not None:
            probe.unlink(missing_ok=True)
    load3 = os.getloadavg()
    print(f"\nload average at the end: {load3[0]:.2f} {load3[1]:.2f} {load3[2]:.2f} "
          f"({os.cpu_count()} cores); logs in {logs}")  # fmt: skip
    bad = [r for r in runs if r.answered != r.posted or r.duplicates]
    if bad:
        print("customers without exactly one answer at:", ", ".join(f"{r.rate:g}/s" for r in bad))
        sys.exit(1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--customers", type=int, default=100)
    parser.add_argument("--latencies", default="0,0.5,1,2", help="model latencies, seconds")
    parser.add_argument(
        "--web-workers",
        type=int,
        default=None,
        help="gunicorn's sync workers: 2 for the rounds, 4 in the steady mode (the deploy files')",
    )
    parser.add_argument("--no-solo", action="store_true", help="skip the solo baseline")
    parser.add_argument(
        "--detail", action="store_true", help="the round's timeline and CPU per part, too"
    )
    parser.add_argument(
        "--rates", default="", help="steady mode: new customers per second, e.g. 5,10,20,40"
    )
    parser.add_argument("--duration", type=float, default=20, help="steady mode: s per rate")
    parser.add_argument("--latency", type=float, default=1.0, help="steady mode: model s")
    parser.add_argument(
        "--worker-processes", type=int, default=1, help="steady mode: worker processes"
    )
    args = parser.parse_args()
    if args.rates:
        args.web_workers = args.web_workers or STEADY_WEB_WORKERS
        steady_main(args)
        return
    args.web_workers = args.web_workers or 2
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
