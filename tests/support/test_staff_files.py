"""Staff send a file from the composer, through the real view, the eager send task and the fake
Graph API: the request stores it as an OUTBOUND message with its media, the task uploads it
once and sends the image or document message naming it; a file that is not what WhatsApp takes,
or is too large, is refused in pt-BR with nothing stored."""

import base64
import hashlib
import io
import json
import re
import time
import zipfile
from datetime import timedelta
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.auth.models import User
from django.contrib.contenttypes.models import ContentType
from django.contrib.messages import get_messages
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from pytest_django import DjangoCaptureOnCommitCallbacks, Settings

from agents.states import SessionState
from conversations.models import (
    DeliveryStatus,
    Direction,
    MediaStatus,
    Message,
    MessageMedia,
    Session,
)
from conversations.privacy.retention import session_anonymise
from tests import baker_recipes as recipes
from tests.baker_recipes import CUSTOMER_PHONE, PHONE_NUMBER_ID
from tests.fakes.graph_server import FakeGraphAPI
from tests.helpers.meta_payloads import encode, load_fixture, signed_post
from tests.helpers.staff import SUPPORT, logged_in, staff_member

pytestmark = pytest.mark.django_db

JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + b"j" * 1000
PDF = b"%PDF-1.7\n1 0 obj\n<<>>\nendobj\n%%EOF\n"
HTML = b"<!DOCTYPE html><html><body><script>alert(1)</script></body></html>"
CAPTION = "Segue a foto da etiqueta da amostra."


def b64_sha256(content: bytes) -> str:
    return base64.b64encode(hashlib.sha256(content).digest()).decode()


@pytest.fixture(autouse=True)
def media_root(settings: Settings, tmp_path: Path) -> Path:
    settings.MEDIA_ROOT = str(tmp_path)
    return tmp_path


def stored_files(root: Path) -> list[Path]:
    return sorted(path for path in root.rglob("*") if path.is_file())


@pytest.fixture
def support() -> User:
    return staff_member(SUPPORT)


@pytest.fixture
def session(support: User) -> Session:
    """A customer who wrote an hour ago, with the team (taken over by `support`)."""
    return recipes.known_customer.make(
        instance=recipes.instance.make(access_token=""),
        state=SessionState.HUMAN.value,
        handoff_reason="staff_takeover",
        assigned_to=support,
        last_inbound_at=timezone.now() - timedelta(hours=1),
    )


def url(session: Session) -> str:
    return f"/admin/conversations/session/{session.pk}/send-file/"


def upload(name: str, content: bytes, content_type: str = "application/octet-stream") -> Any:
    return SimpleUploadedFile(name, content, content_type=content_type)


def send_file(
    client: Client, session: Session, file: Any, *, caption: str = "", form_token: str = ""
) -> Any:
    data = {"file": file, "caption": caption, "form_token": form_token or str(uuid4())}
    return client.post(url(session), data)


def send_json(client: Client, session: Session, file: Any, *, caption: str = "") -> Any:
    data = {"file": file, "caption": caption, "form_token": str(uuid4())}
    return client.post(url(session), data, headers={"Accept": "application/json"})


def flash(response: Any) -> list[tuple[str, str]]:
    return [(m.level_tag, str(m)) for m in get_messages(response.wsgi_request)]


def nothing_stored(session: Session, root: Path, graph: FakeGraphAPI | None = None) -> None:
    assert not Message.objects.filter(session=session, direction=Direction.OUTBOUND).exists()
    assert MessageMedia.objects.count() == 0
    assert stored_files(root) == []
    assert LogEntry.objects.count() == 0
    if graph is not None:
        assert (graph.uploads, graph.sends) == ([], [])


# --- Sent ------------------------------------------------------------------------------------


def test_an_image_is_stored_uploaded_once_and_sent_with_the_exact_requests(
    session: Session,
    support: User,
    fake_graph: FakeGraphAPI,
    media_root: Path,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    client = logged_in(support)

    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        response = send_file(
            client, session, upload("etiqueta.jpeg", JPEG, "image/png"), caption=f"  {CAPTION} "
        )

    assert response.status_code == 303
    assert flash(response) == [("success", "Arquivo enviado ao WhatsApp.")]
    assert len(callbacks) == 1
    message = Message.objects.get(session=session, direction=Direction.OUTBOUND)
    assert (message.message_type, message.content, message.staff_user, message.turn_id) == (
        "image",
        CAPTION,
        support,
        None,
    )
    assert (message.delivery_status, message.wa_message_id) == (
        DeliveryStatus.SENT,
        "wamid.FAKE0001",
    )
    media = MessageMedia.objects.get(message=message)
    assert (
        media.kind,
        media.status,
        media.mime_type,  # the content's, not the browser's image/png
        media.filename,
        media.file_size,
        media.sha256,
        media.caption,
        media.media_id,
    ) == (
        "image",
        MediaStatus.DOWNLOADED,
        "image/jpeg",
        "etiqueta.jpeg",
        len(JPEG),
        b64_sha256(JPEG),
        CAPTION,
        "800000000000001",
    )
    assert media.downloaded_at == message.created_at
    [stored] = stored_files(media_root)
    assert stored.read_bytes() == JPEG
    assert (stored.suffix, "etiqueta" in stored.name) == (".jpg", False)  # a name of ours
    [sent_upload] = fake_graph.uploads
    assert sent_upload.path == f"/v23.0/{PHONE_NUMBER_ID}/media"
    assert sent_upload.headers["Authorization"] == "Bearer test-access-token"
    assert sent_upload.form == {"messaging_product": "whatsapp", "type": "image/jpeg"}
    assert (sent_upload.filename, sent_upload.content_type, sent_upload.content) == (
        "etiqueta.jpeg",
        "image/jpeg",
        JPEG,
    )
    [send] = fake_graph.sends
    assert send.path == f"/v23.0/{PHONE_NUMBER_ID}/messages"
    assert send.json == {
        "messaging_product": "whatsapp",
        "recipient_type": "individual",
        "to": CUSTOMER_PHONE,
        "type": "image",
        "image": {"id": "800000000000001", "caption": CAPTION},
        "biz_opaque_callback_data": f"message:{message.pk}",
    }
    session.refresh_from_db()
    assert session.last_staff_reply_at == message.created_at
    assert [
        (e.user, e.action_flag, e.change_message)
        for e in LogEntry.objects.filter(object_id=str(session.pk))
    ] == [(support, CHANGE, "Enviou um arquivo ao cliente.")]


def test_the_request_stores_the_file_in_a_fixed_number_of_queries(
    session: Session, support: User, fake_graph: FakeGraphAPI
) -> None:
    client = logged_in(support)
    ContentType.objects.get_for_model(Session)  # cached, as in any process after a while

    with CaptureQueriesContext(connection) as queries:
        send_file(client, session, upload("laudo.pdf", PDF), caption="Seu laudo")

    # The admin's session, user and permissions (4); then, in one transaction, the session
    # locked, the form token, the message, the session's times, the media, the admin log and
    # the instance for the dry-run answer (7, and the savepoint's 2).
    assert len(queries) == 13


def test_a_document_keeps_its_file_name_and_goes_without_a_caption_when_none_is_given(
    session: Session,
    support: User,
    fake_graph: FakeGraphAPI,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        send_file(logged_in(support), session, upload("Laudo Março 2026.pdf", PDF))

    message = Message.objects.get(session=session, direction=Direction.OUTBOUND)
    assert (message.message_type, message.content) == ("document", "")
    assert (message.media.mime_type, message.media.filename) == (
        "application/pdf",
        "Laudo Março 2026.pdf",
    )
    [sent_upload] = fake_graph.uploads
    assert sent_upload.form == {"messaging_product": "whatsapp", "type": "application/pdf"}
    assert sent_upload.filename == "Laudo Março 2026.pdf"
    [send] = fake_graph.sends
    assert send.json["type"] == "document"
    assert send.json["document"] == {"id": "800000000000001", "filename": "Laudo Março 2026.pdf"}


def test_a_word_document_is_sent_as_a_document_of_its_type(
    session: Session,
    support: User,
    fake_graph: FakeGraphAPI,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        archive.writestr("word/document.xml", "<w:document/>")

    with django_capture_on_commit_callbacks(execute=True):
        send_file(logged_in(support), session, upload("pedido.docx", buffer.getvalue()))

    docx = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
    assert fake_graph.uploads[0].form == {"messaging_product": "whatsapp", "type": docx}
    assert fake_graph.sends[0].json["document"] == {
        "id": "800000000000001",
        "filename": "pedido.docx",
    }


def test_the_composer_answers_json_and_the_file_shows_in_the_transcript(
    session: Session,
    support: User,
    fake_graph: FakeGraphAPI,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    client = logged_in(support)

    with django_capture_on_commit_callbacks(execute=True):
        response = send_json(client, session, upload("laudo.pdf", PDF), caption="Seu laudo")

    answer = response.json()
    message = Message.objects.get(session=session, direction=Direction.OUTBOUND)
    assert response.status_code == 200
    assert (answer["ok"], answer["changed"], answer["message"], answer["message_id"]) == (
        True,
        True,
        "Arquivo enviado ao WhatsApp.",
        message.pk,
    )
    page = client.get(f"/admin/conversations/session/{session.pk}/change/").content.decode()
    assert f'href="/admin/conversations/message/{message.pk}/media/"' in page
    served = client.get(f"/admin/conversations/message/{message.pk}/media/")
    assert served.status_code == 200
    assert b"".join(served.streaming_content) == PDF  # type: ignore[attr-defined]
    assert served["Content-Disposition"] == 'attachment; filename="laudo.pdf"'


def test_the_same_form_posted_twice_sends_once_and_keeps_one_file(
    session: Session,
    support: User,
    fake_graph: FakeGraphAPI,
    media_root: Path,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    client = logged_in(support)
    form_token = str(uuid4())

    with django_capture_on_commit_callbacks(execute=True):
        send_file(client, session, upload("laudo.pdf", PDF), form_token=form_token)
        second = send_file(client, session, upload("laudo.pdf", PDF), form_token=form_token)

    assert flash(second)[-1] == ("info", "Este arquivo já foi enviado.")
    assert Message.objects.filter(session=session, direction=Direction.OUTBOUND).count() == 1
    assert len(stored_files(media_root)) == 1
    assert (len(fake_graph.uploads), len(fake_graph.sends)) == (1, 1)


def test_without_a_whatsapp_token_the_file_is_simulated_and_nothing_leaves(
    session: Session,
    support: User,
    settings: Settings,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    settings.WHATSAPP_ACCESS_TOKEN = ""

    with django_capture_on_commit_callbacks(execute=True):
        response = send_file(logged_in(support), session, upload("laudo.pdf", PDF))

    assert flash(response) == [
        ("success", "Arquivo simulado (sem token do WhatsApp): nada foi enviado ao cliente.")
    ]
    message = Message.objects.get(session=session, direction=Direction.OUTBOUND)
    assert message.delivery_status == DeliveryStatus.SENT
    assert str(message.wa_message_id).startswith("sim.")
    assert message.media.media_id.startswith("sim.")


def test_the_file_s_delivery_status_follows_meta_s_callbacks(
    session: Session,
    support: User,
    fake_graph: FakeGraphAPI,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    client = logged_in(support)
    with django_capture_on_commit_callbacks(execute=True):
        send_file(client, session, upload("laudo.pdf", PDF))
    document = load_fixture("status_delivered")
    [status] = document["entry"][0]["changes"][0]["value"]["statuses"]
    status.update(id="wamid.FAKE0001", timestamp=str(int(time.time())))

    assert signed_post(Client(), encode(document)).status_code == 200

    message = Message.objects.get(session=session, direction=Direction.OUTBOUND)
    assert (message.wa_message_id, message.delivery_status) == (
        "wamid.FAKE0001",
        DeliveryStatus.DELIVERED,
    )
    page = client.get(f"/admin/conversations/session/{session.pk}/change/").content.decode()
    assert re.search(r'<span class="delivery">entregue \d\d:\d\d</span>', page) is not None


def test_erasing_the_conversation_deletes_the_file_staff_sent(
    session: Session,
    support: User,
    fake_graph: FakeGraphAPI,
    media_root: Path,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        send_file(logged_in(support), session, upload("laudo.pdf", PDF), caption="Laudo da Maria")
    assert len(stored_files(media_root)) == 1

    with django_capture_on_commit_callbacks(execute=True):
        assert session_anonymise(session.pk, now=timezone.now()) is True

    assert stored_files(media_root) == []
    media = MessageMedia.objects.get(message__session=session)
    assert (media.file.name, media.filename, media.caption, media.media_id, media.sha256) == (
        "",
        "",
        "",
        "",
        "",
    )


# --- Refused ---------------------------------------------------------------------------------


NOT_SENDABLE = (
    "Este arquivo não pode ser enviado: o conteúdo não é uma imagem JPEG ou PNG nem um "
    "documento PDF, Word, Excel ou PowerPoint (diga o nome o que disser)."
)


@pytest.mark.parametrize(
    ("name", "content", "content_type"),
    [
        ("laudo.pdf", HTML, "application/pdf"),  # an HTML page named and typed as a PDF
        ("foto.jpg", b"GIF89a" + b"g" * 40, "image/jpeg"),
        ("logo.png", b"<svg xmlns='http://www.w3.org/2000/svg'/>", "image/png"),
        ("notas.txt", b"texto simples", "text/plain"),
    ],
)
def test_a_file_whose_content_is_not_sendable_is_refused_with_nothing_stored(
    name: str,
    content: bytes,
    content_type: str,
    session: Session,
    support: User,
    fake_graph: FakeGraphAPI,
    media_root: Path,
) -> None:
    response = send_file(logged_in(support), session, upload(name, content, content_type))

    assert response.status_code == 303
    assert flash(response) == [("error", NOT_SENDABLE)]
    nothing_stored(session, media_root, fake_graph)


def test_the_composer_gets_the_refusal_as_json_with_400(
    session: Session, support: User, media_root: Path
) -> None:
    response = send_json(logged_in(support), session, upload("laudo.pdf", HTML, "application/pdf"))

    assert (response.status_code, response.json()) == (400, {"error": NOT_SENDABLE})
    nothing_stored(session, media_root)


@pytest.mark.parametrize(("size", "accepted"), [(2000, True), (2001, False)])
def test_an_image_over_the_settings_limit_is_refused_and_one_at_it_is_sent(
    size: int,
    accepted: bool,
    session: Session,
    support: User,
    settings: Settings,
    fake_graph: FakeGraphAPI,
    media_root: Path,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    settings.WHATSAPP_MEDIA_MAX_BYTES_IMAGE = 2000
    image = JPEG[:size].ljust(size, b"j")

    with django_capture_on_commit_callbacks(execute=True):
        response = send_file(logged_in(support), session, upload("foto.jpg", image))

    if accepted:
        assert flash(response) == [("success", "Arquivo enviado ao WhatsApp.")]
        assert len(fake_graph.uploads[0].content) == 2000
    else:
        assert flash(response) == [
            (
                "error",
                "A imagem tem 2,0\xa0KB; o WhatsApp aceita imagens de no máximo 2,0\xa0KB.",
            )
        ]
        nothing_stored(session, media_root, fake_graph)


def test_an_image_over_meta_s_5_mb_is_refused_whatever_the_settings_say(
    session: Session, support: User, settings: Settings, media_root: Path
) -> None:
    settings.WHATSAPP_MEDIA_MAX_BYTES_IMAGE = 50 * 1024 * 1024
    image = JPEG.ljust(5 * 1024 * 1024 + 1, b"j")

    response = send_file(logged_in(support), session, upload("foto.jpg", image))

    assert flash(response) == [
        ("error", "A imagem tem 5,0\xa0MB; o WhatsApp aceita imagens de no máximo 5,0\xa0MB.")
    ]
    nothing_stored(session, media_root)


def test_a_document_over_the_limit_is_refused_before_its_content_is_read(
    session: Session, support: User, settings: Settings, media_root: Path
) -> None:
    settings.WHATSAPP_MEDIA_MAX_BYTES_DOCUMENT = 1024
    settings.WHATSAPP_MEDIA_MAX_BYTES_IMAGE = 1024

    response = send_file(logged_in(support), session, upload("laudo.pdf", PDF.ljust(1025, b" ")))

    assert flash(response) == [
        ("error", "O arquivo tem 1,0\xa0KB; o WhatsApp aceita arquivos de no máximo 1,0\xa0KB.")
    ]
    nothing_stored(session, media_root)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"caption": "Oi"}, "Escolha o arquivo a enviar."),
        ({"file": upload("vazio.pdf", b""), "caption": ""}, "O arquivo está vazio."),
        (
            {"file": upload("laudo.pdf", PDF), "caption": "x" * 1025},
            "A legenda tem 1025 caracteres; o WhatsApp aceita no máximo 1024.",
        ),
        (
            {"file": upload("laudo.pdf", PDF), "caption": "Oi\x00"},
            "O texto tem um caractere inválido (NUL). Apague-o e envie de novo.",
        ),
    ],
)
def test_a_missing_or_empty_file_or_a_wrong_caption_is_refused(
    data: dict[str, Any], expected: str, session: Session, support: User, media_root: Path
) -> None:
    response = logged_in(support).post(url(session), {**data, "form_token": str(uuid4())})

    assert flash(response) == [("error", expected)]
    nothing_stored(session, media_root)


def test_a_caption_of_exactly_the_limit_is_accepted(
    session: Session, support: User, media_root: Path
) -> None:
    response = send_file(logged_in(support), session, upload("laudo.pdf", PDF), caption="x" * 1024)

    assert flash(response)[0][0] == "success"
    assert Message.objects.get(session=session, direction=Direction.OUTBOUND).content == "x" * 1024


def test_a_file_outside_the_24_hour_window_is_refused_and_its_stored_copy_deleted(
    session: Session, support: User, media_root: Path, fake_graph: FakeGraphAPI
) -> None:
    Session.objects.filter(pk=session.pk).update(
        last_inbound_at=timezone.now() - timedelta(hours=24, seconds=1)
    )

    response = send_file(logged_in(support), session, upload("laudo.pdf", PDF))

    [(level, text)] = flash(response)
    assert level == "error"
    assert text.startswith("A janela de 24 horas do WhatsApp está fechada")
    nothing_stored(session, media_root, fake_graph)


def test_a_file_while_the_bot_holds_the_session_is_refused(
    session: Session, support: User, media_root: Path
) -> None:
    Session.objects.filter(pk=session.pk).update(state=SessionState.QUALIFYING.value)

    response = send_file(logged_in(support), session, upload("laudo.pdf", PDF))

    assert flash(response) == [
        ("error", "Assuma a conversa primeiro: ela não está com a equipe agora.")
    ]
    nothing_stored(session, media_root)


def test_a_colleague_s_conversation_asks_first(
    session: Session, support: User, media_root: Path
) -> None:
    colleague = staff_member(SUPPORT)

    response = send_json(logged_in(colleague), session, upload("laudo.pdf", PDF))

    assert response.status_code == 409
    assert response.json()["assigned_to_another"] is True
    nothing_stored(session, media_root)


def test_a_prompt_editor_may_not_send_a_file(session: Session, media_root: Path) -> None:
    editor = staff_member("Prompt editors")

    response = send_file(logged_in(editor), session, upload("laudo.pdf", PDF))

    assert response.status_code == 403
    nothing_stored(session, media_root)


def test_a_post_without_the_csrf_token_is_refused(
    session: Session, support: User, media_root: Path
) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(support)

    response = send_file(client, session, upload("laudo.pdf", PDF))

    assert response.status_code == 403
    nothing_stored(session, media_root)


# --- The composer ----------------------------------------------------------------------------


def test_the_composer_offers_the_file_picker_with_the_types_and_limits(
    session: Session, support: User
) -> None:
    page = logged_in(support).get(f"/admin/conversations/session/{session.pk}/change/")
    html = page.content.decode()

    assert (
        '<input type="file" name="file" id="attach-file" form="staff-send-file" '
        'accept=".jpg,.jpeg,.png,.pdf,.doc,.xls,.ppt,.docx,.xlsx,.pptx" class="attach-input">'
    ) in html
    assert 'enctype="multipart/form-data"' in html
    assert (
        'title="Imagens JPEG ou PNG até 5,0\xa0MB; documentos PDF, Word, Excel ou PowerPoint até '
        '100,0\xa0MB."'
    ) in html
    assert json.dumps("Anexar arquivo")[1:-1] in html
