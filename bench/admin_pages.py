"""Benchmark of the staff's admin pages on a realistic PostgreSQL database.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/lab_attendance_bench \\
        .venv/bin/python bench/admin_pages.py [--runs 20] [--reseed] [--explain] [--only live]

Creates the database when it is missing, migrates it, seeds 10,000 sessions and 200,000 messages
(plus model calls and handoff summaries) with COPY once, then requests each page through Django's
test client as a logged-in superuser and prints, per page, the median and 90th-percentile server
time and the number of SQL queries. Seeding is skipped when the data are already there.

The queue (docs/architecture.md, The queue): a sixth of the sessions are with a human (1,667),
handed off an hour before their last message; of those, a fifth have no staff reply (333 waiting,
half of them the bench user's: "mine"), a tenth were answered and the customer wrote again (167
waiting: the queue's subquery looks for the first message after the reply in each), the rest were
answered after the customer's last message (not waiting): 500 waiting.
"""

import argparse
import os
import random
import statistics
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from django.db.backends.utils import CursorWrapper

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.support import ensure_database, production_settings_env  # noqa: E402

production_settings_env()

N_SESSIONS = 10_000
N_MESSAGES = 200_000
TRANSCRIPT_MESSAGES = 300
RARE_TERM = "poço artesiano"  # in the messages of a handful of sessions
COMMON_TERM = "orçamento"  # in roughly one message in six
STATES = ["TRIAGE", "QUALIFYING", "DATA_COLLECT", "CONFIRM", "HUMAN", "CLOSED"]
SEGMENTS = ["HUMANO", "AMBIENTAL", "ALIMENTOS", "ANIMAL", ""]
REASONS = ["", "", "qualified_lead", "model_requested", "llm_timeout", "staff_takeover"]
INBOUND_TEXTS = [
    "Olá, bom dia! Gostaria de um orçamento de análise de água.",
    "Quanto tempo demora para sair o laudo?",
    "É água de poço, são 3 amostras.",
    "Vocês fazem coleta em Campinas?",
    "Preciso da tabela nutricional de um biscoito.",
    "Meu nome é Maria, CPF 123.456.789-09.",
    "Pode mandar o orçamento por e-mail?",
    "Obrigado!",
]
OUTBOUND_TEXTS = [
    "Olá! Sou a Lia, assistente do Laboratório Vale Analítico. Como posso ajudar?",
    "Claro! Qual é o tipo de amostra e quantas amostras serão analisadas?",
    "Perfeito. Em qual cidade será a coleta?",
    "Anotado. Para preparar o orçamento, preciso do seu nome completo e e-mail.",
    "Obrigada! Vou transferir seu atendimento para um especialista da nossa equipe.",
]


def queue_fields(
    i: int, *, last: datetime, user_id: int
) -> tuple[datetime | None, datetime | None, int | None, str]:
    """(handed_off_at, last_staff_reply_at, assigned_to_id, handoff_detail) of session `i`."""
    if STATES[i % len(STATES)] != "HUMAN":
        return (None, None, None, "")
    handed_off_at = last - timedelta(hours=1)
    detail = "pedido_cliente" if REASONS[i % len(REASONS)] == "model_requested" else ""
    kind = (i // len(STATES)) % 10
    if kind in (0, 1):  # never answered: waiting since the handoff
        return (handed_off_at, None, user_id if kind == 0 else None, detail)
    if kind == 2:  # answered, then the customer wrote again (`last`): waiting since then
        return (handed_off_at, last - timedelta(minutes=30), None, detail)
    return (handed_off_at, last + timedelta(minutes=1), user_id if kind == 3 else None, detail)


def seed(rng: random.Random, *, user_id: int) -> int:
    """Seed with COPY; returns the id of the session whose transcript has 300 messages."""
    from django.db import connection

    from agents.phones import customer_phone_key
    from conversations.models import Instance, Session

    started = time.perf_counter()
    instances = [
        Instance.objects.create(phone_number_id=f"10000000000000{i}", name=f"Bench {i}")
        for i in (1, 2)
    ]
    now = datetime.now(UTC)
    session_rows = []
    for i in range(N_SESSIONS):
        last = now - timedelta(minutes=i * 7)
        state = STATES[i % len(STATES)]
        session_rows.append(
            (
                instances[i % 2].pk,
                f"5511{900000000 + i}",
                f"Cliente {i}",
                f"{10000000000 + i:011d}" if i % 3 == 0 else "",
                state,
                SEGMENTS[i % len(SEGMENTS)],
                REASONS[i % len(REASONS)] if state == "HUMAN" else "",
                last - timedelta(hours=2),
                last,
                last,
                *queue_fields(i, last=last, user_id=user_id),
            )
        )
    with connection.cursor() as cursor:
        with cursor.copy(
            "COPY conversations_session (instance_id, customer_phone, customer_name,"
            " customer_document, state, segment, handoff_reason, created_at, last_inbound_at,"
            " last_message_at, handed_off_at, last_staff_reply_at, assigned_to_id,"
            " handoff_detail, customer_user_id, intent, service, technical_data,"
            " technical_extras, registration_data, registration_extras, loaded_packages,"
            " state_before_handoff, updated_at, is_simulated, prompt_versions,"
            " customer_phone_key) FROM STDIN"
        ) as copy:
            for row in session_rows:
                key = customer_phone_key(row[1])
                copy.write_row(
                    (*row, "", "", "", "{}", "{}", "{}", "{}", "[]", "", now, False, "{}", key)
                )
        session_ids = list(Session.objects.order_by("id").values_list("id", flat=True))

        transcript_session = session_ids[0]
        # The first session gets exactly 300 messages; the rest share the remainder.
        per_session = {transcript_session: TRANSCRIPT_MESSAGES}
        remaining = N_MESSAGES - TRANSCRIPT_MESSAGES
        others = session_ids[1:]
        for index, sid in enumerate(others):
            per_session[sid] = remaining // len(others) + (
                1 if index < remaining % len(others) else 0
            )
        rare_sessions = set(rng.sample(others, 5))

        with cursor.copy(
            "COPY conversations_message (session_id, direction, message_type, agent, content,"
            " raw_response, action, error, turn_id, part_index, created_at, wa_timestamp,"
            " delivery_status, delivery_error_title, send_attempts, reply_to_wamid, reaction)"
            " FROM STDIN"
        ) as copy:
            for sid, count in per_session.items():
                start = now - timedelta(days=2)
                turn = uuid.uuid4()
                for n in range(count):
                    inbound = n % 2 == 0
                    if inbound:
                        turn = uuid.uuid4()
                        text = rng.choice(INBOUND_TEXTS)
                        if sid in rare_sessions and n == 2:
                            text = f"A água vem de um {RARE_TERM} no sítio."
                    else:
                        text = rng.choice(OUTBOUND_TEXTS)
                    copy.write_row(
                        (
                            sid,
                            "INBOUND" if inbound else "OUTBOUND",
                            "text",
                            "" if inbound else "triagem",
                            text,
                            "",
                            "",
                            "superseded" if not inbound and n % 40 == 1 else "",
                            turn,
                            0,
                            start + timedelta(seconds=n * 30),
                            start + timedelta(seconds=n * 30) if inbound else None,
                            "" if inbound else "read",
                            "",
                            0 if inbound else 1,
                            "",
                            "",
                        )
                    )
        turns = _turns(cursor)
        with cursor.copy(
            "COPY conversations_llmcall (session_id, turn_id, agent, purpose, model,"
            " tokens_input, cached_tokens, tokens_output, latency_ms, attempts, outcome, error,"
            " prompt_version,"
            " raw_response, created_at) FROM STDIN"
        ) as copy:
            for sid, turn_id in turns:
                copy.write_row(
                    (
                        sid,
                        turn_id,
                        "triagem",
                        "agent",
                        "gpt-4o-mini",
                        rng.randint(800, 3000),
                        0,
                        rng.randint(40, 400),
                        rng.randint(400, 3000),
                        1,
                        "ok",
                        "",
                        "builtin",
                        "",
                        now,
                    )
                )
        cursor.execute(
            "INSERT INTO conversations_handoffsummary (session_id, closing_reason,"
            " identified_service, segment, key_points, collected_data, next_action,"
            " summary_text, raw_json, error, model, created_at)"
            " SELECT id, 'Cliente pediu orçamento', 'AGUA_POTABILIDADE', segment,"
            " '[\"3 amostras\"]', '{\"cidade\": \"Campinas\"}', 'Enviar orçamento',"
            " 'Resumo da conversa.', '', '', 'gpt-4o-mini', now()"
            " FROM conversations_session WHERE state = 'HUMAN' OR id = %s",
            [transcript_session],
        )
        cursor.execute("ANALYZE")
    print(f"seeded in {time.perf_counter() - started:.1f} s")
    return transcript_session


def _turns(cursor: "CursorWrapper") -> list[tuple[int, uuid.UUID]]:
    """One model call per bot answer: the (session, turn) of every outbound message."""
    cursor.execute(
        "SELECT session_id, turn_id FROM conversations_message WHERE direction = 'OUTBOUND'"
    )
    rows: list[tuple[int, uuid.UUID]] = cursor.fetchall()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20, help="measured requests per page")
    parser.add_argument("--reseed", action="store_true", help="flush the data and seed again")
    parser.add_argument("--explain", action="store_true", help="print the search query plan")
    parser.add_argument("--only", default="", help="measure only the pages whose name has this")
    args = parser.parse_args()

    url = os.environ.get("DATABASE_URL", "")
    ensure_database(url, script="bench/admin_pages.py")

    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection, transaction
    from django.test import Client, override_settings
    from django.test.utils import CaptureQueriesContext
    from django.urls import reverse

    from conversations.models import Message, Session
    from support.admin.sessions import sessions_search
    from support.queue import waiting_count, waiting_sessions

    # The page's static URLs without `collectstatic`'s manifest (DEBUG is off here).
    override_settings(
        STORAGES={
            **settings.STORAGES,
            "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
        }
    ).enable()

    def bench_user() -> Any:
        user_model = get_user_model()
        user = user_model.objects.filter(username="bench-admin").first()
        if user is None:
            user = user_model.objects.create_superuser("bench-admin", "bench@localhost", None)
        return user

    call_command("migrate", verbosity=0)
    if args.reseed:
        call_command("flush", interactive=False, verbosity=0)
    if (
        Session.objects.count() < N_SESSIONS
        # Seeded before the queue's columns: seed again.
        or not Session.objects.filter(handed_off_at__isnull=False).exists()
    ):
        call_command("flush", interactive=False, verbosity=0)
        with transaction.atomic():  # an interrupted seed leaves nothing behind
            admin_user = bench_user()
            transcript_session = seed(random.Random(42), user_id=admin_user.pk)
    else:
        transcript_session = Session.objects.order_by("id").values_list("id", flat=True)[0]
    print(
        f"{Session.objects.count():,} sessions, {Message.objects.count():,} messages; "
        f"transcript session #{transcript_session} has "
        f"{Message.objects.filter(session_id=transcript_session).count()} messages"
    )

    print(f"{waiting_count()} customers waiting in the queue")
    admin_user = bench_user()
    client = Client()
    client.force_login(admin_user)

    base = reverse("admin:conversations_session_changelist")  # follows ADMIN_URL
    transcript_ids = list(
        Message.objects.filter(session_id=transcript_session)
        .order_by("-id")
        .values_list("id", flat=True)[:11]
    )
    last_id, tenth_last_id = transcript_ids[0], transcript_ids[10]
    pages = [
        ("sessions list", base),
        ("filtered list (state+segment)", base + "?state__exact=HUMAN&segment=AMBIENTAL"),
        ("search, rare text", base + "?q=" + RARE_TERM),
        ("search, common text", base + "?q=" + COMMON_TERM),
        ("search, phone", base + "?q=(11) 90000-1234"),
        ("transcript, 300 messages", f"{base}{transcript_session}/change/"),
        ("queue (500 waiting, 100 a page)", base + "queue/"),
        ("queue, mine", base + "queue/?assigned=me"),
        ("queue, page 5", base + "queue/?page=5"),
        ("admin index (header count)", reverse("admin:index")),
        # The page's poll (support.live): the newest message shown, nothing new; then the
        # last ten messages new, as after a burst.
        ("live, nothing new", f"{base}{transcript_session}/live/?after={last_id}"),
        ("live, 10 new messages", f"{base}{transcript_session}/live/?after={tenth_last_id}"),
    ]
    if args.explain:
        query = sessions_search(queryset=Session.objects.all(), term=RARE_TERM)[:50]
        print(query.explain(analyze=True))
        print(waiting_sessions()[:100].explain(analyze=True))

    print(f"\n{'page':34} {'median ms':>10} {'p90 ms':>8} {'queries':>8}")
    for name, path in pages:
        if args.only not in name:
            continue
        for _ in range(2):  # warm-up: template and content-type caches, connection
            response = client.get(path, secure=True)
            assert response.status_code == 200, (path, response.status_code)
        timings = []
        query_counts = set()
        for _ in range(args.runs):
            with CaptureQueriesContext(connection) as queries:
                started = time.perf_counter()
                client.get(path, secure=True)
                timings.append((time.perf_counter() - started) * 1000)
            query_counts.add(len(queries))
        p90 = statistics.quantiles(timings, n=10)[-1] if len(timings) > 1 else timings[0]
        counts = "/".join(str(c) for c in sorted(query_counts))
        print(f"{name:34} {statistics.median(timings):10.1f} {p90:8.1f} {counts:>8}")


if __name__ == "__main__":
    main()
