"""A fake WhatsApp Cloud API (Graph API) on 127.0.0.1, built on pytest-httpserver.

The real `GraphClient` (httpx) talks to it over HTTP, so tests see the exact requests the app
would send to Meta. Use it with pytest-httpserver's `httpserver` fixture::

    @pytest.fixture
    def fake_graph(httpserver, settings):
        graph = FakeGraphAPI(httpserver)
        settings.WHATSAPP_API_BASE_URL = graph.base_url
        return graph

By default every ``POST /<version>/<phone_number_id>/messages`` is accepted: a send answers a
fresh wamid (``wamid.FAKE0001``, ``wamid.FAKE0002``...), a mark-read answers ``{"success": true}``.
Script other answers, consumed in order, with `respond_error`, `respond_delay` or `respond_json`;
`requests` lists what arrived.

``GET /<version>/<media_id>`` answers a media given to `set_media` as Meta does (``url``,
``mime_type``, ``sha256``, ``file_size``; 404 with code 100 for an unknown id), and its ``url``
(``GET /media-bytes/<media_id>`` on this server) serves the bytes; the scripted answers apply to
the first of the two.

``POST /<version>/<phone_number_id>/media`` (a file staff send) answers ``{"id": <media id>}``
(``800000000000001``, ``800000000000002``...) and records the multipart form in `uploads`: its
fields, the file's name, Content-Type and bytes; the scripted answers apply to it too.

``GET /<version>/<waba_id>/message_templates`` answers the templates given to `set_templates`
for that account, `page_size` at a time, paged as Meta pages (``paging.cursors.after`` and a
``paging.next`` URL on every page but the last); the scripted answers apply to it too.
"""

import base64
import hashlib
import itertools
import json
import re
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

API_VERSION = "v23.0"


@dataclass(frozen=True)
class GraphRequest:
    method: str
    path: str
    headers: dict[str, str]
    json: Any

    @property
    def phone_number_id(self) -> str:
        return self.path.split("/")[2]


@dataclass(frozen=True)
class GraphUpload:
    """One ``POST /<phone_number_id>/media``, as the server read its multipart form."""

    path: str
    headers: dict[str, str]
    form: dict[str, str]
    filename: str
    content_type: str
    content: bytes


@dataclass(frozen=True)
class _Scripted:
    status: int
    body: Any
    delay: float = 0.0


def graph_error(
    code: int, title: str, details: str = "", *, type_: str = "OAuthException"
) -> dict[str, Any]:
    """A Graph API error body as the Cloud API sends it."""
    error: dict[str, Any] = {
        "message": title,
        "type": type_,
        "code": code,
        "fbtrace_id": "AbCdEfGhIjK",
    }
    if details:
        error["error_data"] = {"messaging_product": "whatsapp", "details": details}
    return {"error": error}


class FakeGraphAPI:
    def __init__(self, httpserver: HTTPServer, *, version: str = API_VERSION) -> None:
        self.httpserver = httpserver
        self.version = version
        self.requests: list[GraphRequest] = []
        self._scripted: deque[_Scripted] = deque()
        self._wamids = (f"wamid.FAKE{n:04d}" for n in itertools.count(1))
        self.uploads: list[GraphUpload] = []
        self._media_ids = (f"{800000000000000 + n}" for n in itertools.count(1))
        self._lock = threading.Lock()
        # Called with each request before it is answered (e.g. to look at the database then).
        self.on_request: Callable[[GraphRequest], None] | None = None
        # Any phone_number_id; the requests list records which one was called.
        uri = re.compile(rf"^/{re.escape(version)}/[0-9]+/messages$")
        httpserver.expect_request(uri, method="POST").respond_with_handler(self._handle)
        upload = re.compile(rf"^/{re.escape(version)}/[0-9]+/media$")
        httpserver.expect_request(upload, method="POST").respond_with_handler(self._upload)
        self._templates: dict[str, list[dict[str, Any]]] = {}
        self._page_size = 100
        listing = re.compile(rf"^/{re.escape(version)}/[0-9]+/message_templates$")
        httpserver.expect_request(listing, method="GET").respond_with_handler(self._list)
        self._media: dict[str, tuple[bytes, str, str]] = {}
        media = re.compile(rf"^/{re.escape(version)}/[0-9]+$")
        httpserver.expect_request(media, method="GET").respond_with_handler(self._media_url)
        media_bytes = re.compile(r"^/media-bytes/[0-9]+$")
        httpserver.expect_request(media_bytes, method="GET").respond_with_handler(self._media_bytes)

    @property
    def base_url(self) -> str:
        return self.httpserver.url_for(f"/{self.version}").rstrip("/")

    def respond_json(self, status: int, body: Any) -> None:
        self._scripted.append(_Scripted(status, body))

    def respond_error(self, status: int, code: int, title: str, details: str = "") -> None:
        self.respond_json(status, graph_error(code, title, details))

    def respond_delay(self, seconds: float) -> None:
        """The next request is answered (successfully) only after `seconds`."""
        self._scripted.append(_Scripted(200, None, delay=seconds))

    def set_templates(
        self, waba_id: str, templates: list[dict[str, Any]], *, page_size: int = 100
    ) -> None:
        """What ``GET /<waba_id>/message_templates`` lists (Meta's objects, as given)."""
        self._templates[waba_id] = list(templates)
        self._page_size = page_size

    def set_media(
        self, media_id: str, content: bytes, mime_type: str, *, sha256: str | None = None
    ) -> str:
        """A media Meta keeps for download; answers the base64 SHA-256 it announces (its own,
        unless `sha256` says otherwise)."""
        digest = sha256 or base64.b64encode(hashlib.sha256(content).digest()).decode()
        self._media[media_id] = (content, mime_type, digest)
        return digest

    @property
    def media_requests(self) -> list[GraphRequest]:
        return [r for r in self.requests if r.method == "GET" and "message_templates" not in r.path]

    @property
    def listings(self) -> list[GraphRequest]:
        """The template listing requests, with their query string in `path`."""
        return [r for r in self.requests if r.method == "GET"]

    @property
    def sends(self) -> list[GraphRequest]:
        return [r for r in self.requests if isinstance(r.json, dict) and "type" in r.json]

    @property
    def reads(self) -> list[GraphRequest]:
        return [r for r in self.requests if isinstance(r.json, dict) and "status" in r.json]

    def _handle(self, request: Request) -> Response:
        try:
            body = json.loads(request.get_data())
        except ValueError:
            body = None
        recorded = GraphRequest(request.method, request.path, dict(request.headers), body)
        with self._lock:
            self.requests.append(recorded)
            scripted = self._scripted.popleft() if self._scripted else None
        if self.on_request is not None:
            self.on_request(recorded)
        if scripted is not None and scripted.delay:
            time.sleep(scripted.delay)
        if scripted is not None and scripted.body is not None:
            return _json_response(scripted.status, scripted.body)
        return _json_response(200, self._success(body))

    def _success(self, body: Any) -> dict[str, Any]:
        if isinstance(body, dict) and body.get("status") == "read":
            return {"success": True}
        recipient = body.get("to") or body.get("recipient") if isinstance(body, dict) else ""
        key = "wa_id" if isinstance(body, dict) and body.get("to") else "user_id"
        with self._lock:
            wamid = next(self._wamids)
        return {
            "messaging_product": "whatsapp",
            "contacts": [{"input": recipient, key: recipient}],
            "messages": [{"id": wamid}],
        }

    def _upload(self, request: Request) -> Response:
        file = request.files.get("file")
        recorded = GraphUpload(
            path=request.path,
            headers=dict(request.headers),
            form=request.form.to_dict(),
            filename=file.filename or "" if file is not None else "",
            content_type=file.content_type or "" if file is not None else "",
            content=file.read() if file is not None else b"",
        )
        with self._lock:
            self.uploads.append(recorded)
            scripted = self._scripted.popleft() if self._scripted else None
        if scripted is not None and scripted.delay:
            time.sleep(scripted.delay)
        if scripted is not None and scripted.body is not None:
            return _json_response(scripted.status, scripted.body)
        with self._lock:
            media_id = next(self._media_ids)
        return _json_response(200, {"id": media_id})

    def _list(self, request: Request) -> Response:
        query = request.query_string.decode()
        recorded = GraphRequest(
            request.method, f"{request.path}?{query}", dict(request.headers), None
        )
        with self._lock:
            self.requests.append(recorded)
            scripted = self._scripted.popleft() if self._scripted else None
        if scripted is not None and scripted.delay:
            time.sleep(scripted.delay)
        if scripted is not None and scripted.body is not None:
            return _json_response(scripted.status, scripted.body)
        waba_id = request.path.split("/")[2]
        templates = self._templates.get(waba_id)
        if templates is None:
            error = graph_error(100, "Unsupported get request.", type_="GraphMethodException")
            return _json_response(400, error)
        size = int(request.args.get("limit", self._page_size))
        size = min(size, self._page_size)
        start = int(request.args.get("after", "0").removeprefix("cursor-") or 0)
        page = templates[start : start + size]
        end = start + len(page)
        paging: dict[str, Any] = {
            "cursors": {"before": f"cursor-{start}", "after": f"cursor-{end}"}
        }
        if end < len(templates):
            params = {**request.args.to_dict(), "after": f"cursor-{end}"}
            paging["next"] = f"{self.httpserver.url_for(request.path)}?{urlencode(params)}"
        return _json_response(200, {"data": page, "paging": paging})

    def _media_url(self, request: Request) -> Response:
        recorded = GraphRequest(request.method, request.path, dict(request.headers), None)
        with self._lock:
            self.requests.append(recorded)
            scripted = self._scripted.popleft() if self._scripted else None
        if scripted is not None and scripted.body is not None:
            return _json_response(scripted.status, scripted.body)
        media_id = request.path.rsplit("/", 1)[1]
        if media_id not in self._media:
            error = graph_error(100, "Unsupported get request.", type_="GraphMethodException")
            return _json_response(404, error)
        content, mime_type, digest = self._media[media_id]
        return _json_response(
            200,
            {
                "messaging_product": "whatsapp",
                "url": self.httpserver.url_for(f"/media-bytes/{media_id}"),
                "mime_type": mime_type,
                "sha256": digest,
                "file_size": len(content),
                "id": media_id,
            },
        )

    def _media_bytes(self, request: Request) -> Response:
        recorded = GraphRequest(request.method, request.path, dict(request.headers), None)
        with self._lock:
            self.requests.append(recorded)
        media_id = request.path.rsplit("/", 1)[1]
        if media_id not in self._media:
            return Response(b"", status=404)
        content, mime_type, _digest = self._media[media_id]
        return Response(content, status=200, content_type=mime_type)


def _json_response(status: int, body: Any) -> Response:
    return Response(json.dumps(body), status=status, content_type="application/json")
