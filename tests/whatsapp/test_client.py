"""The Graph API client against a fake Graph server on 127.0.0.1 (real httpx, real HTTP)."""

import io
from collections.abc import Iterator

import httpx
import pytest
from pytest_httpserver import HTTPServer

from tests.fakes.graph_server import FakeGraphAPI
from whatsapp.client import GraphAPIError, GraphClient, SentMessage
from whatsapp.interactive import Option, reply_buttons

PNID = "100000000000001"


@pytest.fixture
def graph(httpserver: HTTPServer) -> FakeGraphAPI:
    return FakeGraphAPI(httpserver)


@pytest.fixture
def client(graph: FakeGraphAPI) -> Iterator[GraphClient]:
    with GraphClient(base_url=graph.base_url) as client:
        yield client


def test_send_text_to_a_phone_posts_the_exact_body_and_bearer_token(
    graph: FakeGraphAPI, client: GraphClient
) -> None:
    sent = client.send_text(
        phone_number_id=PNID, access_token="tok-123", body="Olá!", to_phone="5511987654321"
    )

    assert sent == SentMessage(wamid="wamid.FAKE0001")
    [request] = graph.requests
    assert (request.method, request.path) == ("POST", f"/v23.0/{PNID}/messages")
    assert request.headers["Authorization"] == "Bearer tok-123"
    assert request.headers["Content-Type"] == "application/json"
    assert request.json == {
        "messaging_product": "whatsapp",
        "recipient_type": "individual",
        "to": "5511987654321",
        "type": "text",
        "text": {"body": "Olá!"},
    }


def test_send_text_without_a_phone_goes_to_the_business_scoped_user_id(
    graph: FakeGraphAPI, client: GraphClient
) -> None:
    client.send_text(phone_number_id=PNID, access_token="t", body="Oi", to_user_id="BR.123")

    assert graph.requests[0].json == {
        "messaging_product": "whatsapp",
        "recipient_type": "individual",
        "recipient": "BR.123",
        "type": "text",
        "text": {"body": "Oi"},
    }


def test_the_phone_wins_over_the_user_id_when_both_are_known(
    graph: FakeGraphAPI, client: GraphClient
) -> None:
    client.send_text(
        phone_number_id=PNID, access_token="t", body="Oi", to_phone="55119", to_user_id="BR.1"
    )

    assert graph.requests[0].json["to"] == "55119"
    assert "recipient" not in graph.requests[0].json


def test_send_text_without_any_recipient_is_a_programming_error(
    graph: FakeGraphAPI, client: GraphClient
) -> None:
    with pytest.raises(ValueError, match="to_phone or to_user_id"):
        client.send_text(phone_number_id=PNID, access_token="t", body="Oi")

    assert graph.requests == []


def test_mark_read_sends_the_read_status_with_a_typing_indicator(
    graph: FakeGraphAPI, client: GraphClient
) -> None:
    client.mark_read(phone_number_id=PNID, access_token="t", wamid="wamid.IN1")

    assert graph.requests[0].json == {
        "messaging_product": "whatsapp",
        "status": "read",
        "message_id": "wamid.IN1",
        "typing_indicator": {"type": "text"},
    }


@pytest.mark.parametrize(
    ("status", "code", "title", "retryable"),
    [
        (400, 131047, "Re-engagement message", False),
        (400, 131026, "Message undeliverable", False),
        (400, 131049, "This message was not delivered to maintain healthy ecosystem", False),
        (400, 131050, "User has stopped marketing messages", False),
        (401, 190, "Error validating access token", False),
        (400, 100, "Invalid parameter", False),
        (400, 130429, "Rate limit hit", True),
        (400, 131056, "(Business Account, Consumer Account) pair rate limit hit", True),
        (500, 131000, "Something went wrong", True),
        (503, 2, "Service temporarily unavailable", True),
        (429, 80007, "Rate limit issues", True),
    ],
)
def test_graph_errors_carry_meta_s_code_title_details_and_retryability(
    graph: FakeGraphAPI, client: GraphClient, status: int, code: int, title: str, retryable: bool
) -> None:
    graph.respond_error(status, code, title, "more details")

    with pytest.raises(GraphAPIError) as raised:
        client.send_text(phone_number_id=PNID, access_token="t", body="x", to_phone="55")

    error = raised.value
    assert (error.code, error.title, error.details, error.http_status, error.retryable) == (
        code,
        title,
        "more details",
        status,
        retryable,
    )


@pytest.mark.parametrize(
    ("status", "body", "title", "retryable"),
    [
        (502, "<html>Bad gateway</html>", "Erro HTTP 502 da Graph API", True),
        (404, {"unexpected": True}, "Erro HTTP 404 da Graph API", False),
        (200, {"messaging_product": "whatsapp"}, "Resposta da Graph API sem ID da mensagem", False),
    ],
)
def test_answers_without_a_graph_error_are_still_typed_errors(
    graph: FakeGraphAPI, client: GraphClient, status: int, body: object, title: str, retryable: bool
) -> None:
    graph.respond_json(status, body)

    with pytest.raises(GraphAPIError) as raised:
        client.send_text(phone_number_id=PNID, access_token="t", body="x", to_phone="55")

    assert (raised.value.code, raised.value.title, raised.value.retryable) == (
        None,
        title,
        retryable,
    )


def test_a_slow_server_is_a_retryable_timeout(graph: FakeGraphAPI) -> None:
    graph.respond_delay(0.3)

    with (
        GraphClient(base_url=graph.base_url, timeout=httpx.Timeout(0.1)) as client,
        pytest.raises(GraphAPIError) as raised,
    ):
        client.send_text(phone_number_id=PNID, access_token="t", body="x", to_phone="55")

    assert (raised.value.title, raised.value.retryable) == ("Tempo esgotado na Graph API", True)


def test_a_refused_connection_is_a_retryable_error() -> None:
    with (
        GraphClient(base_url="http://127.0.0.1:9/v23.0") as client,
        pytest.raises(GraphAPIError) as raised,
    ):
        client.send_text(phone_number_id=PNID, access_token="t", body="x", to_phone="55")

    assert (raised.value.title, raised.value.retryable) == (
        "Falha de conexão com a Graph API",
        True,
    )


def test_a_graph_error_echoing_the_token_or_personal_data_is_raised_without_them(
    graph: FakeGraphAPI, client: GraphClient
) -> None:
    token = "EAAGSENTINEL0123456789abcdefXYZ"
    graph.respond_error(
        401, 190, f"Malformed access token {token}", "Recipient 5511987654321 (ana@x.com.br)"
    )

    with pytest.raises(GraphAPIError) as raised:
        client.send_text(phone_number_id=PNID, access_token=token, body="x", to_phone="55")

    # `title` is stored on the message (delivery_error_title) and logged with `details`.
    error = raised.value
    assert (str(error), error.title, error.details) == (
        "190 Malformed access token EAA[redacted]",
        "Malformed access token EAA[redacted]",
        "Recipient [phone] ([email])",
    )


def test_send_template_posts_the_template_with_its_body_parameters(
    graph: FakeGraphAPI, client: GraphClient
) -> None:
    sent = client.send_template(
        phone_number_id=PNID,
        access_token="t",
        name="retomar_contato",
        language="pt_BR",
        parameters=["Maria", "água"],
        to_phone="5511987654321",
        callback_data="m:42",
    )

    assert sent == SentMessage(wamid="wamid.FAKE0001")
    assert graph.requests[0].json == {
        "messaging_product": "whatsapp",
        "recipient_type": "individual",
        "to": "5511987654321",
        "type": "template",
        "template": {
            "name": "retomar_contato",
            "language": {"code": "pt_BR"},
            "components": [
                {
                    "type": "body",
                    "parameters": [
                        {"type": "text", "text": "Maria"},
                        {"type": "text", "text": "água"},
                    ],
                }
            ],
        },
        "biz_opaque_callback_data": "m:42",
    }


def test_a_template_without_parameters_has_no_components(
    graph: FakeGraphAPI, client: GraphClient
) -> None:
    client.send_template(
        phone_number_id=PNID, access_token="t", name="ola", language="pt_BR", to_user_id="BR.1"
    )

    assert graph.requests[0].json == {
        "messaging_product": "whatsapp",
        "recipient_type": "individual",
        "recipient": "BR.1",
        "type": "template",
        "template": {"name": "ola", "language": {"code": "pt_BR"}},
    }


def test_send_interactive_posts_the_interactive_object_as_given(
    graph: FakeGraphAPI, client: GraphClient
) -> None:
    buttons = reply_buttons(
        "Seus dados estão corretos?",
        [Option("confirm", "Confirmar"), Option("correct", "Corrigir")],
    )

    sent = client.send_interactive(
        phone_number_id=PNID,
        access_token="t",
        interactive=buttons,
        to_phone="5511987654321",
        callback_data="m:7",
    )

    assert sent == SentMessage(wamid="wamid.FAKE0001")
    assert graph.requests[0].json == {
        "messaging_product": "whatsapp",
        "recipient_type": "individual",
        "to": "5511987654321",
        "type": "interactive",
        "interactive": {
            "type": "button",
            "body": {"text": "Seus dados estão corretos?"},
            "action": {
                "buttons": [
                    {"type": "reply", "reply": {"id": "confirm", "title": "Confirmar"}},
                    {"type": "reply", "reply": {"id": "correct", "title": "Corrigir"}},
                ]
            },
        },
        "biz_opaque_callback_data": "m:7",
    }


def test_media_upload_posts_a_multipart_form_and_answers_meta_s_media_id(
    graph: FakeGraphAPI, client: GraphClient
) -> None:
    media_id = client.media_upload(
        phone_number_id=PNID,
        access_token="tok-123",
        content=io.BytesIO(b"%PDF-1.7 laudo"),
        mime_type="application/pdf",
        filename="laudo.pdf",
    )

    assert media_id == "800000000000001"
    [upload] = graph.uploads
    assert upload.path == f"/v23.0/{PNID}/media"
    assert upload.headers["Authorization"] == "Bearer tok-123"
    assert upload.headers["Content-Type"].startswith("multipart/form-data; boundary=")
    assert upload.form == {"messaging_product": "whatsapp", "type": "application/pdf"}
    assert (upload.filename, upload.content_type, upload.content) == (
        "laudo.pdf",
        "application/pdf",
        b"%PDF-1.7 laudo",
    )
    assert graph.requests == []  # no message was sent


@pytest.mark.parametrize(
    ("status", "body", "code", "retryable"),
    [
        (200, {"success": True}, None, True),  # no id: uploading again sends nothing twice
        (500, {"error": {"code": 2, "message": "Service temporarily unavailable"}}, 2, True),
        (400, {"error": {"code": 131053, "message": "Media upload error"}}, 131053, False),
    ],
)
def test_an_upload_without_an_id_or_refused_is_a_typed_error(
    status: int,
    body: dict[str, object],
    code: int | None,
    retryable: bool,
    graph: FakeGraphAPI,
    client: GraphClient,
) -> None:
    graph.respond_json(status, body)

    with pytest.raises(GraphAPIError) as raised:
        client.media_upload(
            phone_number_id=PNID,
            access_token="tok-123",
            content=io.BytesIO(b"\xff\xd8\xff"),
            mime_type="image/jpeg",
            filename="foto.jpg",
        )

    assert (raised.value.code, raised.value.retryable) == (code, retryable)


@pytest.mark.parametrize(
    ("kind", "caption", "filename", "expected"),
    [
        ("image", "Etiqueta", "foto.jpg", {"id": "777", "caption": "Etiqueta"}),
        ("image", "", "", {"id": "777"}),
        ("document", "", "laudo.pdf", {"id": "777", "filename": "laudo.pdf"}),
        (
            "document",
            "Seu laudo",
            "laudo.pdf",
            {"id": "777", "caption": "Seu laudo", "filename": "laudo.pdf"},
        ),
    ],
)
def test_send_media_names_the_upload_with_its_caption_and_a_document_s_file_name(
    kind: str,
    caption: str,
    filename: str,
    expected: dict[str, str],
    graph: FakeGraphAPI,
    client: GraphClient,
) -> None:
    sent = client.send_media(
        phone_number_id=PNID,
        access_token="tok-123",
        kind=kind,
        media_id="777",
        caption=caption,
        filename=filename,
        to_phone="5511987654321",
    )

    assert sent == SentMessage(wamid="wamid.FAKE0001")
    assert graph.requests[0].json == {
        "messaging_product": "whatsapp",
        "recipient_type": "individual",
        "to": "5511987654321",
        "type": kind,
        kind: expected,
    }
