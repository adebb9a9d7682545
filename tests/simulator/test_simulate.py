"""`python manage.py simulate`: a customer talks to the bot through the real webhook use case and
pipeline, the model answering from the fake OpenAI server; a fake Graph API with an access token
listens the whole time, and no request may reach it.

The tests commit (``transaction=True``): the command runs in autocommit, as it does from the
terminal, so the after-commit sends run as they do there."""

import json
import logging
from datetime import UTC, datetime
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from pytest_django import Settings

from conversations.models import Direction, Instance, Session, WebhookDelivery
from prompts_admin.models import RuntimeConfig
from simulator.management.commands.simulate import Command
from simulator.simulation import (
    SimulationError,
    simulated_phone_check,
    simulated_reply_send,
    simulated_text_delivery,
)
from tests import baker_recipes as recipes
from tests.fakes.graph_server import FakeGraphAPI
from tests.fakes.openai_server import FakeOpenAIServer
from tests.helpers.conversation_rows import reply
from tests.helpers.metrics import TOKEN, increase, scrape
from tests.helpers.webhooks import text_delivery
from whatsapp.client import is_simulated_wamid
from whatsapp.payload import InboundKind, parse_payload
from whatsapp.signature import compute_signature

HANDOFF_TEXT = "Um atendente vai continuar a conversa."
NO_MODEL = (
    "simulate needs a model: set OPENAI_API_KEY "
    "(and OPENAI_BASE_URL for any Responses-compatible server)."
)


@pytest.fixture
def demo_instance(db: None) -> Instance:
    """The demo catalog's number (100000000000001), the command's default."""
    instance: Instance = recipes.instance.make(name="Laboratório Demo")
    return instance


@pytest.fixture
def model(openai_settings: FakeOpenAIServer) -> FakeOpenAIServer:
    return openai_settings


def simulate(*args: str, stdin: str | None = None) -> str:
    out = StringIO()
    options: dict[str, Any] = {"stdout": out}
    if stdin is not None:
        options["stdin"] = StringIO(stdin)
    call_command("simulate", *args, **options)
    return out.getvalue()


def json_lines(output: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in output.splitlines()]


def test_the_payload_builder_makes_one_text_message_the_webhook_parser_reads() -> None:
    document = simulated_text_delivery(
        phone_number_id="100000000000001",
        phone="5500000000001",
        text="Oi",
        wamid="wamid.SIM1",
        timestamp=1_764_500_000,
        name="Cliente Simulado",
    )

    [message] = parse_payload(document).messages

    assert (
        message.phone_number_id,
        message.wamid,
        message.timestamp,
        message.kind,
        message.text,
        message.customer.phone,
        message.customer.name,
    ) == (
        "100000000000001",
        "wamid.SIM1",
        datetime.fromtimestamp(1_764_500_000, tz=UTC),
        InboundKind.TEXT,
        "Oi",
        "5500000000001",
        "Cliente Simulado",
    )


@pytest.mark.django_db(transaction=True)
def test_say_prints_the_replies_and_sends_nothing_to_whatsapp(
    demo_instance: Instance, model: FakeOpenAIServer, fake_graph: FakeGraphAPI
) -> None:
    model.queue_text('{"s":1}Olá! Sou a **Lia**. Como posso ajudar?', input_tokens=1000)

    output = simulate("--say", "Oi")

    session = Session.objects.get()
    assert output == (
        "você> Oi\n"
        "bot> Olá! Sou a *Lia*. Como posso ajudar?\n"
        f"     (conversa #{session.pk} · estado Triagem · código 1 · agentes triagem · "
        "tokens 1000 de entrada / 5 de saída · US$ 0,000153)\n"
    )
    assert fake_graph.requests == []
    assert (session.customer_phone, session.is_simulated) == ("5500000000001", True)
    [reply] = session.messages.filter(direction=Direction.OUTBOUND)
    assert (reply.delivery_status, is_simulated_wamid(reply.wa_message_id)) == ("sent", True)


@pytest.mark.django_db(transaction=True)
def test_json_prints_one_exact_object_per_customer_message(
    demo_instance: Instance, model: FakeOpenAIServer, fake_graph: FakeGraphAPI
) -> None:
    model.queue_text('{"s":1}Olá! Como posso ajudar?', input_tokens=1000, output_tokens=100)
    model.queue_text(
        '{"s":1,"opcoes":["Orçamento","Coleta"]}Certo, de qual análise?',
        input_tokens=2000,
        cached_tokens=1536,
        output_tokens=10,
    )

    output = simulate("--json", "--say", "Oi", "--say", "Quero um orçamento")

    session = Session.objects.get()
    common = {
        "session_id": session.pk,
        "state": "TRIAGE",
        "code": 1,
        "handoff_reason": "",
        "agents": ["triagem"],
        "packages": [],
    }
    assert json_lines(output) == [
        {
            **common,
            "replies": ["Olá! Como posso ajudar?"],
            "options": [],
            "tokens": {"input": 1000, "cached": 0, "output": 100},
            "cost_usd": 0.00021,
        },
        {
            **common,
            "replies": ["Certo, de qual análise?"],
            "options": [{"id": "opt1", "title": "Orçamento"}, {"id": "opt2", "title": "Coleta"}],
            "tokens": {"input": 2000, "cached": 1536, "output": 10},
            # gpt-4o-mini: 464 × 0.15 + 1536 × 0.075 + 10 × 0.60 per million, to 6 places.
            "cost_usd": 0.000191,
        },
    ]
    assert fake_graph.requests == []


@pytest.mark.django_db(transaction=True)
def test_the_same_phone_continues_the_same_session_across_runs(
    demo_instance: Instance, model: FakeOpenAIServer, fake_graph: FakeGraphAPI
) -> None:
    model.queue_text('{"s":1}Olá!')
    model.queue_text('{"s":1}Pode falar.')

    first = json_lines(simulate("--json", "--say", "Oi"))
    second = json_lines(simulate("--json", "--say", "Ainda estou aqui"))

    [session] = Session.objects.all()
    assert [first[0]["session_id"], second[0]["session_id"]] == [session.pk, session.pk]
    assert list(
        session.messages.filter(direction=Direction.INBOUND).values_list("content", flat=True)
    ) == ["Oi", "Ainda estou aqui"]
    assert fake_graph.requests == []


@pytest.mark.django_db(transaction=True)
def test_a_handoff_shows_its_reason_and_the_fixed_text(
    demo_instance: Instance, model: FakeOpenAIServer, fake_graph: FakeGraphAPI
) -> None:
    config = RuntimeConfig.load()
    config.handoff_message_open = config.handoff_message_closed = HANDOFF_TEXT
    config.save()
    model.queue_text('{"s":98,"motivo":"pedido_cliente"}')
    model.queue_text('{"motivo_encerramento": "Cliente pediu um atendente"}')

    report, later = json_lines(
        simulate("--json", "--say", "Quero falar com uma pessoa", "--say", "Alguém aí?")
    )

    assert {k: report[k] for k in ("replies", "state", "code", "handoff_reason", "agents")} == {
        "replies": [HANDOFF_TEXT],
        "state": "HUMAN",
        "code": 98,
        "handoff_reason": "model_requested",
        "agents": ["triagem"],
    }
    session = Session.objects.get()
    # With a human now: the next message is stored for staff, no model call, nothing sent.
    assert later == {
        "session_id": session.pk,
        "replies": [],
        "options": [],
        "state": "HUMAN",
        "code": None,
        "handoff_reason": "model_requested",
        "agents": [],
        "packages": [],
        "tokens": {"input": 0, "cached": 0, "output": 0},
        "cost_usd": 0.0,
    }
    assert session.summaries.get().closing_reason == "Cliente pediu um atendente"
    assert model.request_count == 2
    assert fake_graph.requests == []


@pytest.mark.django_db(transaction=True)
def test_interactive_mode_answers_each_line_and_reset_opens_a_new_session(
    demo_instance: Instance, model: FakeOpenAIServer, fake_graph: FakeGraphAPI
) -> None:
    model.queue_text('{"s":1}Olá!')
    model.queue_text('{"s":1}Olá de novo!')

    output = simulate("--json", stdin="Oi\n\n/reset\nOi de novo\n/quit\nnunca lido\n")

    first, second = Session.objects.order_by("id")
    assert [(r["session_id"], r["replies"]) for r in json_lines(output)] == [
        (first.pk, ["Olá!"]),
        (second.pk, ["Olá de novo!"]),
    ]
    assert (first.state, first.is_simulated, second.state, second.is_simulated) == (
        "CLOSED",
        True,
        "TRIAGE",
        True,
    )
    assert fake_graph.requests == []


@pytest.mark.django_db(transaction=True)
def test_interactive_mode_prompts_and_prints_the_replies(
    demo_instance: Instance, model: FakeOpenAIServer, fake_graph: FakeGraphAPI
) -> None:
    model.queue_text('{"s":1}Olá!')

    output = simulate(stdin="Oi\n/reset\n/reset\n")

    session = Session.objects.get()
    assert output == (
        "Cliente simulado 5500000000001 em Laboratório Demo (100000000000001) "
        "(nada é enviado ao WhatsApp). /reset começa uma nova conversa, /quit sai.\n"
        "você> bot> Olá!\n"
        f"     (conversa #{session.pk} · estado Triagem · código 1 · agentes triagem · "
        "tokens 10 de entrada / 5 de saída · US$ 0,000005)\n"
        f"você> (conversa #{session.pk} encerrada)\n"
        "você> (nenhuma conversa aberta)\n"
        "você> "
    )


def test_without_a_model_key_it_says_what_to_set_in_one_line(settings: Settings) -> None:
    settings.OPENAI_API_KEY = ""

    with pytest.raises(CommandError) as raised:
        simulate("--say", "Oi")

    assert (str(raised.value), raised.value.returncode) == (NO_MODEL, 1)


def test_from_the_command_line_without_a_key_it_exits_non_zero_with_one_line(
    settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    settings.OPENAI_API_KEY = ""

    with pytest.raises(SystemExit) as exited:
        Command().run_from_argv(["manage.py", "simulate", "--say", "Oi"])

    captured = capsys.readouterr()
    assert (exited.value.code, captured.out, captured.err) == (1, "", f"CommandError: {NO_MODEL}\n")


@pytest.mark.django_db
def test_without_the_demo_instance_it_says_how_to_get_one(model: FakeOpenAIServer) -> None:
    with pytest.raises(CommandError) as raised:
        simulate("--say", "Oi")

    assert str(raised.value) == (
        "No active instance with phone_number_id 100000000000001: run `make bootstrap` "
        "(it loads the demo catalog) or pass --instance."
    )


@pytest.mark.django_db
@pytest.mark.parametrize("phone", ["55000000abc01", "55000000\u00b20001"])
def test_a_phone_that_is_not_ascii_digits_is_refused(
    demo_instance: Instance, model: FakeOpenAIServer, phone: str
) -> None:
    with pytest.raises(CommandError) as raised:
        simulate("--phone", phone, "--say", "Oi")

    assert str(raised.value) == (
        f"{phone} is not a simulator phone: use 12 or 13 digits starting with 5500 "
        "(no real customer has one), e.g. 5500000000001."
    )
    assert Session.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_a_real_customer_s_phone_is_refused_and_their_next_message_reaches_them(
    client: Client,
    demo_instance: Instance,
    model: FakeOpenAIServer,
    fake_graph: FakeGraphAPI,
    settings: Settings,
) -> None:
    """Their real conversation is closed: the simulator still refuses their phone (it is outside
    the reserved range), and their next message opens a real conversation, answered through
    WhatsApp."""
    settings.WHATSAPP_APP_SECRET = "test-app-secret"
    closed = recipes.session.make(
        instance=demo_instance, customer_phone="5511987654321", state="CLOSED"
    )

    with pytest.raises(CommandError) as raised:
        simulate("--phone", "5511987654321", "--say", "Oi")
    model.queue_text('{"s":1}Olá, Maria!')
    body = text_delivery(phone="5511987654321", wamid="wamid.REAL1", text="Oi, voltei")
    response = client.post(
        "/webhooks/whatsapp/",
        body,
        content_type="application/json",
        HTTP_X_HUB_SIGNATURE_256=compute_signature(body=body, secret="test-app-secret"),
    )

    assert str(raised.value) == (
        "5511987654321 is not a simulator phone: use 12 or 13 digits starting with 5500 "
        "(no real customer has one), e.g. 5500000000001."
    )
    assert response.status_code == 200
    [closed_after, real] = Session.objects.order_by("id")
    assert (closed_after.pk, closed_after.messages.count()) == (closed.pk, 0)
    assert (real.customer_phone, real.is_simulated) == ("5511987654321", False)
    [reply] = real.messages.filter(direction=Direction.OUTBOUND)
    assert (reply.content, is_simulated_wamid(reply.wa_message_id)) == ("Olá, Maria!", False)
    assert [request.json["to"] for request in fake_graph.sends] == ["5511987654321"]


@pytest.mark.parametrize(
    ("phone", "accepted"),
    [
        ("55000000001", False),  # 11 digits
        ("550000000001", True),  # 12
        ("5500000000001", True),  # 13
        ("55000000000001", False),  # 14
        ("5501000000001", False),  # 55 01: outside the range
        ("+5500000000001", False),
    ],
)
def test_only_phones_of_the_reserved_range_are_accepted(phone: str, accepted: bool) -> None:
    try:
        simulated_phone_check(phone)
    except SimulationError:
        refused = True
    else:
        refused = False

    assert refused is not accepted


@pytest.mark.django_db
def test_a_reserved_phone_a_real_conversation_used_is_refused(
    demo_instance: Instance, model: FakeOpenAIServer, fake_graph: FakeGraphAPI
) -> None:
    real = recipes.session.make(
        instance=demo_instance, customer_phone="5500000000007", state="CLOSED"
    )

    with pytest.raises(CommandError) as raised:
        simulate("--phone", "5500000000007", "--say", "Oi")

    assert str(raised.value) == (
        "5500000000007 has a conversation of a real customer; use another simulator phone."
    )
    real.refresh_from_db()
    assert (real.is_simulated, Session.objects.count(), fake_graph.requests) == (False, 1, [])


@pytest.mark.django_db(transaction=True)
def test_a_simulated_message_writes_no_webhook_delivery_and_counts_in_no_metric(
    client: Client,
    demo_instance: Instance,
    model: FakeOpenAIServer,
    fake_graph: FakeGraphAPI,
    settings: Settings,
) -> None:
    """Turns, model calls (latency, tokens, cost), sends and webhook deliveries: none moves."""
    settings.METRICS_TOKEN = TOKEN
    model.queue_text('{"s":1}Olá!', input_tokens=1000)
    before = scrape(client)

    simulate("--say", "Oi")

    after = scrape(client)
    assert Session.objects.get().messages.count() == 2
    assert WebhookDelivery.objects.count() == 0
    assert increase(before, after, "lab_attendance_") == {}


@pytest.mark.django_db(transaction=True)
def test_log_lines_below_warning_are_hidden_unless_verbose(
    demo_instance: Instance,
    model: FakeOpenAIServer,
    fake_graph: FakeGraphAPI,
    caplog: pytest.LogCaptureFixture,
) -> None:
    model.queue_text('{"s":1}Olá!')
    model.queue_text('{"s":1}Pode falar.')
    caplog.set_level(logging.INFO)

    simulate("--say", "Oi")
    quiet = [r.getMessage() for r in caplog.records if r.name.startswith("conversations")]
    disabled_after = logging.root.manager.disable
    call_command("simulate", "--say", "Ainda aqui", verbosity=2, stdout=StringIO())
    verbose = [r.getMessage() for r in caplog.records if r.name.startswith("conversations")]

    assert (quiet, disabled_after) == ([], logging.NOTSET)
    assert "turn_finished" in verbose
    assert "whatsapp_send_simulated" in verbose


@pytest.mark.django_db
def test_the_simulator_s_sender_is_the_dry_run_one_whatever_the_session_says(
    demo_instance: Instance, fake_graph: FakeGraphAPI
) -> None:
    """The simulator's own guard, on its own: a token is set and the session is not marked
    simulated (so `sending.sender_for` would let a real client through), and still nothing
    reaches the Graph API."""
    session = recipes.session.make(instance=demo_instance, customer_phone="5500000000001")
    message = reply(session, "Olá!")

    simulated_reply_send(message.pk)

    assert fake_graph.requests == []
    message.refresh_from_db()
    assert (is_simulated_wamid(message.wa_message_id), message.delivery_status) == (True, "sent")


@pytest.mark.django_db(transaction=True)
def test_say_prints_the_last_reply_s_options_in_brackets(
    demo_instance: Instance, model: FakeOpenAIServer, fake_graph: FakeGraphAPI
) -> None:
    model.queue_text('{"s":1,"opcoes":["Alimentos","Ambiental"]}Qual é o segmento?')

    output = simulate("--say", "Oi")

    assert output.splitlines()[1:3] == ["bot> Qual é o segmento?", "     [Alimentos] [Ambiental]"]
    assert fake_graph.requests == []
