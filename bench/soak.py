"""Soak run: customers talk to the real stack while everything around it misbehaves.

    .venv/bin/python bench/soak.py [--minutes 10] [--customers 12] [--turns 4]
                                   [--kill-every 45] [--graph-5xx 0.1] [--model-faults 0.1]

gunicorn (2 workers) and a real Celery worker (prefork, ``--worker-concurrency`` processes,
default 4) serve the project on PostgreSQL (DATABASE_URL, default
``postgres://postgres@127.0.0.1:5432/lab_attendance_soak``, created and migrated when missing,
emptied of conversations before the run) and a throwaway
redis-server of its own (tests/helpers/throwaway.py). The model and the Graph API are fake HTTP
servers in this process (pytest-httpserver, as in tests/fakes/):

- the model answers after a jittered latency (``--model-latency`` ms, uniform 0.5x-1.5x), or with
  a 500 (``--model-faults``, probability per request); the client retries once, so a turn
  hands off when both attempts fail;
- the Graph API refuses a send with a 503 (``--graph-5xx``): the send is retried with backoff;
  an accepted send is followed, 0.2-2 s later, by its signed "sent" status callback carrying the
  send's ``biz_opaque_callback_data``, as Meta's are.

Each customer (``--customers`` in parallel, for the whole run) writes ``--turns`` turns, each a
burst of 1-3 messages 0-300 ms apart, some delivered twice (``--duplicates``), then waits for the
reply before the next turn; a customer handed off to a human starts over as a new customer (a
new phone number). The worker is SIGKILLed (its whole process group) at random moments,
``--kill-every`` seconds apart on average, and started again at once. A beat stand-in publishes
the two sweeps every 15 s. After ``--minutes`` the traffic stops and the run waits (up to the
broker's visibility timeout and a lease) for the system to drain.

It prints: inbound (messages stored / unique messages posted), answered turns, handed off,
duplicate sends (a reply the Graph API accepted twice: must be 0), lost (a stored message never
processed, a posted message not stored, or a turn that got neither a reply nor the handoff text:
must be 0), leases left stuck (must be 0), and the reply latency p50/p99 minus the model's time
(from the burst's last POST to the reply at the Graph API, less the fake model's latency for
that turn).
"""

import argparse
import json
import logging
import os
import queue
import random
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pytest_httpserver import HTTPServer  # noqa: E402
from werkzeug import Request, Response  # noqa: E402

from bench.support import ensure_database  # noqa: E402
from tests.fakes.openai_server import responses_object  # noqa: E402
from tests.helpers.throwaway import ThrowawayRedis, free_port  # noqa: E402
from tests.helpers.webhooks import healthy, post_delivery, text_delivery  # noqa: E402

DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/lab_attendance_soak"
APP_SECRET = "soak-app-secret"
PHONE_NUMBER_ID = "100000000000001"
HANDOFF_TEXT = "Um especialista vai continuar seu atendimento."
TAG = re.compile(r"cliente (\d+) turno (\d+) parte (\d+)")
SOFT_LIMIT, HARD_LIMIT = 20, 30  # short, so a killed task comes back within the run
VISIBILITY = HARD_LIMIT * 4


@dataclass
class Books:
    """What the fakes and the driver saw; guarded by `lock`."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    model_seconds: dict[tuple[int, int], float] = field(default_factory=lambda: defaultdict(float))
    model_requests: int = 0
    model_faults: int = 0
    graph_refused: int = 0
    # phone -> [(time, text)] of the sends the fake Graph API accepted
    sends: dict[str, list[tuple[float, str]]] = field(default_factory=lambda: defaultdict(list))
    posted: set[str] = field(default_factory=set)  # unique wamids posted and answered 200
    posts: int = 0
    statuses: Counter[int] = field(default_factory=Counter)  # HTTP status -> responses
    callback_statuses: Counter[int] = field(default_factory=Counter)  # of the status callbacks
    # (customer, turn) -> (time of the burst's last POST, phone)
    turns: dict[tuple[int, int], tuple[float, str]] = field(default_factory=dict)
    handed_off: set[int] = field(default_factory=set)
    kills: int = 0
    # (due time, wamid, phone, callback data) of the "sent" status callbacks still to post
    callbacks: "queue.Queue[tuple[float, str, str, Any]]" = field(default_factory=queue.Queue)


def model_handler(books: Books, args: argparse.Namespace) -> Any:
    def handle(request: Request) -> Response:
        body = json.loads(request.get_data() or b"{}")
        user_texts = [m["content"] for m in body.get("input", []) if m.get("role") == "user"]
        tag = TAG.search(user_texts[-1]) if user_texts else None
        delay = args.model_latency / 1000 * random.uniform(0.5, 1.5)
        time.sleep(delay)
        fault = random.random() < args.model_faults
        with books.lock:
            books.model_requests += 1
            books.model_faults += fault
            if tag:
                books.model_seconds[(int(tag[1]), int(tag[2]))] += delay
        if fault:
            error = {"error": {"message": "soak fault", "type": "server_error", "code": None}}
            return Response(json.dumps(error), status=500, content_type="application/json")
        text = '{"s":1}Resposta' + (f" ao {tag[0]}" if tag else "")
        payload = responses_object(text, model=str(body.get("model", "")))
        return Response(json.dumps(payload), status=200, content_type="application/json")

    return handle


def status_callbacks(books: Books, port: int, stop: threading.Event) -> None:
    """Post the fake Graph API's "sent" status callbacks to the webhook when they are due."""
    while not stop.is_set():
        try:
            due, wamid, phone, callback_data = books.callbacks.get(timeout=0.5)
        except queue.Empty:
            continue
        time.sleep(max(0.0, due - time.monotonic()))
        status: dict[str, Any] = {
            "id": wamid,
            "status": "sent",
            "timestamp": str(int(time.time())),
            "recipient_id": phone,
        }
        if callback_data:
            status["biz_opaque_callback_data"] = callback_data
        value = {
            "messaging_product": "whatsapp",
            "metadata": {
                "display_phone_number": "5511999990000",
                "phone_number_id": PHONE_NUMBER_ID,
            },
            "statuses": [status],
        }
        document = {
            "object": "whatsapp_business_account",
            "entry": [
                {"id": "200000000000001", "changes": [{"value": value, "field": "messages"}]}
            ],
        }
        code = post_delivery(port, json.dumps(document).encode(), secret=APP_SECRET)
        with books.lock:
            books.callback_statuses[code] += 1


def graph_handler(books: Books, args: argparse.Namespace) -> Any:
    counter = iter(range(1, 10**9))

    def handle(request: Request) -> Response:
        body = json.loads(request.get_data() or b"{}")
        if body.get("status") == "read":
            return Response('{"success": true}', content_type="application/json")
        if random.random() < args.graph_5xx:
            with books.lock:
                books.graph_refused += 1
            error = {"error": {"message": "Service temporarily unavailable", "code": 2}}
            return Response(json.dumps(error), status=503, content_type="application/json")
        phone = body.get("to", "")
        with books.lock:
            books.sends[phone].append((time.monotonic(), body.get("text", {}).get("body", "")))
            wamid = f"wamid.SOAK{next(counter)}"
        # As Meta does, a status callback follows an accepted send (with the send's
        # biz_opaque_callback_data), a fraction of a second to a couple of seconds later.
        books.callbacks.put(
            (
                time.monotonic() + random.uniform(0.2, 2.0),
                wamid,
                phone,
                body.get("biz_opaque_callback_data"),
            )
        )
        answer = {
            "messaging_product": "whatsapp",
            "contacts": [{"input": phone, "wa_id": phone}],
            "messages": [{"id": wamid}],
        }
        return Response(json.dumps(answer), content_type="application/json")

    return handle


def env_for(database_url: str, broker: str, model_url: str, graph_url: str) -> dict[str, str]:
    return os.environ | {
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "ENV_FILE": "/nonexistent/.env",
        "DEBUG": "False",
        "SECRET_KEY": "soak-only-secret-key",
        "FIELD_ENCRYPTION_KEYS": "c29hay1vbmx5LWZpZWxkLWVuY3J5cHRpb24ta2V5ISE=",
        "WHATSAPP_APP_SECRET": APP_SECRET,
        "ALLOWED_HOSTS": "127.0.0.1",
        "SECURE_SSL_REDIRECT": "False",
        "DATABASE_URL": database_url,
        "DB_CONN_MAX_AGE": "0",
        "CELERY_BROKER_URL": broker,
        "CELERY_TASK_SOFT_TIME_LIMIT": str(SOFT_LIMIT),
        "CELERY_TASK_TIME_LIMIT": str(HARD_LIMIT),
        "OPENAI_API_KEY": "soak-key",
        "OPENAI_BASE_URL": model_url,
        "LLM_TIMEOUT_SECONDS": "10",
        "WHATSAPP_API_BASE_URL": graph_url,
        "WHATSAPP_ACCESS_TOKEN": "soak-token",
        "LOG_LEVEL": "WARNING",
        "PYTHONPATH": str(ROOT),
    }


def prepare_database(env: dict[str, str]) -> None:
    python = sys.executable
    subprocess.run(
        [python, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=ROOT, env=env, check=True
    )
    setup = (
        "import django; django.setup();"
        "from conversations.models import Instance, Session, WebhookDelivery, ProviderCircuit;"
        "from prompts_admin.models import RuntimeConfig;"
        "Session.objects.all().delete(); WebhookDelivery.objects.all().delete();"
        "ProviderCircuit.objects.all().delete();"
        f"Instance.objects.update_or_create(phone_number_id='{PHONE_NUMBER_ID}',"
        "defaults={'name': 'Soak', 'is_active': True});"
        "c = RuntimeConfig.load();"
        f"c.handoff_message_open = c.handoff_message_closed = {HANDOFF_TEXT!r}; c.save()"
    )
    subprocess.run([python, "-c", setup], cwd=ROOT, env=env, check=True)


class Worker:
    """The Celery worker, in a process group of its own so SIGKILL takes its children too."""

    def __init__(self, env: dict[str, str], log: Path, concurrency: int) -> None:
        self.env, self.log = env, log
        self.process: subprocess.Popen[bytes] | None = None
        self.concurrency = concurrency
        self.lock = threading.Lock()

    def start(self) -> None:
        command = [
            sys.executable, "-m", "celery", "-A", "config", "worker", "--pool=prefork",
            f"--concurrency={self.concurrency}",
            "--without-gossip", "--without-mingle", "--without-heartbeat", "--loglevel=WARNING",
            f"--hostname=soak-{os.getpid()}-{time.monotonic_ns()}@localhost",
        ]  # fmt: skip
        with self.log.open("a") as out:
            self.process = subprocess.Popen(
                command, cwd=ROOT, env=self.env, stdout=out, stderr=out, start_new_session=True
            )

    def kill(self) -> None:
        with self.lock:
            if self.process is not None:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
            self.start()

    def stop(self) -> None:
        with self.lock:
            if self.process is not None:
                os.killpg(self.process.pid, signal.SIGTERM)
                try:
                    self.process.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process = None


def publish(broker: str, task: str) -> None:
    from celery import Celery
    from kombu import Connection, Exchange, Queue

    with Connection(broker) as connection:
        Queue("celery", Exchange("celery", type="direct"), routing_key="celery").bind(
            connection
        ).declare()
        Celery(set_as_current=False).send_task(task, connection=connection)


def customer(
    slot: int, books: Books, args: argparse.Namespace, port: int, deadline: float, ids: Any
) -> None:
    rng = random.Random(slot)
    while time.monotonic() < deadline:
        number = next(ids)
        phone = f"5511980{number:06d}"
        for turn in range(args.turns):
            if time.monotonic() >= deadline:
                return
            time.sleep(rng.uniform(0, 2))
            parts = rng.choice((1, 1, 2, 3))
            before = 0
            for part in range(parts):
                if part == parts - 1:
                    # The turn's reply is the first send after the burst's last message.
                    with books.lock:
                        before = len(books.sends[phone])
                wamid = f"wamid.SOAK.{number}.{turn}.{part}"
                body = text_delivery(
                    phone=phone,
                    wamid=wamid,
                    text=f"Olá, cliente {number} turno {turn} parte {part}",
                    name=f"Cliente {number}",
                )
                copies = 2 if rng.random() < args.duplicates else 1
                for _ in range(copies):
                    status = post_delivery(port, body, secret=APP_SECRET)
                    with books.lock:
                        books.posts += 1
                        books.statuses[status] += 1
                        if status == 200:
                            books.posted.add(wamid)
                with books.lock:
                    books.turns[(number, turn)] = (time.monotonic(), phone)
                time.sleep(rng.uniform(0, 0.3))
            # Wait for the answer (or the handoff text) to this turn.
            reply_deadline = time.monotonic() + VISIBILITY + 90
            text = None
            while time.monotonic() < reply_deadline:
                with books.lock:
                    if len(books.sends[phone]) > before:
                        text = books.sends[phone][before][1]
                        break
                time.sleep(0.1)
            if text is None or text == HANDOFF_TEXT:
                if text == HANDOFF_TEXT:
                    with books.lock:
                        books.handed_off.add(number)
                break  # a new customer takes this slot


def killer(worker: Worker, books: Books, args: argparse.Namespace, deadline: float) -> None:
    while True:
        pause = random.expovariate(1 / args.kill_every)
        if time.monotonic() + pause >= deadline:
            return
        time.sleep(pause)
        worker.kill()
        with books.lock:
            books.kills += 1


def beat(broker: str, stop: threading.Event) -> None:
    while not stop.wait(15):
        for task in (
            "conversations.requeue_expired_leases",
            "conversations.requeue_unsent_messages",
        ):
            try:
                publish(broker, task)
            except Exception as exc:
                print(f"beat: {exc}", file=sys.stderr)


def database_counts(env: dict[str, str]) -> dict[str, Any]:
    script = (
        "import json, django; django.setup();"
        "from django.db.models import Count;"
        "from conversations.models import Message, Session;"
        "inbound = Message.objects.filter(direction='INBOUND');"
        "print(json.dumps({"
        "'inbound': inbound.count(),"
        "'wamids': list(inbound.values_list('wa_message_id', flat=True)),"
        "'pending': inbound.filter(processed_at=None).count(),"
        "'leases': Session.objects.exclude(lease_token=None).count(),"
        "'human': Session.objects.filter(state='HUMAN').count(),"
        "'sent_outbound': Message.objects.filter(direction='OUTBOUND')"
        ".exclude(wa_message_id=None).count(),"
        "'unsent_outbound': Message.objects.filter(direction='OUTBOUND', wa_message_id=None,"
        " error='').exclude(delivery_status='failed').count(),"
        "}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, check=True, capture_output=True
    )
    counts: dict[str, Any] = json.loads(out.stdout)
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--customers", type=int, default=12)
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--kill-every", type=float, default=45, help="mean seconds between kills")
    parser.add_argument("--graph-5xx", type=float, default=0.1)
    parser.add_argument("--model-faults", type=float, default=0.1)
    parser.add_argument("--model-latency", type=float, default=400, help="mean, milliseconds")
    parser.add_argument("--duplicates", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--worker-concurrency", type=int, default=4)
    args = parser.parse_args()
    random.seed(args.seed)
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # the fakes' access log
    database_url = os.environ.get("DATABASE_URL", DEFAULT_DATABASE_URL)
    ensure_database(database_url, script="bench/soak.py")
    logs = Path(os.environ.get("SOAK_LOGS", "/tmp/soak"))
    logs.mkdir(parents=True, exist_ok=True)

    books = Books()
    model = HTTPServer(host="127.0.0.1", port=0, threaded=True)
    model.expect_request("/v1/responses", method="POST").respond_with_handler(
        model_handler(books, args)
    )
    graph = HTTPServer(host="127.0.0.1", port=0, threaded=True)
    graph.expect_request(re.compile(r"^/v23\.0/\d+/messages$"), method="POST").respond_with_handler(
        graph_handler(books, args)
    )
    model.start()
    graph.start()
    redis_server = ThrowawayRedis().start()
    broker = redis_server.url()
    env = env_for(database_url, broker, model.url_for("/v1"), graph.url_for("/v23.0").rstrip("/"))
    prepare_database(env)
    port = free_port()
    web = subprocess.Popen(
        [
            str(Path(sys.executable).with_name("gunicorn")), "config.wsgi:application",
            f"--bind=127.0.0.1:{port}", "--workers=2", "--log-level=warning",
        ],
        cwd=ROOT, env=env, stdout=(logs / "web.log").open("w"), stderr=subprocess.STDOUT,
    )  # fmt: skip
    worker = Worker(env, logs / "worker.log", args.worker_concurrency)
    worker.start()
    stop_beat = threading.Event()
    try:
        while not healthy(port):
            time.sleep(0.2)
        started = time.monotonic()
        deadline = started + args.minutes * 60
        ids = iter(range(1, 10**6))
        id_lock = threading.Lock()

        def next_id() -> Any:
            while True:
                with id_lock:
                    value = next(ids)
                yield value

        threads = [
            threading.Thread(
                target=customer, args=(slot, books, args, port, deadline, next_id()), daemon=True
            )
            for slot in range(args.customers)
        ]
        threads.append(
            threading.Thread(target=killer, args=(worker, books, args, deadline), daemon=True)
        )
        threading.Thread(target=beat, args=(broker, stop_beat), daemon=True).start()
        threading.Thread(
            target=status_callbacks, args=(books, port, stop_beat), daemon=True
        ).start()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        traffic_seconds = time.monotonic() - started
        # Drain: every stored message processed and every reply sent or failed.
        drain_deadline = time.monotonic() + VISIBILITY + 120
        counts = database_counts(env)
        while time.monotonic() < drain_deadline and (
            counts["pending"] or counts["leases"] or counts["unsent_outbound"]
        ):
            time.sleep(5)
            counts = database_counts(env)
        drained_seconds = time.monotonic() - started - traffic_seconds
    finally:
        stop_beat.set()
        worker.stop()
        web.terminate()
        web.wait(timeout=20)
        redis_server.stop()
        model.stop()
        graph.stop()

    report(books, counts, args, traffic_seconds, drained_seconds)


def report(
    books: Books, counts: dict[str, Any], args: argparse.Namespace, traffic: float, drain: float
) -> None:
    stored = set(counts["wamids"])
    not_stored = len(books.posted - stored)
    accepted_replies = 0
    duplicate_sends = 0
    latencies = []
    unanswered = 0
    for sends in books.sends.values():
        texts = Counter(text for _, text in sends)
        duplicate_sends += sum(n - 1 for n in texts.values())
        accepted_replies += len(sends)
    by_phone_turns: dict[str, list[tuple[int, int, float]]] = defaultdict(list)
    for (number, turn), (posted_at, phone) in books.turns.items():
        by_phone_turns[phone].append((number, turn, posted_at))
    answered = 0
    for phone, turns in by_phone_turns.items():
        sends = books.sends.get(phone, [])
        for number, turn, posted_at in sorted(turns, key=lambda item: item[1]):
            reply = next(((t, text) for t, text in sends if t >= posted_at), None)
            if reply is None:
                # A burst merged into the previous turn's reply, or a turn never answered.
                if not any(f"turno {turn} " in text for _, text in sends) and HANDOFF_TEXT not in (
                    text for _, text in sends
                ):
                    unanswered += 1
                continue
            if reply[1] != HANDOFF_TEXT:
                answered += 1
            model = books.model_seconds.get((number, turn), 0.0)
            latencies.append(max(0.0, reply[0] - posted_at - model))
    lost = counts["pending"] + not_stored + unanswered
    latencies.sort()

    def pct(p: float) -> float:
        return (
            latencies[min(len(latencies) - 1, int(p * len(latencies)))] * 1000 if latencies else 0
        )

    print(
        f"soak: {args.customers} customers x {args.turns} turns, {traffic / 60:.1f} min of traffic"
        f" (the last turns' replies included), worker concurrency {args.worker_concurrency},"
    )
    print(
        f"      model {args.model_latency:.0f} ms ±50% with {args.model_faults:.0%} 500s, Graph "
        f"{args.graph_5xx:.0%} 503s, {args.duplicates:.0%} duplicate deliveries, worker "
        f"SIGKILLed {books.kills} times; drained in {drain:.0f} s"
    )
    print(f"posts                 {books.posts} ({dict(books.statuses)})")
    print(
        f"status callbacks      {sum(books.callback_statuses.values())} "
        f"({dict(books.callback_statuses)})"
    )
    print(f"inbound               {counts['inbound']} stored / {len(books.posted)} unique posted")
    print(f"answered              {answered} turns")
    print(f"handed off            {counts['human']} sessions")
    print(f"model requests        {books.model_requests} ({books.model_faults} faults)")
    print(f"Graph sends           {accepted_replies} accepted, {books.graph_refused} refused (503)")
    print(f"duplicate sends       {duplicate_sends}")
    print(f"lost                  {lost} (pending {counts['pending']}, not stored {not_stored}, "
          f"unanswered turns {unanswered})")  # fmt: skip
    print(f"leases left stuck     {counts['leases']}")
    print(f"replies unsent        {counts['unsent_outbound']}")
    print(f"latency - model (ms)  p50 {pct(0.5):.0f}  p99 {pct(0.99):.0f}  (n={len(latencies)})")
    if duplicate_sends or lost or counts["leases"]:
        sys.exit(1)


if __name__ == "__main__":
    main()
