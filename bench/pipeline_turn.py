"""Benchmark of the pipeline's own cost per turn, with a zero-latency in-process model.

    .venv/bin/python bench/pipeline_turn.py [--runs 200]                        # SQLite
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/lab_attendance_b \\
        .venv/bin/python bench/pipeline_turn.py [--runs 200]                    # PostgreSQL

Creates a throwaway test database (in memory on SQLite, ``test_<name>`` on PostgreSQL, dropped at
the end) with a small catalog (4 segments, 4 intents, 8 services with parameter schemas, 10 KB
packages) and the runtime configuration with 5 strategic companies. Each run stores one pending
INBOUND message on a fresh session (not measured) and then measures `session_process` — claim the
lease, think, commit, drain and release — with the production collaborators (database sources,
invoker, recorder) except the model, which answers at once, and the send / summary / mark-read
seams, which are no-ops. Two turns:

- ``respond``: triagem answers with code 1 (one agent call);
- ``routing``: triagem routes with code 2 and qualificacao answers with code 1 (two agent calls).

Prints per turn the median and 90th-percentile wall time, the median CPU time of this process
(the database server's own work is not in it) and the SQL query count.
"""

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    # Imported where used, after django.setup(); named here for the annotations.
    from agents.llm import CallPurpose, ChatMessage, LLMCallResult
    from conversations.models import Instance

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings_test")
os.environ.setdefault("LOG_LEVEL", "WARNING")

SEGMENTS = ("AMBIENTAL", "ALIMENTOS", "ANIMAL", "HUMANO")
INTENTS = ("ORCAMENTO", "DUVIDA_TECNICA", "RESULTADO", "OUTRO")
TO_QUALIFICATION = '{"s":2,"segmento":"AMBIENTAL","intencao":"ORCAMENTO"}'
RESPOND = '{"s":1}Claro! Para a análise de **potabilidade**, qual é a origem da água?'


class ZeroLatencyLLM:
    """An `LLMClient` that answers at once from a script reset before each turn."""

    def __init__(self) -> None:
        self.script: list[str] = []

    def chat(
        self,
        *,
        model: str,
        instructions: str,
        messages: Sequence["ChatMessage"],
        purpose: "CallPurpose",
        cache_key: str = "",
    ) -> "LLMCallResult":
        from agents.llm import LLMCallResult

        answer = self.script.pop(0) if self.script else RESPOND
        return LLMCallResult(answer, model, len(instructions) // 4, 20, 0)


def seed() -> None:
    from simple_history.utils import bulk_create_with_history

    from knowledge_base.models import Intent, KBPackage, Segment, Service
    from prompts_admin.models import RuntimeConfig, StrategicCompany

    RuntimeConfig.load()
    for i in range(5):
        StrategicCompany.objects.create(
            name=f"Empresa Estratégica {i}", phone_numbers=f"+55 11 9{i}000-0000"
        )
    schema = [
        {"name": "tipo_amostra", "label": "Tipo de amostra", "type": "text", "required": True},
        {"name": "quantidade_amostras", "label": "Quantidade", "type": "integer", "required": True},
        {"name": "cidade_coleta", "label": "Cidade da coleta", "type": "text"},
    ]
    for code in SEGMENTS:
        segment = Segment.objects.create(
            code=code, label=code.title(), health_sensitive=code == "HUMANO"
        )
        for n in range(2):
            Service.objects.create(
                code=f"{code}_SERVICO_{n}",
                label=f"Serviço {n} de {code.lower()}",
                segment=segment,
                parameter_schema=schema,
            )
    for code in INTENTS:
        Intent.objects.create(code=code, label=code.title())
    bulk_create_with_history(
        [
            KBPackage(
                package_id=f"PACOTE_{i:02d}",
                title=f"Pacote {i}",
                description=f"Descrição de uma linha do pacote {i}",
                content=("Conteúdo do pacote. " * 100).strip(),
            )
            for i in range(10)
        ],
        KBPackage,
    )


def fresh_session(instance: "Instance", number: int) -> int:
    from django.utils import timezone

    from conversations.models import Direction, Message, Session

    session = Session.objects.create(instance=instance, customer_phone=f"55119{number:08d}")
    Message.objects.create(
        session=session,
        direction=Direction.INBOUND,
        content="Oi, quero um orçamento de análise de água do meu poço",
        wa_message_id=f"wamid.bench.{number}",
        wa_timestamp=timezone.now(),
    )
    return session.pk


def measure(
    turn: Callable[[int], Callable[[], None]], runs: int
) -> tuple[list[float], list[float], list[int]]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    wall: list[float] = []
    cpu: list[float] = []
    queries: list[int] = []
    for run in range(runs):
        prepare = turn(run)
        # The captured log is bounded (9,000 entries): empty it so each count is exact.
        connection.queries_log.clear()
        with CaptureQueriesContext(connection) as captured:
            started, started_cpu = time.perf_counter(), time.process_time()
            prepare()
            cpu.append((time.process_time() - started_cpu) * 1000)
            wall.append((time.perf_counter() - started) * 1000)
        queries.append(len(captured))
    return wall, cpu, queries


def report(label: str, wall: list[float], cpu: list[float], queries: list[int]) -> None:
    ordered = sorted(wall)
    p90 = ordered[int(len(ordered) * 0.9) - 1]
    print(
        f"{label:<8} median {statistics.median(wall):6.2f} ms   p90 {p90:6.2f} ms   "
        f"cpu {statistics.median(cpu):6.2f} ms   queries {min(queries)}-{max(queries)}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()

    import django

    django.setup()
    from django.db import connection

    from conversations.models import Instance, Message
    from conversations.turns.deps import PipelineConfig, no_read_receipt
    from conversations.turns.run import session_process
    from conversations.turns.tasks import build_pipeline_deps

    def nothing(_id: int) -> None:
        return None

    test_db = connection.creation.create_test_db(verbosity=0, autoclobber=True)
    try:
        seed()
        instance = Instance.objects.create(phone_number_id="100000000000001", name="Bench")
        llm = ZeroLatencyLLM()
        config = PipelineConfig.from_settings()
        numbers = iter(range(1, 1_000_000))

        def turn(script: list[str]) -> Callable[[int], Callable[[], None]]:
            def setup(_run: int) -> Callable[[], None]:
                session_id = fresh_session(instance, next(numbers))

                def run() -> None:
                    llm.script = list(script)
                    # Built per run, as each `process_session` task builds its own: the runtime
                    # settings, overrides and catalog it reads are scoped to the task.
                    deps = replace(
                        build_pipeline_deps(llm=llm),
                        send=nothing,
                        enqueue_summary=nothing,
                        mark_read=no_read_receipt,
                    )
                    report_ = session_process(session_id=session_id, deps=deps, config=config)
                    assert report_.turns == 1, report_

                return run

            return setup

        respond, routing = turn([RESPOND]), turn([TO_QUALIFICATION, RESPOND])
        # Warm up: template compilation, the holidays table, connection setup.
        for n in range(5):
            respond(n)()
            routing(n)()
        print(f"database {connection.vendor} ({test_db}); {args.runs} runs per turn")
        report("respond", *measure(respond, args.runs))
        report("routing", *measure(routing, args.runs))
        print(f"messages written: {Message.objects.count():,}")
    finally:
        connection.creation.destroy_test_db(test_db, verbosity=0)


if __name__ == "__main__":
    main()
