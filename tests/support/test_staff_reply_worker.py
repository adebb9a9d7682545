"""A staff reply end to end, black box, with a REAL Celery worker: Support logs in to gunicorn
through the login form, posts a reply from the conversation page (CSRF and all), the view's
after-commit publish reaches Redis, the worker sends it to the fake Graph API, and a signed
"delivered" status webhook marks it.

The servers are subprocesses of the real project (``config.settings``, ``DEBUG=False``) on this
run's test database, with this test's own broker keys (tests.helpers.broker)."""

import http.client
import json
import re
import time
from collections.abc import Iterator
from http.cookies import SimpleCookie
from pathlib import Path
from typing import Any
from urllib.parse import urlencode
from uuid import uuid4

import pytest
from django.contrib.auth.hashers import PBKDF2PasswordHasher
from django.utils import timezone

from conversations.models import DeliveryStatus, Direction, Message
from tests import baker_recipes as recipes
from tests.baker_recipes import CUSTOMER_PHONE, PHONE_NUMBER_ID
from tests.fakes.graph_server import FakeGraphAPI
from tests.helpers.broker import IsolatedBroker
from tests.helpers.conversation_rows import ensure_staff_groups
from tests.helpers.meta_payloads import load_fixture
from tests.helpers.processes import project_env, wait_for, web_and_worker
from tests.helpers.staff import SUPPORT, staff_member
from whatsapp.signature import compute_signature

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.redis,
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
]
APP_SECRET = "staff-e2e-app-secret"
PASSWORD = "uma-senha-longa-de-teste"
REPLY = "Olá, Maria! Aqui é a Ana, da equipe. Já vejo o seu orçamento."


@pytest.fixture
def port(
    fake_graph: FakeGraphAPI, tmp_path: Path, isolated_broker: IsolatedBroker
) -> Iterator[int]:
    env = project_env(
        broker=isolated_broker,
        WHATSAPP_APP_SECRET=APP_SECRET,
        ALLOWED_HOSTS="127.0.0.1",
        SECURE_SSL_REDIRECT="False",
        WHATSAPP_API_BASE_URL=fake_graph.base_url,
        WHATSAPP_ACCESS_TOKEN="staff-e2e-token",
    )
    with web_and_worker(env=env, logs=tmp_path, name="staff-e2e") as web_port:
        yield web_port


class Browser:
    """Just enough of a browser for Django's admin over plain HTTP: it keeps the cookies (the
    secure ones too, as a browser would over HTTPS) and answers with status, headers and body."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.cookies: dict[str, str] = {}

    def request(
        self, method: str, path: str, form: dict[str, str] | None = None
    ) -> tuple[int, http.client.HTTPMessage, str]:
        web = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        headers = {"Cookie": "; ".join(f"{k}={v}" for k, v in self.cookies.items())}
        body = None
        if form is not None:
            form = {"csrfmiddlewaretoken": self.cookies["csrftoken"], **form}
            body = urlencode(form)
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        web.request(method, path, body=body, headers=headers)
        response = web.getresponse()
        for header in response.headers.get_all("Set-Cookie") or []:
            for name, morsel in SimpleCookie(header).items():
                self.cookies[name] = morsel.value
        return response.status, response.headers, response.read().decode()


def test_a_staff_reply_is_sent_by_the_worker_and_marked_delivered(
    port: int, fake_graph: FakeGraphAPI, tmp_path: Path
) -> None:
    ensure_staff_groups()
    ana = staff_member(SUPPORT)
    # The servers hash like production (the test settings' fast hasher is not among theirs).
    ana.password = PBKDF2PasswordHasher().encode(PASSWORD, PBKDF2PasswordHasher().salt())
    ana.save()
    now = timezone.now()
    session = recipes.known_customer.make(
        instance=recipes.instance.make(),
        state="HUMAN",
        handoff_reason="staff_takeover",
        handed_off_at=now,
        assigned_to=ana,
        last_inbound_at=now,
    )
    browser = Browser(port)
    page = f"/admin/conversations/session/{session.pk}/change/"

    browser.request("GET", "/admin/login/")
    status, headers, body = browser.request(
        "POST",
        f"/admin/login/?next={page}",
        {"username": ana.username, "password": PASSWORD, "next": page},
    )
    assert (status, headers["Location"]) == (302, page), re.findall(r'errornote">([^<]*)', body)
    status, _, html = browser.request("GET", page)
    assert status == 200
    assert 'id="staff-reply"' in html

    status, headers, _ = browser.request(
        "POST",
        f"/admin/conversations/session/{session.pk}/reply/",
        {"text": REPLY, "form_token": str(uuid4())},
    )

    assert (status, headers["Location"]) == (303, f"{page}#staff-actions")
    [send] = wait_for(lambda: fake_graph.sends, timeout=60, what="the reply at the Graph API")
    reply = Message.objects.get(session=session, direction=Direction.OUTBOUND)
    assert send.path == f"/v23.0/{PHONE_NUMBER_ID}/messages"
    assert send.headers["Authorization"] == "Bearer staff-e2e-token"
    assert send.json == {
        "messaging_product": "whatsapp",
        "recipient_type": "individual",
        "to": CUSTOMER_PHONE,
        "type": "text",
        "text": {"body": REPLY},
        "biz_opaque_callback_data": f"message:{reply.pk}",
    }
    reply = wait_for(
        lambda: Message.objects.filter(pk=reply.pk, delivery_status=DeliveryStatus.SENT).first(),
        timeout=10,
        what="the stored wamid",
    )
    assert (reply.staff_user_id, reply.content, reply.wa_message_id) == (
        ana.pk,
        REPLY,
        "wamid.FAKE0001",
    )
    session.refresh_from_db()
    assert session.last_staff_reply_at == reply.created_at

    status_body = json.dumps(delivered(reply.wa_message_id)).encode()
    web = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    web.request(
        "POST",
        "/webhooks/whatsapp/",
        body=status_body,
        headers={
            "Content-Type": "application/json",
            "X-Hub-Signature-256": compute_signature(body=status_body, secret=APP_SECRET),
        },
    )
    assert web.getresponse().status == 200
    reply = wait_for(
        lambda: Message.objects.filter(
            pk=reply.pk, delivery_status=DeliveryStatus.DELIVERED
        ).first(),
        timeout=30,
        what="the delivered status",
    )
    status, _, html = browser.request("GET", page)
    assert re.search(r"entregue \d\d:\d\d<", html) is not None
    # The worker logs its lifecycle at INFO through the project's formatter.
    worker_log = (tmp_path / "worker.log").read_text()
    assert re.search(r" INFO celery\.apps\.worker staff-e2e-\d+@localhost ready\.", worker_log)


def delivered(wamid: str) -> dict[str, Any]:
    """Meta's "delivered" status webhook (the recorded fixture) for `wamid`, timestamped now."""
    document = load_fixture("status_delivered")
    [status] = document["entry"][0]["changes"][0]["value"]["statuses"]
    status.update(id=wamid, timestamp=str(int(time.time())))
    return document
