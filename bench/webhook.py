"""Benchmark of the WhatsApp webhook against the two floors, served by gunicorn on PostgreSQL.

    .venv/bin/python bench/webhook.py [--driver wrk|python] [--rounds 5] [--seconds 4]
                                      [--concurrency 6] [--workers 3] [--port 8765]
                                      [--at-fraction 0.8] [--rate N]

Environment: DATABASE_URL (default ``postgres://postgres@127.0.0.1:5432/lab_attendance_webhook_
bench``, created and migrated when missing) and CELERY_BROKER_URL (default
``redis://127.0.0.1:6379/8``; the turns the webhook enqueues go to that real Redis, no worker is
needed, and the Redis database is emptied before and after the run).

It starts gunicorn (sync workers) with ``bench/webhook_settings.py``: the project plus two views,
``/bench/bare/`` (answers 200, no work) and ``/bench/durable/`` (stores the raw body with one
committed INSERT). Each endpoint gets the same kind of body — a signed single text message from
one of 300 customers, a unique wamid per request, each customer's messages one second apart —
from a fixed number of concurrent connections, after an unmeasured warm-up, in rounds that
alternate the three endpoints. The driver is wrk (``apt-get install wrk``; one thread, a Lua
script cycling through pre-signed bodies loaded from a file, timed rounds), else this process
(threads with http.client, a fixed number of requests): wrk costs about 0.1 ms of CPU per
request against 0.3 ms, and on a 2-core machine the driver's CPU is taken from the server.

It prints requests per second, p50 and p99 for the three endpoints, the CPU per request of the
server (gunicorn's processes), of the driver and of the rest of the machine (PostgreSQL, Redis,
any neighbour), and the webhook's throughput relative to the durable floor.

Saturated, a closed loop's p99 is mostly queueing, so the latency floor is judged below
saturation: with wrk, ``--at-fraction 0.8`` then drives the webhook open-loop at 0.8 times the
rate it saturated at (``--rate N``: at N requests per second), a Lua script pacing the requests
on a fixed schedule over ``--paced-connections`` connections, and prints the rate reached, p50
and p99. Targets: webhook >= 0.5x the durable floor, p99 <= 50 ms at 80% of its saturated rate.
"""

import argparse
import http.client
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.support import ensure_database  # noqa: E402
from whatsapp.signature import compute_signature  # noqa: E402 (pure module)

DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/lab_attendance_webhook_bench"
DEFAULT_BROKER_URL = "redis://127.0.0.1:6379/8"
APP_SECRET = "bench-only-app-secret"
PHONE_NUMBER_ID = "100000000000001"
CUSTOMERS = 300
WARMUP_REQUESTS = 300
WARMUP_SECONDS = 2.0
ENDPOINTS = (
    ("bare view (floor)", "/bench/bare/"),
    ("durable INSERT (floor)", "/bench/durable/"),
    ("webhook", "/webhooks/whatsapp/"),
)


@dataclass(frozen=True)
class Result:
    name: str
    requests: int
    errors: int
    seconds: float
    latencies_ms: list[float]
    # CPU seconds spent during the run: gunicorn (master and workers), this driver, and the rest
    # of the machine (PostgreSQL, Redis, and any neighbour).
    cpu: "Cpu"

    @property
    def per_second(self) -> float:
        return self.requests / self.seconds

    def cpu_ms(self, seconds: float) -> float:
        return seconds * 1000 / max(self.requests, 1)

    def percentile(self, fraction: float) -> float:
        ordered = sorted(self.latencies_ms)
        return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


@dataclass(frozen=True)
class Cpu:
    server: float = 0.0
    driver: float = 0.0
    rest: float = 0.0

    def __add__(self, other: "Cpu") -> "Cpu":
        return Cpu(self.server + other.server, self.driver + other.driver, self.rest + other.rest)


_TICK = os.sysconf("SC_CLK_TCK")


def _process_tree_cpu(pid: int) -> float:
    """utime + stime of a process and its children (gunicorn's workers), in seconds."""
    total = 0.0
    pending = [pid]
    while pending:
        current = pending.pop()
        try:
            stat = Path(f"/proc/{current}/stat").read_text()
            children = Path(f"/proc/{current}/task/{current}/children").read_text().split()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / _TICK
        pending.extend(int(child) for child in children)
    return total


def _machine_busy() -> float:
    """Busy CPU seconds of the whole machine (every core) since boot."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = values[3] + values[4]  # idle + iowait
    return (sum(values[:8]) - idle) / _TICK


def cpu_snapshot(server_pid: int) -> tuple[float, float, float]:
    return (_process_tree_cpu(server_pid), time.process_time(), _machine_busy())


def cpu_since(server_pid: int, before: tuple[float, float, float]) -> Cpu:
    server, driver, machine = (b - a for a, b in zip(before, cpu_snapshot(server_pid), strict=True))
    return Cpu(server, driver, max(machine - server - driver, 0.0))


def server_env(database_url: str, broker_url: str, turn_queued_ttl: int = 60) -> dict[str, str]:
    return os.environ | {
        "TURN_QUEUED_TTL_SECONDS": str(turn_queued_ttl),
        "DATABASE_URL": database_url,
        "CELERY_BROKER_URL": broker_url,
        "ENV_FILE": "/nonexistent/.env",
        "DEBUG": "False",
        "SECRET_KEY": "bench-only-secret-key",
        "WHATSAPP_APP_SECRET": APP_SECRET,
        "FIELD_ENCRYPTION_KEYS": "YmVuY2gtb25seS1maWVsZC1lbmNyeXB0aW9uLWtleSE=",
        "WHATSAPP_VERIFY_TOKEN": "bench-verify-token",
        "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'bench'}",
        "DJANGO_SETTINGS_MODULE": "webhook_settings",
    }


def prepare_database(env: dict[str, str]) -> None:
    python = sys.executable
    subprocess.run(
        [python, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=ROOT, env=env, check=True
    )
    setup = (
        "import django; django.setup();"
        "from conversations.models import Instance;"
        f"Instance.objects.update_or_create(phone_number_id='{PHONE_NUMBER_ID}',"
        "defaults={'name': 'Bench', 'is_active': True});"
        # Before any message of this run (see `signed_bodies`), and not idle.
        "from datetime import timedelta; from django.utils import timezone;"
        "from conversations.models import Session;"
        "before = timezone.now() - timedelta(hours=2);"
        f"Session.objects.filter(instance__phone_number_id='{PHONE_NUMBER_ID}')"
        ".update(last_message_at=before, last_inbound_at=before, turn_queued_at=None)"
    )
    subprocess.run([python, "-c", setup], cwd=ROOT, env=env, check=True)


def empty_broker(broker_url: str) -> None:
    import redis

    redis.Redis.from_url(broker_url).flushdb()


def queued_tasks(broker_url: str) -> int:
    """Tasks waiting in Celery's default queue (no worker runs during the bench)."""
    import redis

    return int(redis.Redis.from_url(broker_url).llen("celery"))


def signed_bodies(count: int, run: str, offset: int = 0) -> list[tuple[bytes, str]]:
    """Signed single-message deliveries with unique wamids, built before any timing.

    The customers take turns, and each one's messages are one second apart, in the last hour
    (`prepare_database` puts the sessions' times before it): every delivery moves its session's
    times forward, as real traffic does, so the session update is a real one — a new row version
    in each of the session's indexes — not a rewrite of unchanged values.
    """
    first = int(time.time()) - 3600
    bodies = []
    for n in range(offset, offset + count):
        phone = f"55119{n % CUSTOMERS:08d}"
        message = {
            "from": phone,
            "id": f"wamid.BENCH.{run}.{n}",
            "timestamp": str(first + n // CUSTOMERS),
            "type": "text",
            "text": {"body": "Olá, gostaria de um orçamento de análise de água."},
        }
        value = {
            "messaging_product": "whatsapp",
            "metadata": {
                "display_phone_number": "5511999990000",
                "phone_number_id": PHONE_NUMBER_ID,
            },
            "contacts": [{"profile": {"name": f"Cliente {n % CUSTOMERS}"}, "wa_id": phone}],
            "messages": [message],
        }
        document = {
            "object": "whatsapp_business_account",
            "entry": [
                {"id": "200000000000001", "changes": [{"value": value, "field": "messages"}]}
            ],
        }
        body = json.dumps(document).encode()
        bodies.append((body, compute_signature(body=body, secret=APP_SECRET)))
    return bodies


def start_server(
    env: dict[str, str], port: int, workers: int, log: Path
) -> subprocess.Popen[bytes]:
    gunicorn = str(Path(sys.executable).with_name("gunicorn"))
    command = [
        gunicorn,
        "config.wsgi:application",
        f"--bind=127.0.0.1:{port}",
        f"--workers={workers}",
        "--worker-class=sync",
        "--keep-alive=30",
        "--log-level=warning",
    ]
    with log.open("w") as stream:
        server = subprocess.Popen(command, cwd=ROOT, env=env, stdout=stream, stderr=stream)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            connection.request("GET", "/healthz")
            if connection.getresponse().status == 200:
                return server
        except OSError:
            time.sleep(0.2)
    server.terminate()
    sys.exit(f"gunicorn did not start; see {log}")


def drive(
    port: int,
    path: str,
    bodies: list[tuple[bytes, str]],
    concurrency: int,
    duration: float,
    server_pid: int,
) -> Result:
    pending = iter(bodies)
    lock = threading.Lock()
    latencies: list[float] = []
    statuses: Counter[int] = Counter()
    start = time.perf_counter()
    deadline = start + duration

    def client() -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        while time.perf_counter() < deadline:
            with lock:
                item = next(pending, None)
            if item is None:
                break
            body, signature = item
            headers = {"Content-Type": "application/json", "X-Hub-Signature-256": signature}
            sent = time.perf_counter()
            connection.request("POST", path, body=body, headers=headers)
            response = connection.getresponse()
            response.read()
            elapsed = time.perf_counter() - sent
            with lock:
                latencies.append(elapsed * 1000)
                statuses[response.status] += 1
        connection.close()

    threads = [threading.Thread(target=client) for _ in range(concurrency)]
    cpu_before = cpu_snapshot(server_pid)
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - start
    cpu = cpu_since(server_pid, cpu_before)
    errors = sum(count for status, count in statuses.items() if status != 200)
    return Result(path, len(latencies), errors, seconds, latencies, cpu)


WRK_SCRIPT = """
local signatures, bodies, next_body = {}, {}, 0

function init(args)
  for line in io.lines(args[1]) do
    local tab = line:find("\\t", 1, true)
    signatures[#signatures + 1] = line:sub(1, tab - 1)
    bodies[#bodies + 1] = line:sub(tab + 1)
  end
end

function request()
  next_body = next_body + 1
  if next_body > #bodies then
    next_body = 1  -- never reached: the driver writes more bodies than a round can send
  end
  return wrk.format("POST", nil, {
    ["Content-Type"] = "application/json",
    ["X-Hub-Signature-256"] = signatures[next_body],
  }, bodies[next_body])
end

function done(summary, latency, requests)
  local errors = summary.errors
  io.write(string.format("RESULT %d %d %d %.3f %.3f\\n", summary.requests,
    errors.status + errors.connect + errors.read + errors.write + errors.timeout,
    summary.duration, latency:percentile(50) / 1000, latency:percentile(99) / 1000))
end
"""


# Paces the requests of `WRK_SCRIPT` on one schedule (args[2] requests per second) shared by the
# connections of wrk's one thread: each request waits for its slot (wrk's ``delay`` hook, in
# whole milliseconds). A server that falls behind finds the connections busy: the rate reached,
# printed beside the target, then says so.
WRK_PACING = """
local ffi = require("ffi")
ffi.cdef[[
typedef struct { long sec; long usec; } bench_timeval;
int gettimeofday(bench_timeval *tv, void *tz);
]]
local clock, interval, next_slot = ffi.new("bench_timeval"), nil, nil

local function now_ms()
  ffi.C.gettimeofday(clock, nil)
  return tonumber(clock.sec) * 1000 + tonumber(clock.usec) / 1000
end

local load_bodies = init
function init(args)
  load_bodies(args)
  interval = 1000 / tonumber(args[2])
end

function delay()
  local now = now_ms()
  next_slot = (next_slot or now) + interval
  return math.max(0, next_slot - now)
end
"""


def drive_wrk(
    port: int,
    path: str,
    bodies: list[tuple[bytes, str]],
    concurrency: int,
    duration: float,
    server_pid: int,
    rate: float | None = None,
) -> Result:
    """One wrk run (one thread, `concurrency` connections, `duration` seconds) cycling through
    `bodies`, pre-signed and loaded from a file by a Lua script: the driver costs a few
    hundredths of a millisecond of CPU per request, against about 0.3 ms for the Python driver,
    so the two cores go to the server. wrk reports percentiles, not each latency: a result
    carries [p50, p99] as its latencies, and `combine` takes the median p50 and the highest p99
    of the rounds."""
    workdir = Path(f"/tmp/bench-webhook-wrk-{os.getpid()}")
    workdir.mkdir(exist_ok=True)
    script = workdir / "deliveries.lua"
    script.write_text(WRK_SCRIPT if rate is None else WRK_SCRIPT + WRK_PACING)
    data = workdir / "deliveries.tsv"
    data.write_bytes(b"".join(sig.encode() + b"\t" + body + b"\n" for body, sig in bodies))
    command = [
        "wrk",
        "-t1",
        f"-c{concurrency}",
        f"-d{max(1, round(duration))}s",
        "--timeout=30s",
        f"-s{script}",
        f"http://127.0.0.1:{port}{path}",
        "--",
        str(data),
        *([] if rate is None else [f"{rate:.1f}"]),
    ]
    cpu_before = cpu_snapshot(server_pid)
    children_before = os.times()
    output = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    children_after = os.times()
    cpu = cpu_since(server_pid, cpu_before)
    wrk_cpu = sum(
        after - before
        for before, after in zip(children_before[2:4], children_after[2:4], strict=True)
    )
    # The driver's CPU is wrk's (a child process), not this process's.
    cpu = Cpu(cpu.server, wrk_cpu, max(cpu.rest + cpu.driver - wrk_cpu, 0.0))
    line = next(line for line in output.splitlines() if line.startswith("RESULT "))
    requests, errors, micros, p50, p99 = line.split()[1:]
    return Result(
        path, int(requests), int(errors), int(micros) / 1e6, [float(p50), float(p99)], cpu
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--driver",
        choices=("wrk", "python"),
        default="wrk" if shutil.which("wrk") else "python",
        help="load driver (default: wrk when installed)",
    )
    parser.add_argument(
        "--requests", type=int, default=2000, help="python: measured requests per endpoint"
    )
    parser.add_argument(
        "--duration", type=float, default=60.0, help="python: time cap per endpoint (s)"
    )
    parser.add_argument("--seconds", type=float, default=4.0, help="wrk: seconds per round")
    parser.add_argument(
        "--max-rate", type=int, default=4000, help="wrk: bodies prepared per second of a round"
    )
    parser.add_argument("--concurrency", type=int, default=6, help="concurrent connections")
    parser.add_argument("--workers", type=int, default=3, help="gunicorn sync workers")
    parser.add_argument("--rounds", type=int, default=5, help="alternations of the endpoints")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument(
        "--at-fraction",
        type=float,
        default=None,
        help="wrk: then drive the webhook open-loop at this fraction of its saturated rate",
    )
    parser.add_argument(
        "--rate", type=float, default=None, help="wrk: the open-loop rate (requests per second)"
    )
    parser.add_argument(
        "--paced-connections", type=int, default=32, help="wrk: connections of the paced rounds"
    )
    parser.add_argument(
        "--turn-queued-ttl",
        type=int,
        default=60,
        help="the server's TURN_QUEUED_TTL_SECONDS; 0: every delivery publishes its turn",
    )
    args = parser.parse_args()
    paced = args.at_fraction is not None or args.rate is not None
    if paced and args.driver != "wrk":
        parser.error("--at-fraction and --rate need --driver wrk")

    database_url = os.environ.get("DATABASE_URL", DEFAULT_DATABASE_URL)
    broker_url = os.environ.get("CELERY_BROKER_URL", DEFAULT_BROKER_URL)
    env = server_env(database_url, broker_url, args.turn_queued_ttl)
    ensure_database(database_url, script="bench/webhook.py")
    prepare_database(env)
    empty_broker(broker_url)
    run = uuid.uuid4().hex[:8]
    log = Path("/tmp") / f"bench-webhook-{run}.log"
    if args.driver == "wrk":
        # Bodies are built per run of wrk (unmeasured), each endpoint its own unique wamids.
        per_run = int(args.max_rate * args.seconds)
        warmup_bodies = int(args.max_rate * WARMUP_SECONDS)
    else:
        per_run = args.requests // args.rounds
        warmup_bodies = WARMUP_REQUESTS
    next_body = 0

    def bodies(count: int) -> list[tuple[bytes, str]]:
        nonlocal next_body
        next_body += count
        return signed_bodies(count, run, offset=next_body - count)

    def one_run(path: str, chunk: list[tuple[bytes, str]], warmup: bool) -> Result:
        if args.driver == "wrk":
            seconds = WARMUP_SECONDS if warmup else args.seconds
            return drive_wrk(args.port, path, chunk, args.concurrency, seconds, server.pid)
        cap = args.duration if warmup else args.duration / args.rounds
        return drive(args.port, path, chunk, args.concurrency, cap, server.pid)

    server = start_server(env, args.port, args.workers, log)
    measured: dict[str, list[Result]] = {name: [] for name, _ in ENDPOINTS}
    enqueued = 0
    try:
        for _name, path in ENDPOINTS:
            one_run(path, bodies(warmup_bodies), warmup=True)
        # Rounds alternate the endpoints, so a neighbour's load on this shared machine weighs on
        # the three alike.
        for _round in range(args.rounds):
            for name, path in ENDPOINTS:
                before = queued_tasks(broker_url)
                measured[name].append(one_run(path, bodies(per_run), warmup=False))
                enqueued += queued_tasks(broker_url) - before
        if paced:
            saturated = combine("webhook", measured["webhook"], args.driver).per_second
            rate = args.rate or saturated * args.at_fraction
            paced_rounds = [
                drive_wrk(
                    args.port,
                    "/webhooks/whatsapp/",
                    bodies(int(rate * args.seconds * 1.5)),
                    args.paced_connections,
                    args.seconds,
                    server.pid,
                    rate=rate,
                )
                for _round in range(args.rounds)
            ]
    finally:
        server.terminate()
        server.wait(timeout=30)
        empty_broker(broker_url)
    results = [combine(name, measured[name], args.driver) for name, _ in ENDPOINTS]

    load = (
        f"wrk, {args.rounds} alternating rounds of {args.seconds:.0f} s per endpoint"
        if args.driver == "wrk"
        else f"Python driver, {args.requests} requests per endpoint in {args.rounds} "
        f"alternating rounds (cap {args.duration:.0f} s)"
    )
    print(
        f"gunicorn {args.workers} sync workers, {args.concurrency} connections, {load}, "
        "PostgreSQL + Redis"
    )
    print(
        f"{'endpoint':<24} {'requests':>8} {'errors':>6} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8}"
        f" {'CPU ms per request: server':>27} {'driver':>6} {'rest':>6}"
    )
    for result in results:
        print(
            f"{result.name:<24} {result.requests:>8} {result.errors:>6} {result.per_second:>8.0f} "
            f"{result.p50:>8.1f} {result.p99:>8.1f}"
            f" {result.cpu_ms(result.cpu.server):>27.2f} {result.cpu_ms(result.cpu.driver):>6.2f}"
            f" {result.cpu_ms(result.cpu.rest):>6.2f}"
        )
    durable, webhook = results[1], results[2]
    print(
        f"turns enqueued by the measured webhook deliveries: {enqueued} of {webhook.requests} "
        f"(TURN_QUEUED_TTL_SECONDS={args.turn_queued_ttl}; no worker runs, so a session's "
        "queued turn stays queued, as under a backlog)"
    )
    ratio = webhook.per_second / durable.per_second
    print(
        f"webhook / durable floor: {ratio:.2f}x (target >= 0.5x);"
        f" saturated p99 {webhook.p99:.1f} ms"
    )
    if paced:
        below = combine("webhook, paced", paced_rounds, args.driver)
        print(
            f"webhook open-loop at {rate:.0f} req/s"
            + ("" if args.rate else f" ({args.at_fraction:.0%} of {saturated:.0f})")
            + f", {args.paced_connections} connections: reached {below.per_second:.0f} req/s,"
            f" errors {below.errors}, p50 {below.p50:.1f} ms, p99 {below.p99:.1f} ms"
            f" (target <= 50 ms), server CPU {below.cpu_ms(below.cpu.server):.2f} ms per request"
        )


@dataclass(frozen=True)
class Summary:
    name: str
    requests: int
    errors: int
    seconds: float
    p50: float
    p99: float
    cpu: Cpu

    @property
    def per_second(self) -> float:
        return self.requests / self.seconds

    def cpu_ms(self, seconds: float) -> float:
        return seconds * 1000 / max(self.requests, 1)


def combine(name: str, rounds: list[Result], driver: str) -> Summary:
    """The rounds of one endpoint: requests over seconds; with the Python driver the exact
    percentiles of every latency, with wrk (percentiles per round only) the median p50 and the
    highest p99 of the rounds."""
    if driver == "wrk":
        p50 = statistics.median(r.latencies_ms[0] for r in rounds)
        p99 = max(r.latencies_ms[1] for r in rounds)
    else:
        every = Result(name, 0, 0, 1.0, [ms for r in rounds for ms in r.latencies_ms], Cpu())
        p50, p99 = every.percentile(0.50), every.percentile(0.99)
    return Summary(
        name,
        sum(r.requests for r in rounds),
        sum(r.errors for r in rounds),
        sum(r.seconds for r in rounds),
        p50,
        p99,
        sum((r.cpu for r in rounds), Cpu()),
    )


if __name__ == "__main__":
    main()
