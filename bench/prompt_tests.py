"""An agent's suite of prompt test cases run against a draft, timed, with its SQL queries counted.

    .venv/bin/python bench/prompt_tests.py [--cases 50] [--runs 3]              # SQLite
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/lab_attendance_b \\
        .venv/bin/python bench/prompt_tests.py [--cases 50] [--runs 3]          # PostgreSQL

Creates a throwaway test database (in memory on SQLite, ``test_<name>`` on PostgreSQL, dropped at
the end), records one real triage turn (the pipeline, the fake OpenAI server of the tests through
the real openai SDK; its sends reach a fake Graph API), saves it as a test case expecting code 1,
and copies the case to ``--cases`` cases. Each run gives every case the draft's text
(`governance.test_cases.run_cases`, as `prompt_tests --override` and the admin's run do, with
the settings' REPLAY_CONCURRENCY), the model answering at once. Prints per run the wall time,
the queries (every statement sent through a cursor) and how many cases passed.
"""

import argparse
import contextlib
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.personas import counted  # noqa: E402

CASE_TEXT = "Oi, aqui é a Maria Souza, quero um orçamento"


@dataclass(frozen=True)
class Figures:
    seconds: float
    queries: int
    cases: int
    passed: int
    model_calls: int


def suite_create(count: int, *, model: Any) -> list[Any]:
    """`count` test cases of one recorded triage turn, each expecting code 1 (each saved with
    its version, as an editor's are)."""
    from django.contrib.auth.models import User

    from governance.models import PromptTestCase
    from governance.replay import ReplayDeps
    from governance.test_cases import prompt_test_case_create
    from tests import baker_recipes as recipes
    from tests.helpers.recorded_calls import GREETING, conversation, record_turn

    instance = recipes.instance.make()
    session = conversation(instance, customer_name="Maria Souza", customer_phone="5511987654321")
    # Outside a test's transaction the turn's after-commit callbacks run as it commits.
    call = record_turn(
        session, CASE_TEXT, GREETING, model=model, capture=lambda **_: contextlib.nullcontext()
    )
    editor = User.objects.create_superuser("bench-editor", password=None)
    case = prompt_test_case_create(
        call=call,
        user=editor,
        title="Saudação",
        expectations={"expected_code": 1},
        deps=ReplayDeps.from_settings(),
    )
    cases = []
    for _ in range(count):
        case.pk = None
        case.save()
        cases.append(PromptTestCase.objects.select_related("source_instance").get(pk=case.pk))
    return cases


def run_measure(cases: list[Any], override: Any, *, model: Any) -> Figures:
    """One run of `cases` against `override`, timed and counted."""
    from governance.replay import ReplayDeps
    from governance.test_cases import run_cases
    from tests.helpers.recorded_calls import GREETING

    for _ in cases:
        model.queue_text(GREETING)
    deps = ReplayDeps.from_settings()
    calls_before = model.request_count
    with counted() as queries:
        started = time.perf_counter()
        report = run_cases(cases, override, deps)
        seconds = time.perf_counter() - started
    return Figures(
        seconds=seconds,
        queries=queries.count,
        cases=len(report.results),
        passed=report.passed,
        model_calls=model.request_count - calls_before,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=50)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    from bench.fake_world import fake_world

    with fake_world() as world:
        from tests.helpers.recorded_calls import draft

        model = world.model
        cases = suite_create(args.cases, model=model)
        override = draft()
        run_measure(cases[:1], override, model=model)  # warm up: the SDK's client, templates
        print(f"database {world.database}; {args.cases} cases per run")
        seconds = []
        for n in range(args.runs):
            figures = run_measure(cases, override, model=model)
            seconds.append(figures.seconds)
            print(
                f"run {n + 1}   wall {figures.seconds * 1000:8.1f} ms   "
                f"per case {figures.seconds * 1000 / figures.cases:6.2f} ms   "
                f"queries {figures.queries}   passed {figures.passed}/{figures.cases}   "
                f"model calls {figures.model_calls}"
            )
        print(f"median wall {statistics.median(seconds) * 1000:.1f} ms")


if __name__ == "__main__":
    main()
