"""CPU per model request of `OpenAIClient` when many threads call it at once: one SDK client
(one connection pool) shared by every thread, against a client per thread (what the worker uses).

    PYTHONPATH=. .venv/bin/python bench/model_client_threads.py [--threads 100,200] [--rounds 3]

bench/latency.py's fake model (aiohttp, on an event loop thread of this process) answers every
request after 1 s, as a threads worker's turns wait on the model. Each of ``--threads`` threads
makes one request a round, all starting together; the first round opens the connections and is
left out. Prints, per mode and thread count, the process's CPU per request (user + system, the
fake's share included, the same in both modes) over the other rounds.
"""

import argparse
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import openai  # noqa: E402

from agents.llm import ChatMessage, OpenAIClient  # noqa: E402
from bench.latency import fakes_running  # noqa: E402

LATENCY = 1.0
MESSAGES = [ChatMessage("user", "Oi, bom dia! " * 100)]


def cpu_ms_per_request(base_url: str, *, shared: bool, threads: int, rounds: int) -> float:
    client = OpenAIClient(
        api_key="bench-key",
        base_url=base_url,
        timeout=30,
        retry_max=0,
        # A given HTTP client is the one every thread uses: the shared mode, with the SDK's
        # own defaults (as the process-wide client before the per-thread ones).
        http_client=openai.DefaultHttpxClient(timeout=30) if shared else None,
    )
    start = threading.Barrier(threads + 1)

    def caller() -> None:
        for _ in range(rounds):
            start.wait()
            client.chat(model="bench", instructions="x", messages=MESSAGES, purpose="agent")
            start.wait()

    callers = [threading.Thread(target=caller) for _ in range(threads)]
    for each in callers:
        each.start()
    cpu = 0.0
    for round_number in range(rounds):
        start.wait()
        before = time.process_time()
        start.wait()
        if round_number:  # the first round opens the connections
            cpu += time.process_time() - before
    for each in callers:
        each.join()
    return cpu * 1000 / (threads * (rounds - 1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", default="100,200")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print("| threads | one shared client, CPU ms/request | a client per thread, CPU ms/request |")
    print("|---|---|---|")
    with fakes_running() as fakes:  # bench/latency.py's fake model, on this process's loop
        fakes.latency = LATENCY
        for threads in (int(n) for n in args.threads.split(",")):
            shared, own = (
                cpu_ms_per_request(
                    fakes.model_url, shared=mode, threads=threads, rounds=args.rounds
                )
                for mode in (True, False)
            )
            print(f"| {threads} | {shared:.2f} | {own:.2f} |")


if __name__ == "__main__":
    main()
