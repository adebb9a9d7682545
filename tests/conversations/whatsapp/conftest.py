import json
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from model_bakery import baker

from conversations.models import Instance
from conversations.whatsapp.signature import compute_signature
from tests.fakes.graph_server import FakeGraphAPI

FIXTURES = Path(__file__).parent / "fixtures"
PHONE_NUMBER_ID = "100000000000001"
CUSTOMER_PHONE = "5511987654321"
CUSTOMER_USER_ID = "BR.1234567890123456"
APP_SECRET = "test-app-secret"
WEBHOOK_URL = "/webhooks/whatsapp/"


def load_fixture(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def fixture_bytes(name: str) -> bytes:
    return (FIXTURES / f"{name}.json").read_bytes()


def encode(document: Any) -> bytes:
    return json.dumps(document).encode()


def signed_post(client: Client, body: bytes, **extra: str) -> Any:
    """POST `body` the way Meta does: JSON with its X-Hub-Signature-256."""
    headers = {"HTTP_X_HUB_SIGNATURE_256": compute_signature(body=body, secret=APP_SECRET)}
    headers.update(extra)
    return client.generic("POST", WEBHOOK_URL, body, content_type="application/json", **headers)


@pytest.fixture
def instance(db: None) -> Instance:
    return baker.make(
        Instance, phone_number_id=PHONE_NUMBER_ID, name="Laboratório Demo", access_token=""
    )


@pytest.fixture
def fake_graph(httpserver: Any, settings: Any) -> FakeGraphAPI:
    graph = FakeGraphAPI(httpserver)
    settings.WHATSAPP_API_BASE_URL = graph.base_url
    settings.WHATSAPP_ACCESS_TOKEN = "test-access-token"
    return graph


class Recorder:
    """An enqueue collaborator that remembers what it was asked to enqueue."""

    def __init__(self) -> None:
        self.calls: list[int] = []

    def __call__(self, object_id: int) -> None:
        self.calls.append(object_id)
