"""The simulator page with a REAL Celery worker: a prompt editor logs in to gunicorn, sends a
message while the model takes 2 s to answer, and the POST comes back at once — the turn runs in
the worker (``conversations.simulated_turn``), with the simulator's dry-run sender although a
WhatsApp access token is set. The page waits, refuses a second message meanwhile (pt-BR), the
poll endpoint says when the turn ended, and the page then shows the answer; the fake Graph API
gets no request.

The servers are subprocesses of the real project (``config.settings``, ``DEBUG=False``) on this
run's test database, with this test's own broker keys (tests.helpers.broker)."""

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.contrib.auth.hashers import PBKDF2PasswordHasher

from conversations.models import Direction, Message, SimulatedTurn
from tests import baker_recipes as recipes
from tests.fakes.graph_server import FakeGraphAPI
from tests.fakes.openai_server import FakeOpenAIServer
from tests.helpers.broker import IsolatedBroker
from tests.helpers.conversation_rows import ensure_staff_groups
from tests.helpers.processes import project_env, wait_for, web_and_worker
from tests.helpers.staff import PROMPT_EDITORS, staff_member
from tests.support.test_staff_reply_worker import Browser
from whatsapp.client import is_simulated_wamid

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.redis,
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
]
PASSWORD = "uma-senha-longa-de-teste"
PAGE = "/admin/conversations/session/simulator/"
MODEL_SECONDS = 2.0


@pytest.fixture
def port(
    fake_graph: FakeGraphAPI,
    fake_openai: FakeOpenAIServer,
    tmp_path: Path,
    isolated_broker: IsolatedBroker,
) -> Iterator[int]:
    env = project_env(
        broker=isolated_broker,
        ALLOWED_HOSTS="127.0.0.1",
        SECURE_SSL_REDIRECT="False",
        OPENAI_BASE_URL=fake_openai.base_url,
        LLM_TIMEOUT_SECONDS="10",
        WHATSAPP_API_BASE_URL=fake_graph.base_url,
        WHATSAPP_ACCESS_TOKEN="simulator-e2e-token",
    )
    with web_and_worker(env=env, logs=tmp_path, name="simulator-e2e") as web_port:
        yield web_port


def test_the_worker_answers_while_the_page_polls_and_nothing_reaches_whatsapp(
    port: int, fake_graph: FakeGraphAPI, fake_openai: FakeOpenAIServer
) -> None:
    ensure_staff_groups()
    editor = staff_member(PROMPT_EDITORS)
    # The servers hash like production (the test settings' fast hasher is not among theirs).
    editor.password = PBKDF2PasswordHasher().encode(PASSWORD, PBKDF2PasswordHasher().salt())
    editor.save()
    instance = recipes.instance.make(name="Laboratório Demo")
    fake_openai.queue_text('{"s":1}Olá! Sou a Lia.', delay=MODEL_SECONDS)
    browser = Browser(port)
    browser.request("GET", "/admin/login/")
    status, headers, _ = browser.request(
        "POST",
        f"/admin/login/?next={PAGE}",
        {"username": editor.username, "password": PASSWORD, "next": PAGE},
    )
    assert (status, headers["Location"]) == (302, PAGE)

    started = time.monotonic()
    status, headers, _ = browser.request("POST", PAGE, {"instance": str(instance.pk), "text": "Oi"})
    post_seconds = time.monotonic() - started
    _, _, waiting = browser.request("GET", headers["Location"])
    browser.request("POST", PAGE, {"instance": str(instance.pk), "text": "Oi de novo"})
    _, _, refused = browser.request("GET", headers["Location"])
    turn = SimulatedTurn.objects.get()
    poll = f"{PAGE}turn/{turn.pk}/"
    wait_for(
        lambda: browser.request("GET", poll)[2] == '{"done": true}',
        timeout=60,
        what="the worker's answer",
    )
    _, _, answered = browser.request("GET", headers["Location"])

    assert status == 302
    assert post_seconds < MODEL_SECONDS / 2, post_seconds
    assert (
        f'data-url="{poll}">Aguardando a resposta…</p>' in waiting,
        "Aguarde a resposta da mensagem anterior." in refused,
    ) == (True, True)
    assert re.findall(r'<p class="bubble bubble-(?:customer|bot)">(.*?)</p>', answered) == [
        "Oi",
        "Olá! Sou a Lia.",
    ]
    turn.refresh_from_db()
    report, latency_ms = turn.report or {}, turn.latency_ms or 0
    assert (turn.error, report.get("replies"), latency_ms >= 2000) == (
        "",
        ["Olá! Sou a Lia."],
        True,
    )
    [reply] = Message.objects.filter(direction=Direction.OUTBOUND)
    assert (is_simulated_wamid(reply.wa_message_id), reply.delivery_status) == (True, "sent")
    assert list(
        Message.objects.filter(direction=Direction.INBOUND).values_list("content", flat=True)
    ) == ["Oi"]
    assert (fake_openai.request_count, fake_graph.requests) == (1, [])
