"""Code 4's buttons through the real webhook, the real OpenAI client against the fake Responses
server and the real httpx client against the fake Graph API (the embedded default: eager tasks):
the exact interactive payload Meta receives, and a tap on "Confirmar" that leads through code 5
to the lead exactly as a typed "sim" does — or on "Corrigir", back to the data collection."""

import copy
import json
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone
from pytest_django import DjangoCaptureOnCommitCallbacks

from agents.states import SessionState
from conversations.models import Direction, Lead, Message, Session
from tests import baker_recipes as recipes
from tests.fakes.graph_server import FakeGraphAPI
from tests.fakes.openai_server import FakeOpenAIServer
from tests.helpers.meta_payloads import CUSTOMER_PHONE, encode, load_fixture, signed_post
from tests.helpers.model_requests import history_of

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("catalog")]

REGISTRATION = {"nome": "Ana Lima", "documento": "52998224725", "email": "ana@example.com"}
SUMMARY = "Confere seus dados: *Ana Lima*, CPF 529.982.247-25, ana@example.com. Está tudo certo?"
CODE_4 = (
    '{"s":4,"cadastro":{"nome":"Ana Lima","documento":"52998224725","email":"ana@example.com"}}'
    "Confere seus dados: **Ana Lima**, CPF 529.982.247-25, ana@example.com. Está tudo certo?"
)


@pytest.fixture
def collecting() -> Session:
    """The fixtures' customer in DATA_COLLECT, the service and its parameters known."""
    session: Session = recipes.known_customer.make(
        instance=recipes.instance.make(access_token=""),
        state=SessionState.DATA_COLLECT.value,
        segment="AMBIENTAL",
        intent="ORCAMENTO",
        service="AGUA_POTABILIDADE",
        technical_data={"tipo_amostra": "poço", "quantidade_amostras": 2},
        last_message_at=timezone.now(),
    )
    return session


def text_delivery(wamid: str, text: str) -> bytes:
    document = load_fixture("text")
    message = document["entry"][0]["changes"][0]["value"]["messages"][0]
    message.update(id=wamid, timestamp=str(int(timezone.now().timestamp())), text={"body": text})
    return encode(document)


def tap_delivery(wamid: str, *, button_id: str, title: str, quoted: str) -> bytes:
    """A tap on one of our reply buttons, as the Cloud API delivers it."""
    document = copy.deepcopy(load_fixture("interactive_button_reply"))
    message = document["entry"][0]["changes"][0]["value"]["messages"][0]
    message.update(
        id=wamid,
        timestamp=str(int(timezone.now().timestamp())),
        interactive={"type": "button_reply", "button_reply": {"id": button_id, "title": title}},
        context={"from": "5511999990000", "id": quoted},
    )
    return encode(document)


def post(client: Client, capture: DjangoCaptureOnCommitCallbacks, body: bytes) -> None:
    # The webhook commits the message; its hook runs the turn in-process, whose hooks send.
    with capture(execute=True):
        response = signed_post(client, body)
    assert response.status_code == 200


def conversation(request: dict[str, Any]) -> list[tuple[str, str]]:
    """The history a model request carried: (role, text) of each message."""
    return [(item["role"], item["content"]) for item in history_of(request) if "role" in item]


def ask_confirmation(
    client: Client,
    capture: DjangoCaptureOnCommitCallbacks,
    openai: FakeOpenAIServer,
    graph: FakeGraphAPI,
) -> Message:
    openai.queue_text(CODE_4)
    post(client, capture, text_delivery("wamid.EMAIL01", "ana@example.com"))
    [summary] = Message.objects.filter(direction=Direction.OUTBOUND)
    assert summary.wa_message_id is not None
    return summary


def test_code_4_reaches_the_graph_api_as_reply_buttons_under_the_model_s_text(
    client: Client,
    collecting: Session,
    openai_settings: FakeOpenAIServer,
    fake_graph: FakeGraphAPI,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    summary = ask_confirmation(
        client, django_capture_on_commit_callbacks, openai_settings, fake_graph
    )

    [send] = fake_graph.sends
    assert send.json == {
        "messaging_product": "whatsapp",
        "recipient_type": "individual",
        "to": CUSTOMER_PHONE,
        "type": "interactive",
        "interactive": {
            "type": "button",
            "body": {"text": SUMMARY},
            "action": {
                "buttons": [
                    {"type": "reply", "reply": {"id": "confirmar", "title": "Confirmar"}},
                    {"type": "reply", "reply": {"id": "corrigir", "title": "Corrigir"}},
                ]
            },
        },
        "biz_opaque_callback_data": f"message:{summary.pk}",
    }
    assert (summary.message_type, summary.content, summary.delivery_status) == (
        "interactive",
        SUMMARY,
        "sent",
    )
    assert summary.interactive == send.json["interactive"]
    collecting.refresh_from_db()
    assert (collecting.state, collecting.confirmation_data) == ("CONFIRM", REGISTRATION)


def test_a_tap_on_confirmar_reaches_the_model_as_the_customer_s_text_and_code_5_makes_the_lead(
    client: Client,
    collecting: Session,
    openai_settings: FakeOpenAIServer,
    fake_graph: FakeGraphAPI,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    summary = ask_confirmation(
        client, django_capture_on_commit_callbacks, openai_settings, fake_graph
    )
    openai_settings.queue_text('{"s":5}Perfeito, Ana! Sua solicitação foi registrada.')
    openai_settings.queue_text(json.dumps({"proxima_acao": "Enviar o orçamento"}))

    post(
        client,
        django_capture_on_commit_callbacks,
        tap_delivery(
            "wamid.TAP01",
            button_id="confirmar",
            title="Confirmar",
            quoted=str(summary.wa_message_id),
        ),
    )

    tap = Message.objects.get(wa_message_id="wamid.TAP01")
    assert (tap.content, tap.interactive, tap.reply_to_wamid) == (
        "Confirmar",
        {"type": "button_reply", "id": "confirmar", "title": "Confirmar"},
        "wamid.FAKE0001",
    )
    agent_call = openai_settings.requests[1]
    # The model reads the summary it wrote, then the tap as the customer's answer...
    assert conversation(agent_call)[-2:] == [("assistant", SUMMARY), ("user", "Confirmar")]
    # ...and the contract of CONFIRM tells it that "Confirmar" is a "sim".
    assert '"Confirmar" confirma os dados, como um "sim" (código 5)' in agent_call["instructions"]
    lead = Lead.objects.get(session=collecting)
    assert lead.data["cadastro"] == REGISTRATION
    collecting.refresh_from_db()
    assert (collecting.state, collecting.handoff_reason) == ("HUMAN", "qualified_lead")
    assert [s.json.get("text", {}).get("body") for s in fake_graph.sends[1:]] == [
        "Perfeito, Ana! Sua solicitação foi registrada."
    ]


def test_a_tap_on_corrigir_leads_back_to_the_data_collection_and_no_lead(
    client: Client,
    collecting: Session,
    openai_settings: FakeOpenAIServer,
    fake_graph: FakeGraphAPI,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    summary = ask_confirmation(
        client, django_capture_on_commit_callbacks, openai_settings, fake_graph
    )
    openai_settings.queue_text(
        '{"s":6,"opcoes":["Nome","CPF ou CNPJ","E-mail"]}Claro! Qual dado você quer corrigir?'
    )

    post(
        client,
        django_capture_on_commit_callbacks,
        tap_delivery(
            "wamid.TAP02", button_id="corrigir", title="Corrigir", quoted=str(summary.wa_message_id)
        ),
    )

    assert conversation(openai_settings.requests[1])[-1] == ("user", "Corrigir")
    assert not Lead.objects.exists()
    collecting.refresh_from_db()
    assert (collecting.state, collecting.confirmation_data) == ("DATA_COLLECT", None)
    question = fake_graph.sends[1].json
    assert (question["type"], question["interactive"]) == (
        "interactive",
        {
            "type": "button",
            "body": {"text": "Claro! Qual dado você quer corrigir?"},
            "action": {
                "buttons": [
                    {"type": "reply", "reply": {"id": "opt1", "title": "Nome"}},
                    {"type": "reply", "reply": {"id": "opt2", "title": "CPF ou CNPJ"}},
                    {"type": "reply", "reply": {"id": "opt3", "title": "E-mail"}},
                ]
            },
        },
    )


def test_four_options_reach_the_graph_api_as_a_list_opened_by_ver_opcoes(
    client: Client,
    openai_settings: FakeOpenAIServer,
    fake_graph: FakeGraphAPI,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    recipes.instance.make(access_token="")
    openai_settings.queue_text(
        '{"s":1,"opcoes":["Alimentos","Ambiental","Saúde humana","Saúde animal"]}'
        "Olá! Em qual área você precisa da análise?"
    )

    post(client, django_capture_on_commit_callbacks, text_delivery("wamid.HELLO01", "Oi"))

    [send] = fake_graph.sends
    reply = Message.objects.get(direction=Direction.OUTBOUND)
    assert send.json == {
        "messaging_product": "whatsapp",
        "recipient_type": "individual",
        "to": CUSTOMER_PHONE,
        "type": "interactive",
        "interactive": {
            "type": "list",
            "body": {"text": "Olá! Em qual área você precisa da análise?"},
            "action": {
                "button": "Ver opções",
                "sections": [
                    {
                        "rows": [
                            {"id": "opt1", "title": "Alimentos"},
                            {"id": "opt2", "title": "Ambiental"},
                            {"id": "opt3", "title": "Saúde humana"},
                            {"id": "opt4", "title": "Saúde animal"},
                        ]
                    }
                ],
            },
        },
        "biz_opaque_callback_data": f"message:{reply.pk}",
    }
    assert (reply.message_type, reply.interactive) == ("interactive", send.json["interactive"])
