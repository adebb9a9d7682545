"""A run of simulated customers against a draft, timed, with its SQL queries counted.

    .venv/bin/python bench/personas.py [--personas 10] [--runs 3]               # SQLite
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/lab_attendance_b \\
        .venv/bin/python bench/personas.py [--personas 10] [--runs 3]           # PostgreSQL

Creates a throwaway test database (in memory on SQLite, ``test_<name>`` on PostgreSQL, dropped at
the end) with the simulated customers' tests' world (tests/simulator/personas_script.py: the
water service, the demo instance, one model per caller), and ``--personas`` personas, each the
script's farmer: four customer messages to a confirmed request, 11 model calls. The model is the
fake OpenAI server of the tests (a local HTTP server answering at once from the script) reached
through the real openai SDK, so a call's time is the SDK's and the loopback's, not a provider's.

Each run stores a queued run of every persona against the collection agent's draft and plays
it (`simulator.personas.persona_run_execute`, as the ``governance.persona_run`` task does, in
this process). Prints per run the wall time and the queries (every statement sent through a
cursor: on SQLite Django's BEGIN of each transaction too, on PostgreSQL the driver opens them;
COMMIT goes through the driver on both), then per persona the median time and queries and their
range.
"""

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.simulator import personas_script as script  # noqa: E402


@dataclass
class Figures:
    """One run's measurements: its wall time and queries, and each persona's."""

    seconds: float = 0.0
    queries: int = 0
    reached: int = 0
    model_calls: int = 0
    persona_seconds: list[float] = field(default_factory=list)
    persona_queries: list[int] = field(default_factory=list)


class QueryCounter:
    """Counts every statement the default connection executes (an execute wrapper: unbounded,
    unlike the debug cursor's log)."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(
        self, execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any
    ) -> Any:
        self.count += 1
        return execute(sql, params, many, context)


@contextmanager
def counted() -> Iterator[QueryCounter]:
    from django.db import connection

    counter = QueryCounter()
    with connection.execute_wrapper(counter):
        yield counter


def personas_create(count: int) -> list[int]:
    from governance.models import Persona, PersonaGoal

    return [
        Persona.objects.create(
            title=f"Produtor rural {n + 1:02d}",
            description=script.FARMER,
            goal=PersonaGoal.LEAD,
            expected_service="AGUA_POTABILIDADE",
            required_fields=["cadastro.documento", "qualification_data.quantidade_amostras"],
        ).pk
        for n in range(count)
    ]


def run_measure(
    *, override_id: int, persona_ids: list[int], requests: Callable[[], int]
) -> Figures:
    """Start and play one run of `persona_ids` against the override, timed and counted; each
    persona's conversation (`persona_play`) timed and counted on its own."""
    from governance.models import PersonaRun
    from prompts_admin.models import PromptOverride
    from simulator import personas

    figures = Figures()
    play = personas.persona_play

    def timed_play(*args: Any, **kwargs: Any) -> Any:
        with counted() as queries:
            started = time.perf_counter()
            played = play(*args, **kwargs)
            figures.persona_seconds.append(time.perf_counter() - started)
        figures.persona_queries.append(queries.count)
        return played

    override = PromptOverride.objects.get(pk=override_id)
    calls_before = requests()
    # `_execute` looks the function up in its module at each persona.
    personas.persona_play = timed_play
    try:
        with counted() as queries:
            started = time.perf_counter()
            run = personas.persona_run_start(override=override, persona_ids=persona_ids)
            run = personas.persona_run_execute(run_id=run.pk)
            figures.seconds = time.perf_counter() - started
    finally:
        personas.persona_play = play
    figures.queries = queries.count
    figures.reached = PersonaRun.objects.get(pk=run.pk).reached
    figures.model_calls = requests() - calls_before
    return figures


def report(label: str, figures: Figures) -> None:
    times = [s * 1000 for s in figures.persona_seconds]
    queries = figures.persona_queries
    print(
        f"{label:<8} wall {figures.seconds * 1000:8.1f} ms   queries {figures.queries:5d}   "
        f"reached {figures.reached}/{len(times)}   model calls {figures.model_calls}   "
        f"per persona: median {statistics.median(times):6.1f} ms "
        f"({min(times):.1f}-{max(times):.1f}), "
        f"queries {statistics.median(queries):.0f} ({min(queries)}-{max(queries)})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--personas", type=int, default=10)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    from bench.fake_world import fake_world

    with fake_world(**script.MODEL_SETTINGS) as world:
        from prompts_admin.models import PromptOverride

        model = world.model
        model.answer_with(script.answer)
        script.catalog_create()
        override = PromptOverride.objects.create(agent="coleta", content=script.GOOD_DRAFT)
        persona_ids = personas_create(args.personas)
        # Warm up: template compilation, the SDK's client, connection setup.
        run_measure(
            override_id=override.pk,
            persona_ids=persona_ids[:1],
            requests=lambda: model.request_count,
        )
        print(f"database {world.database}; {args.personas} personas per run")
        for n in range(args.runs):
            report(
                f"run {n + 1}",
                run_measure(
                    override_id=override.pk,
                    persona_ids=persona_ids,
                    requests=lambda: model.request_count,
                ),
            )


if __name__ == "__main__":
    main()
