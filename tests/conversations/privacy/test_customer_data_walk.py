"""After an erasure request, no table holds the customer: every model of every app (the auto-created
ones and simple-history's included), every text, JSON and binary column (encrypted ones
decrypted), and the signed admin sessions, searched for their phone, name, document, e-mail and
WhatsApp user id.

The customer's data is written where the real flows write it: a signed webhook delivery through
the test client, a turn answered by the fake OpenAI server and sent to the fake Graph API, the
delivery status of that reply, a staff take-over, an internal note and a summary requested from
the admin, a lead, a replay of the recorded call, a prompt test case saved from it (unmasked, two
versions), and an admin log entry written before sessions were named by id.
"""

import base64
import binascii
import json
import re
import time
from typing import Any

import pytest
from django.apps import apps
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.contenttypes.models import ContentType
from django.contrib.sessions.backends.db import SessionStore
from django.contrib.sessions.models import Session as AdminSession
from django.db import models
from django.test import Client
from pytest_django import DjangoCaptureOnCommitCallbacks, Settings

from conversations.leads import lead_create
from conversations.models import LLMCall, Message, Session, WebhookDelivery
from conversations.privacy.encryption import EncryptedTextField
from governance.models import ReplayResult
from governance.replay import ReplayDeps, ReplayFilters, replay_run_start
from governance.tasks import replay_run
from governance.test_cases import prompt_test_case_create
from tests import baker_recipes as recipes
from tests.fakes.graph_server import FakeGraphAPI
from tests.fakes.openai_server import FakeOpenAIServer
from tests.helpers.meta_payloads import signed_post
from tests.helpers.recorded_calls import draft
from tests.helpers.staff import SUPPORT, logged_in, staff_member

pytestmark = pytest.mark.django_db

PHONE = "5511987650123"
USER_ID = "BR.7777666655554444"
NAME = "Joana Erasmo"
DOCUMENT = "52998224725"
EMAIL = "joana.erasmo@example.com"
# How each value may be written: whole, by word, formatted, without the country code.
NEEDLES = (
    PHONE,
    "987650123",
    "98765-0123",
    USER_ID,
    "Joana",
    "Erasmo",
    DOCUMENT,
    "529.982.247-25",
    EMAIL,
    "joana.erasmo",
)
# A wamid as Meta makes them: base64 of a record that spells the customer's phone.
INBOUND_WAMID = (
    "wamid."
    + base64.b64encode(
        b"\x18\r" + PHONE.encode() + b"\x15\x02\x00\x12\x18\x143EB0C7E5A1F2D3B4C5D6\x00"
    ).decode()
)
_WAMID = re.compile(r"wamid\.([A-Za-z0-9+/=_-]+)")
INBOUND_TEXT = f"Oi, sou {NAME}, CPF 529.982.247-25, e-mail {EMAIL}. Quero um orçamento."
ANSWER = '{"s":1}Olá, Joana Erasmo! Anotei o CPF 529.982.247-25. Qual serviço você procura?'
SUMMARY = json.dumps(
    {
        "motivo_encerramento": "Joana Erasmo pediu um atendente",
        "servico_identificado": "Orçamento de análise para Joana Erasmo",
        "segmento": "AMBIENTAL (Joana)",
        "pontos_chave": ["Cliente Joana Erasmo", f"e-mail {EMAIL}"],
        "dados_coletados": {"nome": NAME, "cpf": "529.982.247-25"},
        "proxima_acao": "Ligar para (11) 98765-0123",
        "resumo_texto": f"{NAME} ({EMAIL}) quer um orçamento.",
    },
    ensure_ascii=False,
)


def value_change(value: dict[str, Any]) -> bytes:
    document = {
        "object": "whatsapp_business_account",
        "entry": [{"id": "200000000000001", "changes": [{"value": value, "field": "messages"}]}],
    }
    return json.dumps(document).encode()


METADATA = {"display_phone_number": "5511999990000", "phone_number_id": recipes.PHONE_NUMBER_ID}


def customer_text(wamid: str, text: str) -> bytes:
    return value_change(
        {
            "messaging_product": "whatsapp",
            "metadata": METADATA,
            "contacts": [{"profile": {"name": NAME}, "wa_id": PHONE, "user_id": USER_ID}],
            "messages": [
                {
                    "from": PHONE,
                    "from_user_id": USER_ID,
                    "id": wamid,
                    "timestamp": str(int(time.time())),
                    "type": "text",
                    "text": {"body": text},
                }
            ],
        }
    )


def delivered(wamid: str) -> bytes:
    return value_change(
        {
            "messaging_product": "whatsapp",
            "metadata": METADATA,
            "statuses": [
                {
                    "id": wamid,
                    "status": "delivered",
                    "timestamp": str(int(time.time())),
                    "recipient_id": PHONE,
                    "recipient_user_id": USER_ID,
                }
            ],
        }
    )


def wamids_decoded(text: str) -> str:
    decoded = []
    for encoded in _WAMID.findall(text):
        try:
            raw = base64.b64decode(encoded + "=" * (-len(encoded) % 4), altchars=b"-_")
        except (binascii.Error, ValueError):
            continue
        decoded.append(raw.decode("latin-1"))
    return "".join(f" (wamid: {d})" for d in decoded)


def stored_texts() -> list[tuple[str, str, str]]:
    """(model, column, text) of every text, JSON and binary value stored in any table."""
    found = []
    for model in apps.get_models(include_auto_created=True):
        for field in model._meta.concrete_fields:
            if not isinstance(
                field, models.CharField | models.TextField | models.JSONField | models.BinaryField
            ):
                continue
            if isinstance(field, EncryptedTextField):
                values = [getattr(row, field.attname) for row in model._base_manager.all()]
            else:
                values = list(model._base_manager.values_list(field.attname, flat=True))
            for value in values:
                if isinstance(value, bytes | memoryview):
                    text = bytes(value).decode("utf-8", errors="replace")
                elif isinstance(field, models.JSONField):
                    text = json.dumps(value, ensure_ascii=False)
                else:
                    text = str(value) if value is not None else ""
                found.append((model._meta.label, field.name, text + wamids_decoded(text)))
    # The admin's sessions are signed JSON: read them decoded too.
    for admin_session in AdminSession.objects.all():
        decoded = json.dumps(SessionStore().decode(admin_session.session_data), ensure_ascii=False)
        found.append(("sessions.Session", "session_data (decoded)", decoded))
    return found


def holding_the_customer() -> list[tuple[str, str, str]]:
    return sorted(
        {
            (label, column, needle)
            for label, column, text in stored_texts()
            for needle in NEEDLES
            if needle.lower() in text.lower()
        }
    )


def test_after_the_erasure_no_column_of_any_table_holds_the_customer(
    settings: Settings,
    openai_settings: FakeOpenAIServer,
    fake_graph: FakeGraphAPI,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    settings.REPLAY_CONCURRENCY = 1
    recipes.instance.make()  # the number the deliveries are addressed to
    webhook = Client()

    # The customer writes; the turn answers through the fake model and the fake Graph API.
    openai_settings.queue_text(ANSWER)
    with django_capture_on_commit_callbacks(execute=True):
        assert signed_post(webhook, customer_text(INBOUND_WAMID, INBOUND_TEXT)).status_code == 200
    session = Session.objects.get()
    [reply] = session.messages.filter(direction="OUTBOUND")
    assert (session.customer_name, session.customer_user_id, reply.wa_message_id) == (
        NAME,
        USER_ID,
        "wamid.FAKE0001",
    )
    with django_capture_on_commit_callbacks(execute=True):
        assert signed_post(webhook, delivered("wamid.FAKE0001")).status_code == 200

    # Staff takes the conversation over and asks for a summary (admin log entries, a summary).
    support = logged_in(staff_member(SUPPORT))
    base = f"/admin/conversations/session/{session.pk}"
    assert support.post(f"{base}/take-over/").status_code == 303
    # An internal note that quotes them.
    note = f"{NAME} ligou do (11) 98765-0123: CPF 529.982.247-25, e-mail {EMAIL}"
    assert support.post(f"{base}/note/", {"text": note}).status_code == 303
    openai_settings.queue_text(SUMMARY)
    page = support.get(f"{base}/change/").content.decode()
    token = page.split('name="form_token" value="', 1)[1].split('"', 1)[0]
    with django_capture_on_commit_callbacks(execute=True):
        assert support.post(f"{base}/regenerate-summary/", {"form_token": token}).status_code == 303
    assert session.summaries.get().summary_text == f"{NAME} ({EMAIL}) quer um orçamento."

    # A lead, a replay of the recorded call, and an entry of the admin log as written before.
    lead_create(
        session_id=session.pk,
        data={"nome_cliente": NAME, "cadastro": {"documento": DOCUMENT, "email": EMAIL}},
    )
    openai_settings.queue_text('{"s":1}Oi, Joana Erasmo! Em que posso ajudar?')
    run = replay_run_start(override=draft(), filters=ReplayFilters(), user=None)
    assert replay_run.delay(run.pk).get() == "done"
    assert ReplayResult.objects.get().replayed_text == "Oi, Joana Erasmo! Em que posso ajudar?"
    # A prompt test case saved from the call by someone who may read personal data (an unmasked
    # copy of the conversation), then edited: two versions.
    case = prompt_test_case_create(
        call=LLMCall.objects.select_related("session__instance").get(purpose="agent"),
        user=staff_member(permissions=("conversations.view_personal_data",)),
        title="Saudação",
        expectations={"expected_code": 1},
        deps=ReplayDeps.from_settings(),
    )
    case.must_contain = ["ajudar"]
    case.save()
    LogEntry.objects.create(
        user=staff_member(),
        content_type=ContentType.objects.get_for_model(Session),
        object_id=str(session.pk),
        object_repr=f"#{session.pk} {NAME}",
        action_flag=CHANGE,
        change_message="Replied to the customer.",
    )
    before = holding_the_customer()
    assert {label for label, _column, _needle in before} >= {
        "admin.LogEntry",
        "conversations.Session",
        "conversations.Message",
        "conversations.LLMCall",
        "conversations.HandoffSummary",
        "conversations.Lead",
        "conversations.WebhookDelivery",
        "governance.ReplayResult",
        "governance.PromptTestCase",
        "governance.HistoricalPromptTestCase",
        "support.InternalNote",
    }
    assert ("conversations.Message", "wa_message_id", PHONE) in before

    # The erasure, asked from the admin by a staff member with the permission.
    eraser = logged_in(staff_member(permissions=("conversations.erase_customer_data",)))
    response = eraser.post(
        "/admin/conversations/session/personal-data/",
        {"kind": "user_id", "value": USER_ID, "confirm": "on", "action": "erase"},
    )

    assert response.status_code == 302
    assert holding_the_customer() == []
    # What the aggregates need is kept: the conversation, its messages, calls and costs.
    assert (
        Session.objects.count(),
        Message.objects.filter(direction="INBOUND").count(),
        LLMCall.objects.count(),
        WebhookDelivery.objects.count(),
    ) == (1, 1, 2, 2)
