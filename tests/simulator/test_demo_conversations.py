"""The demo conversations: the generator plays its recordings through the real webhook, pipeline and
staff actions; it is deterministic, idempotent, and never reaches WhatsApp or OpenAI (their fakes,
configured with credentials, get no request)."""

import io
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.contrib.admin.models import LogEntry
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db.models import DateTimeField
from pytest_django import Settings

from agents.business_hours import BUSINESS_TZ
from conversations.models import (
    Direction,
    HandoffSummary,
    Lead,
    LLMCall,
    Message,
    WebhookDelivery,
)
from prompts_admin.models import DEFAULT_HANDOFF_MESSAGE_CLOSED, DEFAULT_HANDOFF_MESSAGE_OPEN
from simulator import demo
from simulator.demo import (
    DEMO_PHONE_PREFIX,
    DEMO_PHONES,
    DemoScriptError,
    Recording,
    Say,
    ScriptedLLM,
    demo_base_time,
    demo_conversations_load,
    demo_sessions,
)
from support.admin.template_picker import template_picker_for
from tests.fakes.graph_server import FakeGraphAPI
from tests.fakes.openai_server import FakeOpenAIServer

pytestmark = pytest.mark.django_db

# Monday 2026-11-30 15:00 in São Paulo: the conversations happen on Friday 2026-11-27.
NOW = datetime(2026, 11, 30, 15, 0, tzinfo=BUSINESS_TZ)


@pytest.fixture
def demo_catalog(settings: Settings) -> None:
    settings.DEBUG = True
    call_command("loaddata", "demo", verbosity=0)


@pytest.fixture
def outside(
    fake_graph: FakeGraphAPI, openai_settings: FakeOpenAIServer
) -> tuple[FakeGraphAPI, FakeOpenAIServer]:
    """WhatsApp and OpenAI configured with credentials, as fakes that record every request."""
    return fake_graph, openai_settings


def load(*args: str) -> str:
    out = io.StringIO()
    call_command("load_demo_conversations", *args, stdout=out)
    return out.getvalue()


def dump() -> list[dict[str, Any]]:
    """The demo conversations' content, without ids, uuids or times."""
    return [
        {
            "session": (
                s.customer_phone,
                s.customer_name,
                s.state,
                s.handoff_reason,
                s.handoff_detail,
                s.segment,
                s.intent,
                s.service,
                s.technical_data,
                s.registration_data,
                s.assigned_to.username if s.assigned_to else "",
            ),
            "messages": [
                (
                    m.direction,
                    m.message_type,
                    m.agent,
                    m.code,
                    m.action,
                    m.content,
                    m.raw_response,
                    m.delivery_status,
                    m.wa_message_id,
                    m.processed_at is not None,
                )
                for m in s.messages.order_by("id")
            ],
            "calls": list(
                LLMCall.objects.filter(session=s)
                .order_by("id")
                .values_list("purpose", "agent", "model", "outcome", "raw_response")
            ),
            "lead": s.lead.data if hasattr(s, "lead") else None,
            "summaries": list(
                HandoffSummary.objects.filter(session=s).values_list(
                    "closing_reason", "next_action", "summary_text", "key_points", "error"
                )
            ),
        }
        for s in demo_sessions().select_related("assigned_to").order_by("customer_phone")
    ]


def test_the_command_creates_the_five_conversations(
    demo_catalog: None, outside: tuple[FakeGraphAPI, FakeOpenAIServer]
) -> None:
    assert load() == "Loaded 5 demo conversations.\n"

    sessions = list(demo_sessions().order_by("customer_phone"))
    assert [
        (s.customer_name, s.state, s.handoff_reason, s.handoff_detail, s.summaries.count())
        for s in sessions
    ] == [
        ("Lucas Ferreira", "HUMAN", "qualified_lead", "", 1),
        ("Mariana Costa", "HUMAN", "model_requested", "pedido_cliente", 1),
        ("Roberto Almeida", "HUMAN", "model_requested", "reclamacao", 1),
        ("Patrícia Gomes", "QUALIFYING", "", "", 0),
        ("Fernanda Ribeiro", "HUMAN", "staff_takeover", "", 0),
    ]
    assert [s.customer_phone for s in sessions] == list(DEMO_PHONES)
    graph, openai = outside
    assert (graph.requests, openai.request_count) == ([], 0)


def test_a_demo_conversation_past_its_window_offers_the_demo_templates(
    demo_catalog: None, admin_user: Any
) -> None:
    # Loaded days before: every demo customer's window has closed by now.
    demo_conversations_load(now=NOW - timedelta(days=3))
    session = demo_sessions().get(customer_name="Lucas Ferreira")

    picker = template_picker_for(session=session, user=admin_user, now=NOW)

    assert picker is not None
    assert [(t.name, [p.label for p in t.parameters]) for t in picker.templates] == [
        ("resultado_pronto", ["Nome do cliente", "Análise"]),
        ("retomar_contato", ["Nome do cliente", "Laboratório"]),
    ]


def test_the_qualified_lead_has_its_lead_and_summary(demo_catalog: None) -> None:
    load()

    lead = demo_sessions().get(customer_name="Lucas Ferreira").lead
    assert lead.data == {
        "nome_cliente": "Lucas Ferreira",
        "telefone": "5511900000001",
        "segmento": "AMBIENTAL",
        "intencao": "ORCAMENTO",
        "servico": "AGUA_POTABILIDADE",
        "qualification_data": {
            "tipo_amostra": "poço e caixa d'água",
            "quantidade_amostras": 2,
            "cidade_coleta": "Valinhos",
        },
        "cadastro": {
            "nome": "Lucas Ferreira",
            "documento": "52998224725",
            "email": "lucas.ferreira@example.com",
        },
    }
    summary = lead.session.summaries.get()
    assert (summary.identified_service, summary.error, summary.collected_data["email"]) == (
        "Potabilidade da água",
        "",
        "lucas.ferreira@example.com",
    )


def test_the_qualified_lead_confirms_with_a_tap_on_the_confirmar_button(
    demo_catalog: None,
) -> None:
    load()

    session = demo_sessions().get(customer_name="Lucas Ferreira")
    confirmation = session.messages.get(direction=Direction.OUTBOUND, code=4)
    tap = session.messages.filter(direction=Direction.INBOUND).order_by("id").last()
    assert tap is not None
    assert confirmation.message_type == "interactive"
    assert confirmation.interactive is not None
    assert [b["reply"] for b in confirmation.interactive["action"]["buttons"]] == [
        {"id": "confirmar", "title": "Confirmar"},
        {"id": "corrigir", "title": "Corrigir"},
    ]
    assert (tap.content, tap.interactive, tap.reply_to_wamid) == (
        "Confirmar",
        {"type": "button_reply", "id": "confirmar", "title": "Confirmar"},
        confirmation.wa_message_id,
    )


def test_every_reply_is_marked_sent_with_a_demo_wamid(demo_catalog: None) -> None:
    load()

    outbound = Message.objects.filter(direction=Direction.OUTBOUND, session__in=demo_sessions())
    assert sorted(str(w) for w in outbound.values_list("wa_message_id", flat=True)) == sorted(
        f"demo.{n}" for n in range(1, 12)
    )
    assert set(outbound.values_list("delivery_status", flat=True)) == {"sent"}


def test_the_customer_who_asks_for_a_person_gets_the_fixed_text(demo_catalog: None) -> None:
    load()

    session = demo_sessions().get(customer_name="Mariana Costa")
    last = session.messages.filter(direction=Direction.OUTBOUND).order_by("id").last()
    assert last is not None
    assert (last.action, last.content) == ("model_requested", DEFAULT_HANDOFF_MESSAGE_OPEN)


def test_the_out_of_hours_handoff_sends_the_closed_text(demo_catalog: None) -> None:
    demo_conversations_load(now=NOW)

    session = demo_sessions().get(customer_name="Roberto Almeida")
    [reply] = session.messages.filter(direction=Direction.OUTBOUND)
    assert (reply.action, reply.content) == ("model_requested", DEFAULT_HANDOFF_MESSAGE_CLOSED)
    [inbound] = session.messages.filter(direction=Direction.INBOUND)
    assert inbound.wa_timestamp == datetime(2026, 11, 27, 21, 30, tzinfo=BUSINESS_TZ)


def at(hour: int, minute: int, second: int = 0) -> datetime:
    return datetime(2026, 11, 27, hour, minute, second, tzinfo=BUSINESS_TZ)


def test_the_out_of_hours_conversation_reads_on_its_own_clock(demo_catalog: None) -> None:
    demo_conversations_load(now=NOW)

    session = demo_sessions().get(customer_name="Roberto Almeida")
    [inbound] = session.messages.filter(direction=Direction.INBOUND)
    [reply] = session.messages.filter(direction=Direction.OUTBOUND)
    assert (session.created_at, inbound.created_at, inbound.processed_at) == (
        at(21, 30),
        at(21, 30),
        at(21, 30, 20),
    )
    assert (reply.created_at, reply.delivery_status_at, reply.last_send_attempt_at) == (
        at(21, 30, 20),
        at(21, 30, 20),
        at(21, 30, 20),
    )
    assert set(LLMCall.objects.filter(session=session).values_list("created_at", flat=True)) == {
        at(21, 30, 20)
    }
    assert session.summaries.get().created_at == at(21, 30, 20)


def test_every_row_of_every_demo_conversation_carries_the_conversation_s_clock(
    demo_catalog: None,
) -> None:
    """No stamp of the load's wall clock, and in each conversation the rows' times follow the
    order they were written in: the customer writes before the bot answers."""
    demo_conversations_load(now=NOW)

    sessions = list(demo_sessions())
    stamps: list[tuple[str, datetime]] = []
    for session in sessions:
        rows = [
            ("session", [session]),
            ("message", session.messages.order_by("id")),
            ("call", LLMCall.objects.filter(session=session).order_by("id")),
            ("summary", session.summaries.order_by("id")),
            ("lead", Lead.objects.filter(session=session)),
            ("log", LogEntry.objects.filter(object_id=str(session.pk))),
        ]
        for name, objects in rows:
            for obj in objects:
                stamps += [
                    (f"{name}.{f.name}", getattr(obj, f.name))
                    for f in type(obj)._meta.concrete_fields
                    if isinstance(f, DateTimeField) and getattr(obj, f.name) is not None
                ]
        created = list(session.messages.order_by("id").values_list("created_at", flat=True))
        assert created == sorted(created), session.customer_name
        assert session.created_at == created[0], session.customer_name
    for delivery in WebhookDelivery.objects.all():
        assert delivery.processed_at is not None
        stamps += [("delivery.received_at", delivery.received_at)]
        stamps += [("delivery.processed_at", delivery.processed_at)]
    assert len(sessions) == 5
    # The conversations happen on Friday 2026-11-27, between 10:00 and 21:31.
    assert [(name, when) for name, when in stamps if not at(10, 0) <= when <= at(21, 31)] == []


def test_the_format_repair_is_recorded(demo_catalog: None) -> None:
    load()

    session = demo_sessions().get(customer_name="Patrícia Gomes")
    assert list(
        LLMCall.objects.filter(session=session)
        .order_by("id")
        .values_list("purpose", "agent", "outcome")
    ) == [("agent", "triagem", "ok"), ("repair", "triagem", "ok"), ("agent", "qualificacao", "ok")]


def test_the_staff_takeover_replies_as_the_demo_staff_member(demo_catalog: None) -> None:
    load()

    session = demo_sessions().get(customer_name="Fernanda Ribeiro")
    rows = [
        (m.direction, m.message_type, m.staff_user.username if m.staff_user else "")
        for m in session.messages.select_related("staff_user").order_by("id")
    ]
    assert rows == [
        ("INBOUND", "text", ""),
        ("SYSTEM", "state_changed", ""),
        ("OUTBOUND", "text", ""),
        ("SYSTEM", "handoff", "camila.demo"),
        ("OUTBOUND", "text", "camila.demo"),
        ("INBOUND", "text", ""),
    ]
    # The bot stays out once staff took over: no message waits for a turn.
    assert session.messages.pending_inbound().count() == 0
    assert session.assigned_to is not None
    assert (session.assigned_to.username, session.assigned_to.is_active) == ("camila.demo", False)


def test_running_again_changes_nothing(demo_catalog: None) -> None:
    load()
    before = (dump(), Message.objects.count(), WebhookDelivery.objects.count())

    assert load() == "The demo conversations exist already (--reset recreates them).\n"

    assert (dump(), Message.objects.count(), WebhookDelivery.objects.count()) == before


def test_reset_recreates_identical_content(
    demo_catalog: None, outside: tuple[FakeGraphAPI, FakeOpenAIServer]
) -> None:
    load()
    first = dump()
    first_ids = set(demo_sessions().values_list("id", flat=True))

    assert load("--reset") == "Loaded 5 demo conversations.\n"

    assert dump() == first
    assert first_ids.isdisjoint(demo_sessions().values_list("id", flat=True))
    assert WebhookDelivery.objects.count() == 11
    graph, openai = outside
    assert (graph.requests, openai.request_count) == ([], 0)


def test_the_base_time_is_10h_of_the_last_weekday() -> None:
    assert demo_base_time(NOW) == datetime(2026, 11, 27, 10, 0, tzinfo=BUSINESS_TZ)
    tuesday = datetime(2026, 12, 1, 9, 0, tzinfo=BUSINESS_TZ)
    assert demo_base_time(tuesday) == datetime(2026, 11, 30, 10, 0, tzinfo=BUSINESS_TZ)


def test_the_command_refuses_without_debug(settings: Settings) -> None:
    settings.DEBUG = False

    with pytest.raises(CommandError, match="DEBUG=True"):
        load()

    assert not demo_sessions().exists()


def test_the_command_needs_the_demo_catalog(settings: Settings) -> None:
    settings.DEBUG = True

    with pytest.raises(CommandError, match="demo catalog is not loaded"):
        load()

    assert not demo_sessions().exists()


def test_a_call_beyond_the_recording_is_an_error() -> None:
    llm = ScriptedLLM(['{"s":1}Olá!'], name="sample")
    llm.chat(model="m", instructions="", messages=[], purpose="agent")

    with pytest.raises(DemoScriptError, match="sample: no recorded answer left for a agent call"):
        llm.chat(model="m", instructions="", messages=[], purpose="agent")


def test_an_unused_answer_is_an_error() -> None:
    llm = ScriptedLLM(['{"s":1}Olá!'], name="sample")

    with pytest.raises(DemoScriptError, match=r"sample: 1 recorded answer\(s\) unused"):
        llm.finish()


def test_bootstrap_loads_the_demo_conversations_once(settings: Settings) -> None:
    settings.DEBUG = True
    out = io.StringIO()

    call_command("bootstrap_dev", stdout=out)
    call_command("bootstrap_dev", stdout=out)

    assert out.getvalue().count("Loaded 5 demo conversations.") == 1
    assert demo_sessions().count() == 5


def test_a_recording_the_code_no_longer_follows_loads_nothing(
    demo_catalog: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The second recording lacks the answer of its turn: the whole load is rolled back.
    short = Recording(
        key="short",
        phone=f"{DEMO_PHONE_PREFIX}09",
        name="Cliente Demo",
        start=timedelta(0),
        steps=(Say("Olá!", 0),),
        answers=(),
    )
    monkeypatch.setattr(demo, "RECORDINGS", (demo.RECORDINGS[0], short))
    monkeypatch.setattr(demo, "DEMO_PHONES", (demo.RECORDINGS[0].phone, short.phone))

    with pytest.raises(DemoScriptError, match="short: no recorded answer left for a agent call"):
        demo_conversations_load(now=NOW)

    assert (demo_sessions().count(), Message.objects.count(), WebhookDelivery.objects.count()) == (
        0,
        0,
        0,
    )


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("CRM_WEBHOOK_URL", "https://crm.example.com/leads"),
        ("HANDOFF_NOTIFY_EMAILS", ["equipe@example.com"]),
        ("HANDOFF_WEBHOOK_URL", "https://alerts.example.com/hook"),
    ],
)
def test_a_configured_crm_or_alert_destination_keeps_the_demo_out(
    demo_catalog: None, settings: Settings, name: str, value: Any
) -> None:
    setattr(settings, name, value)

    with pytest.raises(CommandError, match=f"Not loaded: {name} set: the demo's lead and handoffs"):
        load()

    assert not demo_sessions().exists()


def test_bootstrap_says_why_it_skips_the_demo_conversations(settings: Settings) -> None:
    settings.DEBUG = True
    settings.CRM_WEBHOOK_URL = "https://crm.example.com/leads"
    out = io.StringIO()

    call_command("bootstrap_dev", stdout=out)

    assert "Demo conversations not loaded: CRM_WEBHOOK_URL set: " in out.getvalue()
    assert not demo_sessions().exists()
