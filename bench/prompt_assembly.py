"""Benchmark of one agent invocation's prompt assembly against the database.

    .venv/bin/python bench/prompt_assembly.py [--runs 300]                      # SQLite
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/lab_attendance_b \\
        .venv/bin/python bench/prompt_assembly.py [--runs 300]                  # PostgreSQL

Creates a throwaway test database (in memory on SQLite, ``test_<name>`` on PostgreSQL, dropped at
the end), seeds a session in QUALIFYING with 50 history messages (plus SYSTEM events and a
superseded draft the rules drop), a catalog of 10 segments, 10 intents, 30 services with
parameter schemas and 100 KB packages (3 of them loaded in the session), and an active override.
Then it runs the production invoker (`build_agent_invoker`) with a zero-latency in-process LLM
client and prints, per invocation, the median and 90th-percentile time and the SQL query count:
`invoke` (assembly + the LLMCall row) and `prepare` (assembly only).
"""

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    # Imported where used, after django.setup(); named here for the annotations.
    from agents.context import SessionContext
    from agents.llm import CallPurpose, ChatMessage, LLMCallResult

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings_test")
os.environ.setdefault("LOG_LEVEL", "WARNING")

HISTORY_MESSAGES = 50
PACKAGES = 100
LOADED_PACKAGES = 3


class ZeroLatencyLLM:
    """An `LLMClient` that answers at once, so only assembly and the database are measured."""

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

        return LLMCallResult('{"s":1}Certo! Quantas amostras?', model, len(instructions) // 4, 9, 0)


def seed() -> "SessionContext":
    from django.utils import timezone
    from simple_history.utils import bulk_create_with_history

    from agents.context import InstanceInfo, SessionContext
    from agents.states import SessionState
    from conversations.models import Direction, Instance, Message, Session
    from knowledge_base.models import Intent, KBPackage, Segment, Service
    from prompts_admin.models import PromptOverride, RuntimeConfig, StrategicCompany

    RuntimeConfig.load()
    for i in range(5):
        StrategicCompany.objects.create(name=f"Empresa Estratégica {i}", cnpj="11222333000181")
    segments = [
        Segment.objects.create(code=f"SEGMENTO_{i}", label=f"Segmento {i}", health_sensitive=i == 0)
        for i in range(10)
    ]
    for i in range(10):
        Intent.objects.create(code=f"INTENCAO_{i}", label=f"Intenção {i}")
    schema = [
        {
            "name": "quantidade_amostras",
            "label": "Quantidade de amostras",
            "type": "integer",
            "required": True,
        },
        {
            "name": "origem",
            "label": "Origem",
            "type": "choice",
            "required": True,
            "choices": ["poço", "rede pública", "outra"],
        },
        {"name": "data_coleta", "label": "Data da coleta", "type": "date"},
    ]
    for i in range(30):
        Service.objects.create(
            code=f"SERVICO_{i}",
            label=f"Serviço {i}",
            segment=segments[i % 10],
            description="Análise laboratorial com laudo assinado por responsável técnico.",
            parameter_schema=schema,
        )
    bulk_create_with_history(
        [
            KBPackage(
                package_id=f"PACOTE_{i:03d}",
                title=f"Pacote {i}",
                description=f"Descrição de uma linha do pacote {i}",
                content=("Conteúdo do pacote. " * 100).strip(),
            )
            for i in range(PACKAGES)
        ],
        KBPackage,
    )
    PromptOverride.objects.create(
        agent="qualificacao",
        content="Você é {{ agent_name }}, da {{ company_name }}.\n{{ services }}",
        is_active=True,
    )
    instance = Instance.objects.create(phone_number_id="100000000000001", name="Bench")
    loaded = [f"PACOTE_{i:03d}" for i in range(LOADED_PACKAGES)]
    session = Session.objects.create(
        instance=instance,
        customer_phone="5511912345678",
        state=SessionState.QUALIFYING,
        segment="SEGMENTO_1",
        intent="INTENCAO_1",
        loaded_packages=loaded,
    )
    start = timezone.now() - timedelta(hours=1)
    rows = [
        Message(
            session=session,
            direction=Direction.INBOUND if i % 2 == 0 else Direction.OUTBOUND,
            content=f"Mensagem {i} da conversa, com algum texto para parecer real.",
            created_at=start + timedelta(seconds=i),
        )
        for i in range(HISTORY_MESSAGES)
    ]
    rows += [
        Message(session=session, direction=Direction.SYSTEM, content="evento", created_at=start),
        Message(
            session=session,
            direction=Direction.OUTBOUND,
            content="rascunho",
            error="superseded",
            created_at=start,
        ),
    ]
    Message.objects.bulk_create(rows)
    return SessionContext(
        session_id=session.pk,
        state=SessionState.QUALIFYING,
        instance=InstanceInfo(name=instance.name),
        customer_phone=session.customer_phone,
        segment=session.segment,
        intent=session.intent,
        loaded_packages=tuple(loaded),
    )


def measure(action: Callable[[], object], runs: int) -> tuple[list[float], list[int]]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    times: list[float] = []
    queries: list[int] = []
    for _ in range(runs):
        with CaptureQueriesContext(connection) as captured:
            started = time.perf_counter()
            action()
            times.append((time.perf_counter() - started) * 1000)
        queries.append(len(captured))
    return times, queries


def report(label: str, times: list[float], queries: list[int]) -> None:
    ordered = sorted(times)
    p90 = ordered[int(len(ordered) * 0.9) - 1]
    print(
        f"{label:<9} median {statistics.median(times):6.2f} ms   p90 {p90:6.2f} ms   "
        f"queries {min(queries)}-{max(queries)}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300)
    args = parser.parse_args()

    import django

    django.setup()
    from django.db import connection

    from agents.states import AgentName
    from conversations.agent_sources import build_agent_invoker

    test_db = connection.creation.create_test_db(verbosity=0, autoclobber=True)
    try:
        context = seed()
        invoker = build_agent_invoker(llm=ZeroLatencyLLM())
        agent = AgentName.QUALIFICACAO
        # Warm up: template compilation, the holidays table, connection setup.
        for _ in range(5):
            invoker.invoke(session=context, agent=agent)
        prepared = invoker.prepare(session=context, agent=agent)
        print(
            f"database {connection.vendor} ({test_db}); {HISTORY_MESSAGES} history messages, "
            f"{PACKAGES} KB packages ({LOADED_PACKAGES} loaded); {args.runs} runs"
        )
        print(
            f"prompt: {len(prepared.instructions):,} characters, {len(prepared.messages)} messages"
        )
        report("invoke", *measure(lambda: invoker.invoke(session=context, agent=agent), args.runs))
        report(
            "prepare", *measure(lambda: invoker.prepare(session=context, agent=agent), args.runs)
        )
    finally:
        connection.creation.destroy_test_db(test_db, verbosity=0)


if __name__ == "__main__":
    main()
