"""A provider that echoes the credential puts it neither in the log nor in any row.

The fake OpenAI server answers 401 ``Incorrect API key provided: sk-SENTINEL…`` (the key the
client really sent) and the fake Graph API refuses the token with ``Malformed access token
EAAGSENTINEL…``; a whole turn runs through the real clients and Celery tasks (eagerly). Then
every log record of every logger (its message and each extra, and the line the project's
formatter writes) and every text of every row of every table are searched for the sentinels.
"""

import json
import logging
from collections.abc import Iterator

import pytest
from django.apps import apps
from pytest_django import DjangoCaptureOnCommitCallbacks, Settings

from config.logging import EventFormatter
from conversations.models import (
    Direction,
    HandoffSummary,
    LLMCall,
    Message,
    Session,
)
from conversations.sending.worker import send_message
from conversations.turns.tasks import process_session
from tests.fakes.graph_server import FakeGraphAPI
from tests.fakes.openai_server import FakeOpenAIServer
from tests.helpers.conversation_rows import inbound

pytestmark = pytest.mark.django_db
OPENAI_KEY = "sk-proj-SENTINELopenai0123456789abcdefXYZ"
GRAPH_TOKEN = "EAAGSENTINELgraph0123456789abcdefXYZ"
SENTINELS = ("SENTINEL", OPENAI_KEY, GRAPH_TOKEN)
OPENAI_401 = (
    f"Incorrect API key provided: {OPENAI_KEY}. You can find your API key at "
    "https://platform.openai.com/account/api-keys."
)
OPENAI_401_STORED = (
    "HTTP 401: Error code: 401 - Incorrect API key provided: sk-[redacted]. You can find your "
    "API key at "
    "https://platform.openai.com/account/api-keys."
)
GRAPH_TITLE = f"Malformed access token {GRAPH_TOKEN}"
GRAPH_DETAILS = f"Invalid OAuth access token - Cannot parse access token: {GRAPH_TOKEN}"
# The loggers the project configures with propagate=False, the root, and the HTTP libraries.
LOGGERS = ("", "agents", "conversations", "django", "celery", "openai", "httpx", "httpcore")


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.records: list[logging.LogRecord] = []
        self.lines: list[str] = []
        self.setFormatter(EventFormatter())

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)
        self.lines.append(self.format(record))


@pytest.fixture
def logs() -> Iterator[_Capture]:
    """Every record of every logger, at DEBUG, as the record and as the formatter's line."""
    capture = _Capture()
    saved = []
    for name in LOGGERS:
        logger = logging.getLogger(name)
        saved.append((logger, logger.level))
        logger.addHandler(capture)
        logger.setLevel(logging.DEBUG)
    yield capture
    for logger, level in saved:
        logger.removeHandler(capture)
        logger.setLevel(level)


@pytest.fixture
def fake_graph(fake_graph: FakeGraphAPI, settings: Settings) -> FakeGraphAPI:
    """The shared fake Graph API, reached with the sentinel token (the `session`'s instance has
    no token of its own)."""
    settings.WHATSAPP_ACCESS_TOKEN = GRAPH_TOKEN
    return fake_graph


@pytest.fixture
def openai_sentinel(openai_settings: FakeOpenAIServer, settings: Settings) -> FakeOpenAIServer:
    settings.OPENAI_API_KEY = OPENAI_KEY
    return openai_settings


def leaks_in_logs(capture: _Capture) -> list[str]:
    """Each record's message, every attribute (extras included) and the formatted line."""
    found = []
    for record, line in zip(capture.records, capture.lines, strict=True):
        texts = [record.getMessage(), line, *(repr(v) for v in record.__dict__.values())]
        found += [text for text in texts if any(s in text for s in SENTINELS)]
    return found


def leaks_in_rows() -> list[str]:
    """`model.field = value` for every row of every table whose value holds a sentinel."""
    found = []
    for model in apps.get_models(include_auto_created=True):
        fields = model._meta.concrete_fields
        for row in model._default_manager.all():
            for field in fields:
                value = json.dumps(field.value_from_object(row), default=str, ensure_ascii=False)
                if any(s in value for s in SENTINELS):
                    found.append(f"{model._meta.label}.{field.name} = {value}")
    return found


@pytest.mark.parametrize("graph_status", [401, 400])
def test_credentials_echoed_by_the_providers_reach_no_log_and_no_row(
    session: Session,
    openai_sentinel: FakeOpenAIServer,
    fake_graph: FakeGraphAPI,
    logs: _Capture,
    graph_status: int,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    inbound(session, "Oi, bom dia")
    # The agent's call, then the handoff summary's call: both refused, echoing the key.
    openai_sentinel.queue_error(401, code="invalid_api_key", message=OPENAI_401)
    openai_sentinel.queue_error(401, code="invalid_api_key", message=OPENAI_401)
    # The mark-read, then the send of the handoff's fixed text: both refused, echoing the token.
    fake_graph.respond_error(graph_status, 190, GRAPH_TITLE, GRAPH_DETAILS)
    fake_graph.respond_error(graph_status, 190, GRAPH_TITLE, GRAPH_DETAILS)

    with django_capture_on_commit_callbacks(execute=True):
        process_session.delay(session.pk).get()

    # The credentials were really sent and really echoed.
    assert openai_sentinel.request_headers[0]["authorization"] == f"Bearer {OPENAI_KEY}"
    assert fake_graph.requests[1].headers["Authorization"] == f"Bearer {GRAPH_TOKEN}"
    assert openai_sentinel.request_count == 2
    assert len(fake_graph.requests) == 2
    # What is stored says what happened, without the credential.
    assert list(LLMCall.objects.order_by("id").values_list("purpose", "outcome", "error")) == [
        ("agent", "provider_error", OPENAI_401_STORED),
        ("summary", "provider_error", OPENAI_401_STORED),
    ]
    session.refresh_from_db()
    assert (session.state, session.handoff_reason, session.handoff_detail) == (
        "HUMAN",
        "llm_provider_error",
        f"triagem: {OPENAI_401_STORED}",
    )
    reply = session.messages.get(direction=Direction.OUTBOUND)
    assert (reply.delivery_status, reply.delivery_error_code, reply.delivery_error_title) == (
        "failed",
        190,
        "Malformed access token EAA[redacted]",
    )
    assert HandoffSummary.objects.get(session=session).error == (
        f"provider_error: {OPENAI_401_STORED}"
    )
    # Nowhere else either.
    assert leaks_in_rows() == []
    assert leaks_in_logs(logs) == []
    assert any("sk-[redacted]" in line for line in logs.lines)
    assert any("EAA[redacted]" in line for line in logs.lines)


def test_a_graph_refusal_on_a_send_task_is_stored_and_logged_without_the_token(
    session: Session, fake_graph: FakeGraphAPI, logs: _Capture
) -> None:
    message = Message.objects.create(
        session=session, direction=Direction.OUTBOUND, content="Olá!", agent="triagem"
    )
    fake_graph.respond_error(401, 190, GRAPH_TITLE, GRAPH_DETAILS)

    send_message.delay(message.pk)

    message.refresh_from_db()
    assert (message.delivery_status, message.delivery_error_title) == (
        "failed",
        "Malformed access token EAA[redacted]",
    )
    assert leaks_in_rows() == []
    assert leaks_in_logs(logs) == []
