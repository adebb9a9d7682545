"""A file staff send, end to end with a REAL Celery worker: Support logs in to gunicorn, posts a
PDF from the conversation page (multipart, CSRF and all); the web process stores it in the
shared media folder, the after-commit publish reaches Redis, the worker uploads the file to the
fake Graph API and sends the document message naming it, and a signed "delivered" status
webhook marks it.

The servers are subprocesses of the real project (``config.settings``, ``DEBUG=False``) on this
run's test database, with this test's own broker keys (tests.helpers.broker)."""

import http.client
import json
import re
from collections.abc import Iterator
from pathlib import Path
from uuid import uuid4

import pytest
from django.contrib.auth.hashers import PBKDF2PasswordHasher
from django.utils import timezone

from conversations.models import DeliveryStatus, Direction, MediaStatus, Message
from tests import baker_recipes as recipes
from tests.baker_recipes import CUSTOMER_PHONE, PHONE_NUMBER_ID
from tests.fakes.graph_server import FakeGraphAPI
from tests.helpers.broker import IsolatedBroker
from tests.helpers.conversation_rows import ensure_staff_groups
from tests.helpers.processes import project_env, wait_for, web_and_worker
from tests.helpers.staff import SUPPORT, staff_member
from tests.support.test_staff_reply_worker import Browser, delivered
from whatsapp.signature import compute_signature

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.redis,
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
]
APP_SECRET = "staff-file-e2e-app-secret"
PASSWORD = "uma-senha-longa-de-teste"
PDF = b"%PDF-1.7\n1 0 obj\n<<>>\nendobj\n" + b"0" * 4096 + b"\n%%EOF\n"


@pytest.fixture
def media_root(tmp_path: Path) -> Path:
    root = tmp_path / "media"
    root.mkdir()
    return root


@pytest.fixture
def port(
    fake_graph: FakeGraphAPI, tmp_path: Path, media_root: Path, isolated_broker: IsolatedBroker
) -> Iterator[int]:
    env = project_env(
        broker=isolated_broker,
        WHATSAPP_APP_SECRET=APP_SECRET,
        ALLOWED_HOSTS="127.0.0.1",
        SECURE_SSL_REDIRECT="False",
        WHATSAPP_API_BASE_URL=fake_graph.base_url,
        WHATSAPP_ACCESS_TOKEN="staff-file-e2e-token",
        MEDIA_ROOT=str(media_root),
    )
    with web_and_worker(env=env, logs=tmp_path, name="staff-file-e2e") as web_port:
        yield web_port


def multipart(fields: dict[str, str], filename: str, content: bytes) -> tuple[bytes, str]:
    """A form as a browser posts it with a file: the body and its Content-Type."""
    boundary = f"----lab{uuid4().hex}"
    parts = [
        f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode()
        for name, value in fields.items()
    ]
    parts.append(
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; '
        f'filename="{filename}"\r\nContent-Type: text/html\r\n\r\n'.encode()
        + content
        + b"\r\n"
    )
    body = b"".join(parts) + f"--{boundary}--\r\n".encode()
    return body, f"multipart/form-data; boundary={boundary}"


def test_a_staff_file_is_uploaded_and_sent_by_the_worker_and_marked_delivered(
    port: int, fake_graph: FakeGraphAPI, media_root: Path
) -> None:
    ensure_staff_groups()
    ana = staff_member(SUPPORT)
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
    assert 'id="staff-send-file"' in html

    # The browser says text/html: the server reads the content.
    form, content_type = multipart(
        {
            "csrfmiddlewaretoken": browser.cookies["csrftoken"],
            "form_token": str(uuid4()),
            "caption": "Seu laudo, Maria.",
        },
        "Laudo Março.pdf",
        PDF,
    )
    web = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    web.request(
        "POST",
        f"/admin/conversations/session/{session.pk}/send-file/",
        body=form,
        headers={
            "Content-Type": content_type,
            "Cookie": "; ".join(f"{k}={v}" for k, v in browser.cookies.items()),
            "Accept": "application/json",
        },
    )
    response = web.getresponse()
    answer = json.loads(response.read())
    assert (response.status, answer["ok"], answer["message"]) == (
        200,
        True,
        "Arquivo enviado ao WhatsApp.",
    )

    [send] = wait_for(lambda: fake_graph.sends, timeout=60, what="the document at the Graph API")
    message = Message.objects.get(session=session, direction=Direction.OUTBOUND)
    [upload] = fake_graph.uploads
    assert upload.path == f"/v23.0/{PHONE_NUMBER_ID}/media"
    assert upload.headers["Authorization"] == "Bearer staff-file-e2e-token"
    assert upload.form == {"messaging_product": "whatsapp", "type": "application/pdf"}
    assert (upload.filename, upload.content_type, upload.content) == (
        "Laudo Março.pdf",
        "application/pdf",
        PDF,
    )
    assert send.json == {
        "messaging_product": "whatsapp",
        "recipient_type": "individual",
        "to": CUSTOMER_PHONE,
        "type": "document",
        "document": {
            "id": "800000000000001",
            "caption": "Seu laudo, Maria.",
            "filename": "Laudo Março.pdf",
        },
        "biz_opaque_callback_data": f"message:{message.pk}",
    }
    message = wait_for(
        lambda: Message.objects.filter(pk=message.pk, delivery_status=DeliveryStatus.SENT).first(),
        timeout=10,
        what="the stored wamid",
    )
    media = message.media
    assert (media.status, media.media_id, media.file_size) == (
        MediaStatus.DOWNLOADED,
        "800000000000001",
        len(PDF),
    )
    assert (media_root / media.file.name).read_bytes() == PDF

    status_body = json.dumps(delivered(str(message.wa_message_id))).encode()
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
    wait_for(
        lambda: Message.objects.filter(
            pk=message.pk, delivery_status=DeliveryStatus.DELIVERED
        ).first(),
        timeout=30,
        what="the delivered status",
    )
