"""Benchmark of the WhatsApp webhook against the two floors, served by gunicorn on PostgreSQL.

    .venv/bin/python bench/webhook.py [--requests 2000] [--duration 60] [--concurrency 6]
                                      [--workers 3] [--port 8765]

Environment: DATABASE_URL (default ``postgres://postgres@127.0.0.1:5432/lab_attendance_webhook_
bench``, created and migrated when missing) and CELERY_BROKER_URL (default
``redis://127.0.0.1:6379/8``; the turns the webhook enqueues go to that real Redis, no worker is
needed, and the Redis database is emptied before and after the run).

It starts gunicorn (sync workers) with ``bench/webhook_settings.py``: the project plus two views,
``/bench/bare/`` (answers 200, no work) and ``/bench/durable/`` (stores the raw body with one
committed INSERT). This process then drives each endpoint over loopback with the same kind of
body — a signed single text message from one of 300 customers, a unique wamid per request — with
a fixed number of requests, a fixed number of concurrent keep-alive connections and a time cap,
after an unmeasured warm-up, in rounds that alternate the three endpoints. It prints requests per
second, p50 and p99 for the three endpoints and the webhook's throughput relative to the durable
floor (target: >= 0.7x, p99 < 250 ms).
"""

import argparse
import http.client
import json
import os
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

from conversations.whatsapp.signature import compute_signature  # noqa: E402 (pure module)

DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/lab_attendance_webhook_bench"
DEFAULT_BROKER_URL = "redis://127.0.0.1:6379/8"
APP_SECRET = "bench-only-app-secret"
PHONE_NUMBER_ID = "100000000000001"
CUSTOMERS = 300
WARMUP_REQUESTS = 300
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

    @property
    def per_second(self) -> float:
        return self.requests / self.seconds

    def percentile(self, fraction: float) -> float:
        ordered = sorted(self.latencies_ms)
        return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def server_env(database_url: str, broker_url: str) -> dict[str, str]:
    return os.environ | {
        "DATABASE_URL": database_url,
        "CELERY_BROKER_URL": broker_url,
        "ENV_FILE": "/nonexistent/.env",
        "DEBUG": "False",
        "SECRET_KEY": "bench-only-secret-key",
        "WHATSAPP_APP_SECRET": APP_SECRET,
        "WHATSAPP_VERIFY_TOKEN": "bench-verify-token",
        "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'bench'}",
        "DJANGO_SETTINGS_MODULE": "webhook_settings",
    }


def ensure_database(database_url: str) -> None:
    import environ
    import psycopg
    from psycopg import sql

    config = environ.Env.db_url_config(database_url)
    if config["ENGINE"] != "django.db.backends.postgresql":
        sys.exit("bench/webhook.py needs DATABASE_URL=postgres://...")
    with psycopg.connect(
        host=config["HOST"] or None,
        port=config["PORT"] or None,
        user=config["USER"] or None,
        password=config["PASSWORD"] or None,
        dbname="postgres",
        autocommit=True,
    ) as conn:
        found = conn.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", [config["NAME"]]
        ).fetchone()
        if not found:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(config["NAME"])))


def prepare_database(env: dict[str, str]) -> None:
    python = sys.executable
    subprocess.run(
        [python, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=ROOT, env=env, check=True
    )
    setup = (
        "import django; django.setup();"
        "from conversations.models import Instance;"
        f"Instance.objects.update_or_create(phone_number_id='{PHONE_NUMBER_ID}',"
        "defaults={'name': 'Bench', 'is_active': True})"
    )
    subprocess.run([python, "-c", setup], cwd=ROOT, env=env, check=True)


def empty_broker(broker_url: str) -> None:
    import redis

    redis.Redis.from_url(broker_url).flushdb()


def signed_bodies(count: int, run: str) -> list[tuple[bytes, str]]:
    """Signed single-message deliveries with unique wamids, built before any timing."""
    now = str(int(time.time()))
    bodies = []
    for n in range(count):
        phone = f"55119{n % CUSTOMERS:08d}"
        message = {
            "from": phone,
            "id": f"wamid.BENCH.{run}.{n}",
            "timestamp": now,
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


def start_server(env: dict[str, str], port: int, workers: int, log: Path) -> subprocess.Popen:
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
    port: int, path: str, bodies: list[tuple[bytes, str]], concurrency: int, duration: float
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
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - start
    errors = sum(count for status, count in statuses.items() if status != 200)
    return Result(path, len(latencies), errors, seconds, latencies)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000, help="measured requests per endpoint")
    parser.add_argument("--duration", type=float, default=60.0, help="time cap per endpoint (s)")
    parser.add_argument("--concurrency", type=int, default=6, help="concurrent connections")
    parser.add_argument("--workers", type=int, default=3, help="gunicorn sync workers")
    parser.add_argument("--rounds", type=int, default=5, help="alternations of the endpoints")
    parser.add_argument("--port", type=int, default=8765)
    args = parser.parse_args()

    database_url = os.environ.get("DATABASE_URL", DEFAULT_DATABASE_URL)
    broker_url = os.environ.get("CELERY_BROKER_URL", DEFAULT_BROKER_URL)
    env = server_env(database_url, broker_url)
    ensure_database(database_url)
    prepare_database(env)
    empty_broker(broker_url)
    run = uuid.uuid4().hex[:8]
    total = (WARMUP_REQUESTS + args.requests) * len(ENDPOINTS)
    bodies = signed_bodies(total, run)
    log = Path("/tmp") / f"bench-webhook-{run}.log"
    server = start_server(env, args.port, args.workers, log)
    measured: dict[str, list[Result]] = {name: [] for name, _ in ENDPOINTS}
    per_round = args.requests // args.rounds
    try:
        shares = {
            name: bodies[
                index * (total // len(ENDPOINTS)) : (index + 1) * (total // len(ENDPOINTS))
            ]
            for index, (name, _) in enumerate(ENDPOINTS)
        }
        for name, path in ENDPOINTS:
            drive(args.port, path, shares[name][:WARMUP_REQUESTS], args.concurrency, args.duration)
        # Rounds alternate the endpoints, so a neighbour's load on this shared machine weighs on
        # the three alike.
        for round_index in range(args.rounds):
            for name, path in ENDPOINTS:
                start = WARMUP_REQUESTS + round_index * per_round
                chunk = shares[name][start : start + per_round]
                measured[name].append(
                    drive(args.port, path, chunk, args.concurrency, args.duration / args.rounds)
                )
    finally:
        server.terminate()
        server.wait(timeout=30)
        empty_broker(broker_url)
    results = [
        Result(
            name,
            sum(r.requests for r in measured[name]),
            sum(r.errors for r in measured[name]),
            sum(r.seconds for r in measured[name]),
            [ms for r in measured[name] for ms in r.latencies_ms],
        )
        for name, _ in ENDPOINTS
    ]

    print(
        f"gunicorn {args.workers} sync workers, {args.concurrency} connections, "
        f"{args.requests} requests per endpoint in {args.rounds} alternating rounds "
        f"(cap {args.duration:.0f} s), PostgreSQL + Redis"
    )
    print(
        f"{'endpoint':<24} {'requests':>8} {'errors':>6} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8}"
    )
    for result in results:
        print(
            f"{result.name:<24} {result.requests:>8} {result.errors:>6} {result.per_second:>8.0f} "
            f"{result.percentile(0.50):>8.1f} {result.percentile(0.99):>8.1f}"
        )
    durable, webhook = results[1], results[2]
    ratio = webhook.per_second / durable.per_second
    p99 = webhook.percentile(0.99)
    verdict = "met" if ratio >= 0.7 and p99 < 250 and webhook.errors == 0 else "NOT met"
    print(f"webhook / durable floor: {ratio:.2f}x; webhook p99 {p99:.1f} ms; targets {verdict}")


if __name__ == "__main__":
    main()
