"""Benchmark of the outcome metrics per prompt version on PostgreSQL.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/lab_attendance_bench_metrics \\
        .venv/bin/python bench/prompt_metrics.py [--runs 10] [--reseed]

Creates the database when it is missing, migrates it and seeds, once, 40,000 conversations over
the last 60 days with 200,000 agent calls (5 a conversation: 2 to 4 of triage, then qualificacao
and coleta), a repair call for 2% of the agent calls, a Lead for a third of the conversations,
handoffs for a share of the others that grows with the version, 5% simulated conversations.
Each agent has 4 prompt versions, 15 days each: the built-in prompt, then 3 versions of one
override. Then it times `prompt_metrics` (triage over the default 30 days, and over all 60 days:
every version) and the admin page, as a superuser through Django's test client, and prints the
median and 90th-percentile times and the number of SQL queries.
"""

import argparse
import os
import random
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.support import ensure_database, production_settings_env  # noqa: E402

production_settings_env()

N_SESSIONS = 40_000
CALLS_PER_SESSION = 5
N_AGENT_CALLS = N_SESSIONS * CALLS_PER_SESSION
DAYS = 60
VERSIONS_PER_AGENT = 4
AGENTS = ("triagem", "qualificacao", "coleta")
HANDOFF_REASONS = (
    "model_requested",
    "model_requested",
    "llm_invalid_json",
    "llm_invalid_contract",
    "llm_timeout",
    "staff_takeover",
)


def agent_versions() -> dict[str, list[str]]:
    """Per agent: "builtin" then the 3 versions of one override (3 saves, 3 history rows)."""
    from prompts_admin.models import PromptOverride

    versions: dict[str, list[str]] = {}
    for agent in AGENTS:
        override = PromptOverride.objects.create(agent=agent, content="v1", note="primeira")
        for n in (2, 3):
            override.content, override.note = f"v{n}", f"versão {n}"
            override.save()
        history = PromptOverride.history.filter(id=override.pk).order_by("history_id")
        ids = list(history.values_list("history_id", flat=True))
        versions[agent] = ["builtin", *(f"override:{history_id}" for history_id in ids)]
    return versions


def seed(rng: random.Random) -> None:
    from django.db import connection

    from conversations.models import Instance, Lead, Session

    started = time.perf_counter()
    instance = Instance.objects.create(phone_number_id="200000000000001", name="Bench metrics")
    versions = agent_versions()
    first_day = datetime.now(UTC) - timedelta(days=DAYS)
    plans = []
    sessions = []
    for i in range(N_SESSIONS):
        day = i * DAYS // N_SESSIONS
        version = min(VERSIONS_PER_AGENT - 1, day * VERSIONS_PER_AGENT // DAYS)
        at = first_day + timedelta(days=day, minutes=i % 1200)
        triage = 2 + i % 3
        confirmed = triage == 2
        reason = "qualified_lead" if confirmed else ""
        if not confirmed and rng.random() < 0.15 + 0.04 * version:
            reason = rng.choice(HANDOFF_REASONS)
        plans.append((at, version, triage, confirmed))
        sessions.append(
            Session(
                instance=instance,
                customer_phone=f"5511{800000000 + i}",
                state="HUMAN" if reason else "TRIAGE",
                handoff_reason=reason,
                is_simulated=i % 20 == 0,
                created_at=at,
            )
        )
    Session.objects.bulk_create(sessions, batch_size=5_000)
    leads = []
    calls = 0
    with connection.cursor() as cursor:
        with cursor.copy(
            "COPY conversations_llmcall (session_id, turn_id, agent, purpose, model,"
            " tokens_input, cached_tokens, tokens_output, latency_ms, attempts, outcome, error,"
            " prompt_version,"
            " raw_response, created_at) FROM STDIN"
        ) as copy:
            for session, (at, version, triage, confirmed) in zip(sessions, plans, strict=True):
                # 2 to 4 triage calls, then qualificacao in the last triage turn (a hop), then
                # coleta: 5 agent calls in all.
                agents = ["triagem"] * triage + ["qualificacao"]
                agents += ["coleta"] * (CALLS_PER_SESSION - len(agents))
                turn = uuid.uuid4()
                for n, agent in enumerate(agents):
                    if n != triage:  # the first qualificacao call shares the triage turn
                        turn = uuid.uuid4()
                    when = at + timedelta(minutes=n)
                    row = (session.pk, turn, agent)
                    copy.write_row(
                        (
                            *row,
                            "agent",
                            "gpt-4o-mini",
                            rng.randint(800, 3000),
                            0,
                            rng.randint(40, 400),
                            rng.randint(400, 3000) + 100 * version,
                            1,
                            "ok",
                            "",
                            versions[agent][version],
                            "",
                            when,
                        )
                    )
                    calls += 1
                    if rng.random() < 0.02:
                        copy.write_row(
                            (
                                *row,
                                "repair",
                                "gpt-4o-mini",
                                300,
                                0,
                                80,
                                600,
                                1,
                                "ok",
                                "",
                                "builtin",
                                "",
                                when + timedelta(seconds=5),
                            )
                        )
                if confirmed:
                    leads.append(
                        Lead(session=session, created_at=at + timedelta(minutes=len(agents)))
                    )
        Lead.objects.bulk_create(leads, batch_size=5_000)
        cursor.execute("ANALYZE")
    print(f"seeded {calls:,} agent calls in {time.perf_counter() - started:.1f} s")


def timed(run: Callable[[], Any], runs: int) -> tuple[float, float, str]:
    """Median and 90th percentile in ms, and the query counts seen, after 2 warm-up runs."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    for _ in range(2):
        run()
    timings = []
    counts = set()
    for _ in range(runs):
        with CaptureQueriesContext(connection) as queries:
            started = time.perf_counter()
            run()
            timings.append((time.perf_counter() - started) * 1000)
        counts.add(len(queries))
    p90 = statistics.quantiles(timings, n=10)[-1] if len(timings) > 1 else timings[0]
    return statistics.median(timings), p90, "/".join(str(c) for c in sorted(counts))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10, help="measured runs per case")
    parser.add_argument("--reseed", action="store_true", help="flush the data and seed again")
    args = parser.parse_args()

    url = os.environ.get("DATABASE_URL", "")
    ensure_database(url, script="bench/prompt_metrics.py")

    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import transaction
    from django.test import Client, override_settings
    from django.urls import reverse
    from django.utils import timezone

    from agents.states import AgentName
    from conversations.models import LLMCall
    from governance.outcomes import MetricsFilters, default_filters, prompt_metrics

    # The page's static URLs without `collectstatic`'s manifest (DEBUG is off here).
    override_settings(
        STORAGES={
            **settings.STORAGES,
            "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
        }
    ).enable()
    call_command("migrate", verbosity=0)
    if args.reseed or LLMCall.objects.filter(purpose="agent").count() < N_AGENT_CALLS:
        call_command("flush", interactive=False, verbosity=0)
        with transaction.atomic():  # an interrupted seed leaves nothing behind
            seed(random.Random(15))
    print(
        f"{LLMCall.objects.filter(purpose='agent').count():,} agent calls, "
        f"{LLMCall.objects.filter(purpose='repair').count():,} repair calls"
    )

    today = timezone.localdate()
    last_30 = default_filters(today=today)
    all_60 = MetricsFilters(
        agent=AgentName.TRIAGEM, date_from=today - timedelta(days=DAYS), date_to=today
    )
    user_model = get_user_model()
    user = user_model.objects.filter(username="bench-admin").first()
    if user is None:
        user = user_model.objects.create_superuser("bench-admin", "bench@localhost", None)
    client = Client()
    client.force_login(user)
    page = reverse("governance_prompt_metrics")
    query_60 = f"?agent=triagem&date_from={all_60.date_from}&date_to={all_60.date_to}"

    def get(path: str) -> None:
        response = client.get(path, secure=True)
        assert response.status_code == 200, (path, response.status_code)

    cases: list[tuple[str, Callable[[], Any]]] = [
        ("prompt_metrics, triage, 30 days", lambda: prompt_metrics(filters=last_30)),
        ("prompt_metrics, triage, 60 days", lambda: prompt_metrics(filters=all_60)),
        (
            "prompt_metrics, qualificacao, 60 d",
            lambda: prompt_metrics(
                filters=MetricsFilters(
                    agent=AgentName.QUALIFICACAO, date_from=all_60.date_from, date_to=today
                )
            ),
        ),
        ("page, default (30 days)", lambda: get(page)),
        ("page, 60 days (4 versions)", lambda: get(page + query_60)),
    ]
    metrics = prompt_metrics(filters=all_60)
    for one in metrics.versions:
        print(
            f"  {one.version:16} {one.sessions:6,} conversations {one.calls:7,} calls "
            f"handoffs {one.handoff_rate:4.1f} %"
        )
    print(f"\n{'case':36} {'median ms':>10} {'p90 ms':>8} {'queries':>8}")
    for name, run in cases:
        median, p90, counts = timed(run, args.runs)
        print(f"{name:36} {median:10.1f} {p90:8.1f} {counts:>8}")


if __name__ == "__main__":
    main()
