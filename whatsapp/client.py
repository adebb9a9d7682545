"""A small WhatsApp Cloud API (Graph API) client over httpx.

Reads no settings: the caller passes the base URL (``WHATSAPP_API_BASE_URL``, version pinned) and,
per call, the access token of the instance. Every failure is a `GraphAPIError` carrying Meta's
error code and title and whether a retry may succeed:

- retryable: timeouts, connection errors, HTTP 5xx and 429, and the codes 130429 (throughput
  limit) and 131056 (too many messages to one user);
- not retryable: everything else, e.g. 131047 (the 24-hour window is closed), 131026
  (undeliverable), 131049, 131050 (the user stopped marketing messages), 190 (expired token).

Request shapes (Meta's documentation):
``POST {base}/{phone_number_id}/messages`` with ``{"messaging_product": "whatsapp",
"recipient_type": "individual", "to": <phone>, "type": "text", "text": {"body": ...}}`` — or
``"recipient": <business-scoped user id>`` instead of ``"to"`` when the phone is unknown — answers
``{"messages": [{"id": <wamid>}]}``; an approved template (`send_template`, allowed outside the
24-hour window) is ``"type": "template", "template": {"name": ..., "language": {"code": ...},
"components": [{"type": "body", "parameters": [{"type": "text", "text": ...}, ...]}]}``;
marking a message read with a typing indicator is a POST to
the same URL with ``{"messaging_product": "whatsapp", "status": "read", "message_id": <wamid>,
"typing_indicator": {"type": "text"}}``; the message templates of a WhatsApp Business Account
(`list_message_templates`) are ``GET {base}/{waba_id}/message_templates?fields=...&limit=...``,
answering ``{"data": [...], "paging": {"cursors": {"before": ..., "after": ...}, "next": <url>}}``
(no ``next`` on the last page).

A file staff send goes up first (`media_upload`): ``POST {base}/{phone_number_id}/media``, a
multipart form with ``messaging_product=whatsapp``, ``type=<MIME type>`` and the ``file``,
answering ``{"id": <media id>}``; then an image or document message names it (`send_media`):
``"type": "image", "image": {"id": ..., "caption": ...}`` or ``"type": "document", "document":
{"id": ..., "caption": ..., "filename": ...}``.

Each thread that calls a `GraphClient` gets an httpx client of its own (one kept-alive
connection), all sharing one TLS context. One httpx client shared by a threads worker's 100
threads costs more CPU per request the more requests are in flight (httpcore's pool re-scans
its requests and connections, under its lock, each time one starts or ends): measured on the
2-core dev VM, 2.1 ms per request alone and 4.7 ms with 100 in flight, against 2.5 ms either way
with a client per thread. The per-thread clients are kept until `close`.
"""

import ssl
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, BinaryIO, Protocol, Self
from uuid import uuid4

import httpx

from agents.redaction import redact

# Bounded: a send runs inside a Celery task, never inside the webhook request.
DEFAULT_TIMEOUT = httpx.Timeout(10.0, connect=5.0)
# An upload of up to 100 MB: each read or write may wait longer than a message's (the whole
# upload has no bound of its own; the send refreshes its claim once it is done).
UPLOAD_TIMEOUT = httpx.Timeout(30.0, connect=5.0)
TEMPLATE_FIELDS = "name,language,status,category,components,id"
TEMPLATE_PAGE_SIZE = 100
# A WABA has at most a few thousand templates (Meta's limit is 6,000 per account): past this
# many pages a cursor that never ends is a fault, not more templates.
MAX_TEMPLATE_PAGES = 100
RETRYABLE_ERROR_CODES = frozenset({130429, 131056})


class GraphAPIError(Exception):
    """A refused or failed Graph API call; `code` and `title` are Meta's when Meta sent them.

    `title` and `details` are redacted here: Meta's text may echo the access token (``Malformed
    access token EAAG…``) or a phone number, and the title is logged and stored on the message
    (`delivery_error_title`), which Support reads.
    """

    def __init__(
        self,
        *,
        code: int | None,
        title: str,
        details: str = "",
        http_status: int | None = None,
        retryable: bool,
    ) -> None:
        title, details = redact(title), redact(details)
        super().__init__(f"{code} {title}" if code is not None else title)
        self.code = code
        self.title = title
        self.details = details
        self.http_status = http_status
        self.retryable = retryable


@dataclass(frozen=True, slots=True)
class SentMessage:
    wamid: str


class WhatsAppSender(Protocol):
    """What the use cases need from a Graph API client (tests pass the real one)."""

    def send_text(
        self,
        *,
        phone_number_id: str,
        access_token: str,
        body: str,
        to_phone: str = "",
        to_user_id: str = "",
        callback_data: str = "",
    ) -> SentMessage: ...

    def send_template(
        self,
        *,
        phone_number_id: str,
        access_token: str,
        name: str,
        language: str,
        parameters: Sequence[str] = (),
        to_phone: str = "",
        to_user_id: str = "",
        callback_data: str = "",
    ) -> SentMessage: ...

    def send_interactive(
        self,
        *,
        phone_number_id: str,
        access_token: str,
        interactive: Mapping[str, Any],
        to_phone: str = "",
        to_user_id: str = "",
        callback_data: str = "",
    ) -> SentMessage: ...

    def media_upload(
        self,
        *,
        phone_number_id: str,
        access_token: str,
        content: BinaryIO,
        mime_type: str,
        filename: str,
    ) -> str: ...

    def send_media(
        self,
        *,
        phone_number_id: str,
        access_token: str,
        kind: str,
        media_id: str,
        caption: str = "",
        filename: str = "",
        to_phone: str = "",
        to_user_id: str = "",
        callback_data: str = "",
    ) -> SentMessage: ...

    def mark_read(
        self, *, phone_number_id: str, access_token: str, wamid: str, typing_indicator: bool = True
    ) -> None: ...


SIMULATED_WAMID_PREFIX = "sim."


def is_simulated_wamid(wamid: str | None) -> bool:
    """Whether a stored wamid is the dry-run sender's (the message never left the machine)."""
    return bool(wamid) and str(wamid).startswith(SIMULATED_WAMID_PREFIX)


class DryRunSender:
    """A `WhatsAppSender` that sends nothing: each send "succeeds" with a fake wamid,
    ``sim.<uuid4>``, which no status callback will ever name; mark-read does nothing.

    `conversations.sending` uses it when no access token is configured (the `make run` default)
    and for simulated sessions (`Session.is_simulated`), so no request leaves the machine.
    """

    def send_text(
        self,
        *,
        phone_number_id: str,
        access_token: str,
        body: str,
        to_phone: str = "",
        to_user_id: str = "",
        callback_data: str = "",
    ) -> SentMessage:
        return SentMessage(wamid=f"{SIMULATED_WAMID_PREFIX}{uuid4()}")

    def send_template(
        self,
        *,
        phone_number_id: str,
        access_token: str,
        name: str,
        language: str,
        parameters: Sequence[str] = (),
        to_phone: str = "",
        to_user_id: str = "",
        callback_data: str = "",
    ) -> SentMessage:
        return SentMessage(wamid=f"{SIMULATED_WAMID_PREFIX}{uuid4()}")

    def send_interactive(
        self,
        *,
        phone_number_id: str,
        access_token: str,
        interactive: Mapping[str, Any],
        to_phone: str = "",
        to_user_id: str = "",
        callback_data: str = "",
    ) -> SentMessage:
        return SentMessage(wamid=f"{SIMULATED_WAMID_PREFIX}{uuid4()}")

    def media_upload(
        self,
        *,
        phone_number_id: str,
        access_token: str,
        content: BinaryIO,
        mime_type: str,
        filename: str,
    ) -> str:
        return f"{SIMULATED_WAMID_PREFIX}{uuid4()}"

    def send_media(
        self,
        *,
        phone_number_id: str,
        access_token: str,
        kind: str,
        media_id: str,
        caption: str = "",
        filename: str = "",
        to_phone: str = "",
        to_user_id: str = "",
        callback_data: str = "",
    ) -> SentMessage:
        return SentMessage(wamid=f"{SIMULATED_WAMID_PREFIX}{uuid4()}")

    def mark_read(
        self, *, phone_number_id: str, access_token: str, wamid: str, typing_indicator: bool = True
    ) -> None:
        return None


@dataclass(frozen=True, slots=True)
class MediaLocation:
    """``GET {base}/{media_id}``'s answer: where the bytes are (for about five minutes) and what
    Meta says they are."""

    url: str
    mime_type: str
    sha256: str
    file_size: int | None


class MediaTooLargeError(Exception):
    """The media's bytes went past the caller's limit: nothing is kept."""


# Meta's media URLs name its lookaside host (lookaside.fbsbx.com); the bearer token goes there,
# over HTTPS, and to the configured Graph host only.
MEDIA_HOST_SUFFIX = ".fbsbx.com"


class GraphClient:
    def __init__(
        self,
        *,
        base_url: str,
        timeout: httpx.Timeout = DEFAULT_TIMEOUT,
        http: httpx.Client | None = None,
    ) -> None:
        """`http`, when given, is the one client every thread uses (its owner's to configure)."""
        self.base_url = base_url.rstrip("/")
        self._timeout = timeout
        self._shared = http
        self._local = threading.local()
        self._clients: list[httpx.Client] = []
        self._lock = threading.Lock()
        self._tls: ssl.SSLContext | None = None

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        if self._shared is not None:
            self._shared.close()
        with self._lock:
            clients, self._clients = self._clients, []
        for client in clients:
            client.close()

    def _http(self) -> httpx.Client:
        """This thread's httpx client (see the module docstring)."""
        if self._shared is not None:
            return self._shared
        client: httpx.Client | None = getattr(self._local, "client", None)
        if client is None:
            with self._lock:
                if self._tls is None:
                    # httpx's own default, built once: a context costs tens of ms of CPU, and
                    # every thread's client would otherwise build its own.
                    self._tls = httpx.create_ssl_context()
                client = httpx.Client(timeout=self._timeout, verify=self._tls)
                self._clients.append(client)
            self._local.client = client
        return client

    def send_text(
        self,
        *,
        phone_number_id: str,
        access_token: str,
        body: str,
        to_phone: str = "",
        to_user_id: str = "",
        callback_data: str = "",
    ) -> SentMessage:
        """Send a text; to the phone when known, else to the business-scoped user id.

        `callback_data` goes out as ``biz_opaque_callback_data``: Meta echoes it in the
        message's status callbacks (see `whatsapp.status_order`)."""
        return self._send(
            phone_number_id,
            access_token,
            {"type": "text", "text": {"body": body}},
            to_phone=to_phone,
            to_user_id=to_user_id,
            callback_data=callback_data,
        )

    def send_template(
        self,
        *,
        phone_number_id: str,
        access_token: str,
        name: str,
        language: str,
        parameters: Sequence[str] = (),
        to_phone: str = "",
        to_user_id: str = "",
        callback_data: str = "",
    ) -> SentMessage:
        """Send an approved template with its body parameters ({{1}}, {{2}}, … in order)."""
        template: dict[str, Any] = {"name": name, "language": {"code": language}}
        if parameters:
            template["components"] = [
                {
                    "type": "body",
                    "parameters": [{"type": "text", "text": value} for value in parameters],
                }
            ]
        return self._send(
            phone_number_id,
            access_token,
            {"type": "template", "template": template},
            to_phone=to_phone,
            to_user_id=to_user_id,
            callback_data=callback_data,
        )

    def send_interactive(
        self,
        *,
        phone_number_id: str,
        access_token: str,
        interactive: Mapping[str, Any],
        to_phone: str = "",
        to_user_id: str = "",
        callback_data: str = "",
    ) -> SentMessage:
        """Send an interactive message (reply buttons or a list, `whatsapp.interactive`)."""
        return self._send(
            phone_number_id,
            access_token,
            {"type": "interactive", "interactive": dict(interactive)},
            to_phone=to_phone,
            to_user_id=to_user_id,
            callback_data=callback_data,
        )

    def media_upload(
        self,
        *,
        phone_number_id: str,
        access_token: str,
        content: BinaryIO,
        mime_type: str,
        filename: str,
    ) -> str:
        """Upload a file for a later `send_media`; Meta's media id. `content` is streamed."""
        answer = self._request(
            "POST",
            f"{self.base_url}/{phone_number_id}/media",
            access_token,
            data={"messaging_product": "whatsapp", "type": mime_type},
            files={"file": (filename, content, mime_type)},
            timeout=UPLOAD_TIMEOUT,
        )
        media_id = answer.get("id")
        if not isinstance(media_id, str) or not media_id:
            # Uploading again costs an unused copy at Meta, never a second message.
            raise GraphAPIError(
                code=None, title="Resposta da Graph API sem ID da mídia", retryable=True
            )
        return media_id

    def send_media(
        self,
        *,
        phone_number_id: str,
        access_token: str,
        kind: str,
        media_id: str,
        caption: str = "",
        filename: str = "",
        to_phone: str = "",
        to_user_id: str = "",
        callback_data: str = "",
    ) -> SentMessage:
        """Send an uploaded file as an ``image`` or ``document`` message; a document carries
        the file name the customer sees."""
        media: dict[str, str] = {"id": media_id}
        if caption:
            media["caption"] = caption
        if filename and kind == "document":
            media["filename"] = filename
        return self._send(
            phone_number_id,
            access_token,
            {"type": kind, kind: media},
            to_phone=to_phone,
            to_user_id=to_user_id,
            callback_data=callback_data,
        )

    def _send(
        self,
        phone_number_id: str,
        access_token: str,
        content: dict[str, Any],
        *,
        to_phone: str,
        to_user_id: str,
        callback_data: str,
    ) -> SentMessage:
        if to_phone:
            recipient = {"to": to_phone}
        elif to_user_id:
            recipient = {"recipient": to_user_id}
        else:
            raise ValueError("a send needs to_phone or to_user_id")
        request: dict[str, Any] = {
            "messaging_product": "whatsapp",
            "recipient_type": "individual",
            **recipient,
            **content,
        }
        if callback_data:
            request["biz_opaque_callback_data"] = callback_data
        answer = self._post(phone_number_id, access_token, request)
        messages = answer.get("messages")
        wamid = None
        if isinstance(messages, list) and messages and isinstance(messages[0], dict):
            wamid = messages[0].get("id")
        if not isinstance(wamid, str) or not wamid:
            # Accepted or not, we cannot tell: never retry, a retry could send it twice.
            raise GraphAPIError(
                code=None, title="Resposta da Graph API sem ID da mensagem", retryable=False
            )
        return SentMessage(wamid=wamid)

    def mark_read(
        self, *, phone_number_id: str, access_token: str, wamid: str, typing_indicator: bool = True
    ) -> None:
        request: dict[str, Any] = {
            "messaging_product": "whatsapp",
            "status": "read",
            "message_id": wamid,
        }
        if typing_indicator:
            request["typing_indicator"] = {"type": "text"}
        self._post(phone_number_id, access_token, request)

    def list_message_templates(
        self, *, waba_id: str, access_token: str, page_size: int = TEMPLATE_PAGE_SIZE
    ) -> list[dict[str, Any]]:
        """Every message template of the WhatsApp Business Account, whatever its status, as
        Meta describes it (name, language, status, category, components, id).

        Pages follow the ``after`` cursor on this client's own base URL while Meta's answer has
        a ``paging.next``, rather than requesting ``next`` itself: that URL is absolute, and the
        access token goes only to the configured host. Any failed page fails the whole list (a
        partial list would read as templates gone)."""
        url = f"{self.base_url}/{waba_id}/message_templates"
        params: dict[str, str | int] = {"fields": TEMPLATE_FIELDS, "limit": page_size}
        templates: list[dict[str, Any]] = []
        for _page in range(MAX_TEMPLATE_PAGES):
            answer = self._request("GET", url, access_token, params=params)
            data = answer.get("data")
            if not isinstance(data, list):
                raise GraphAPIError(
                    code=None,
                    title="Resposta da Graph API sem a lista de modelos de mensagem",
                    retryable=False,
                )
            templates.extend(item for item in data if isinstance(item, dict))
            paging = answer.get("paging")
            paging = paging if isinstance(paging, dict) else {}
            cursors = paging.get("cursors")
            after = cursors.get("after") if isinstance(cursors, dict) else None
            if not paging.get("next"):
                return templates
            if not isinstance(after, str) or not after:
                raise GraphAPIError(
                    code=None, title="Resposta da Graph API sem o cursor da página", retryable=False
                )
            params = {**params, "after": after}
        raise GraphAPIError(
            code=None,
            title="A Graph API não terminou a lista de modelos de mensagem",
            retryable=False,
        )

    def media_url(self, media_id: str, access_token: str) -> MediaLocation:
        """Where a received media's bytes are: ``GET {base}/{media_id}`` answers ``{"url",
        "mime_type", "sha256", "file_size", "id", "messaging_product"}``; 404 once Meta dropped
        it."""
        answer = self._request("GET", f"{self.base_url}/{media_id}", access_token)
        url = answer.get("url")
        if not isinstance(url, str) or not url:
            raise GraphAPIError(code=None, title="Resposta da Graph API sem URL", retryable=True)
        size = answer.get("file_size")
        return MediaLocation(
            url=url,
            mime_type=_string(answer.get("mime_type")),
            sha256=_string(answer.get("sha256")),
            file_size=size if isinstance(size, int) and not isinstance(size, bool) else None,
        )

    def media_bytes(self, url: str, access_token: str, *, max_bytes: int) -> bytes:
        """The bytes at a `media_url` URL, read at most `max_bytes` (`MediaTooLargeError` past
        it). The token is sent only to the Graph host or Meta's CDN: a URL naming any other host
        is refused without a request."""
        target = httpx.URL(url)
        lookaside = target.scheme == "https" and target.host.endswith(MEDIA_HOST_SUFFIX)
        if target.host != httpx.URL(self.base_url).host and not lookaside:
            raise GraphAPIError(code=None, title="URL de mídia fora da Meta", retryable=False)
        headers = {"Authorization": f"Bearer {access_token}"}
        try:
            with self._http().stream("GET", url, headers=headers) as response:
                if not response.is_success:
                    response.read()
                    raise _error_from_response(response.status_code, _json_or_none(response))
                chunks: list[bytes] = []
                total = 0
                for chunk in response.iter_bytes():
                    total += len(chunk)
                    if total > max_bytes:
                        raise MediaTooLargeError(f"more than {max_bytes} bytes")
                    chunks.append(chunk)
        except httpx.TimeoutException as exc:
            raise GraphAPIError(
                code=None, title="Tempo esgotado na Graph API", retryable=True
            ) from exc
        except httpx.TransportError as exc:
            raise GraphAPIError(
                code=None, title="Falha de conexão com a Graph API", retryable=True
            ) from exc
        return b"".join(chunks)

    def _post(
        self, phone_number_id: str, access_token: str, body: dict[str, Any]
    ) -> dict[str, Any]:
        url = f"{self.base_url}/{phone_number_id}/messages"
        return self._request("POST", url, access_token, json=body)

    def _request(
        self,
        method: str,
        url: str,
        access_token: str,
        *,
        json: dict[str, Any] | None = None,
        params: dict[str, str | int] | None = None,
        data: dict[str, str] | None = None,
        files: dict[str, tuple[str, BinaryIO, str]] | None = None,
        timeout: httpx.Timeout | None = None,
    ) -> dict[str, Any]:
        headers = {"Authorization": f"Bearer {access_token}"}
        try:
            response = self._http().request(
                method,
                url,
                json=json,
                params=params,
                data=data,
                files=files,
                headers=headers,
                timeout=httpx.USE_CLIENT_DEFAULT if timeout is None else timeout,
            )
        except httpx.TimeoutException as exc:
            raise GraphAPIError(
                code=None, title="Tempo esgotado na Graph API", retryable=True
            ) from exc
        except httpx.TransportError as exc:
            raise GraphAPIError(
                code=None, title="Falha de conexão com a Graph API", retryable=True
            ) from exc
        try:
            answer = response.json()
        except ValueError:
            answer = None
        if response.is_success and isinstance(answer, dict):
            return answer
        raise _error_from_response(response.status_code, answer)


def _error_from_response(http_status: int, answer: Any) -> GraphAPIError:
    error = answer.get("error") if isinstance(answer, dict) else None
    if not isinstance(error, dict):
        return GraphAPIError(
            code=None,
            title=f"Erro HTTP {http_status} da Graph API",
            http_status=http_status,
            retryable=http_status >= 500 or http_status == 429,
        )
    code = error.get("code")
    code = code if isinstance(code, int) and not isinstance(code, bool) else None
    title = _string(error.get("error_user_title")) or _string(error.get("message"))
    error_data = error.get("error_data")
    details = _string(error_data.get("details")) if isinstance(error_data, dict) else ""
    return GraphAPIError(
        code=code,
        title=title or f"Erro HTTP {http_status} da Graph API",
        details=details or _string(error.get("error_user_msg")),
        http_status=http_status,
        retryable=http_status >= 500 or http_status == 429 or code in RETRYABLE_ERROR_CODES,
    )


def _json_or_none(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


def _string(value: Any) -> str:
    return value if isinstance(value, str) else ""
