"""The conversation page's live endpoint: ``GET …/conversations/session/<id>/live/?after=<id>``.

A thin view over `support.live.session_live`; ``&after_note=<note id>`` (the newest internal note
the page shows, 0 for none) adds the notes after it under ``notes``, and without it ``notes``
is empty and no note is read; ``&media=<message ids>`` (the bubbles whose media block is still
changing) adds those blocks under ``media``. The same permission as the page (the admin's view
permission on sessions: Support, prompt editors, superusers; anyone else gets 403 after the
admin's own login check) and the same masking (staff without
`conversations.view_personal_data` read every text masked). Bad input is answered with a 400
and a sentence, an unknown session with a 404, both as JSON.

The answer carries an ``ETag`` (a digest of its body); a poll sending it back in
``If-None-Match`` gets a 304 without a body when nothing changed.
`support/admin/session_live.js` polls it.
"""

import hashlib
import json
from typing import Any

from django.contrib import admin
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.core.serializers.json import DjangoJSONEncoder
from django.http import HttpRequest, HttpResponse, HttpResponseNotModified, JsonResponse
from django.urls import URLPattern, path
from django.utils import timezone
from django.utils.cache import patch_cache_control, patch_vary_headers
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET

from conversations.models import Session
from conversations.privacy.personal_data import can_view_personal_data, session_masker
from support.live import MAX_LIVE_MEDIA, session_live

LIVE_URL_NAME = "conversations_session_live"
# Message ids are PostgreSQL bigints: a larger number cannot name a message.
MAX_MESSAGE_ID = 2**63 - 1


def _error(status: int, message: str) -> JsonResponse:
    return JsonResponse({"error": message}, status=status)


def parse_after(raw: str) -> int | None:
    """The ``after`` parameter as a message id (0 or more), None when it is not one."""
    if not (raw.isascii() and raw.isdigit()) or len(raw) > len(str(MAX_MESSAGE_ID)):
        return None
    value = int(raw)
    return value if value <= MAX_MESSAGE_ID else None


def parse_ids(raw: str) -> list[int] | None:
    """The ``media`` parameter ("12,15": message ids) as ids, at most `MAX_LIVE_MEDIA` of them;
    [] when empty; None when it is not such a list."""
    if not raw:
        return []
    ids = [parse_after(part) for part in raw.split(",")[: MAX_LIVE_MEDIA + 1]]
    if len(ids) > MAX_LIVE_MEDIA or any(i is None for i in ids):
        return None
    return [i for i in ids if i is not None]


def session_live_view(
    request: HttpRequest, session_id: int, *, model_admin: admin.ModelAdmin[Session]
) -> HttpResponse:
    if not model_admin.has_view_permission(request):
        raise PermissionDenied
    after = parse_after(request.GET.get("after", ""))
    if after is None:
        return _error(
            400,
            _("after: the id of the last message shown, a whole number (0 for none)."),
        )
    raw_note = request.GET.get("after_note")
    after_note = parse_after(raw_note) if raw_note is not None else None
    if raw_note is not None and after_note is None:
        return _error(
            400,
            _("after_note: the id of the last note shown, a whole number (0 for none)."),
        )
    media = parse_ids(request.GET.get("media", ""))
    if media is None:
        return _error(400, _("media: the ids of messages, separated by commas."))
    session = (
        model_admin.get_queryset(request)
        .select_related("instance", "assigned_to")
        .filter(pk=session_id)
        .first()
    )
    if session is None:
        return _error(404, _("Conversation #%(id)s does not exist.") % {"id": session_id})
    user = request.user
    assert isinstance(user, User)  # the admin lets only logged-in staff through
    masker = None if can_view_personal_data(user) else session_masker(session)
    live = session_live(
        session=session,
        after=after,
        user=user,
        now=timezone.now(),
        masker=masker,
        after_note=after_note,
        media=media,
    )
    return polled_json(request, live.as_json(), vary=["Cookie"])


def polled_json(request: HttpRequest, answer: Any, *, vary: list[str]) -> HttpResponse:
    """A polled page's JSON answer with an ETag (a digest of its body), and a 304 without a
    body when the poll's ``If-None-Match`` names it; every poll asks the server (the 304 is the
    cheap answer), never a cached copy."""
    body = json.dumps(answer, cls=DjangoJSONEncoder).encode()
    etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
    if request.headers.get("If-None-Match") == etag:
        response: HttpResponse = HttpResponseNotModified()
    else:
        response = HttpResponse(body, content_type="application/json")
    response["ETag"] = etag
    patch_cache_control(response, private=True, no_cache=True)
    patch_vary_headers(response, vary)
    return response


def live_urls(model_admin: admin.ModelAdmin[Session]) -> list[URLPattern]:
    """``<id>/live/``, for `SessionAdmin.get_urls` (before the admin's `<object_id>/` ones)."""

    @require_GET
    def view(request: HttpRequest, session_id: int) -> HttpResponse:
        return session_live_view(request, session_id, model_admin=model_admin)

    return [
        path(
            "<int:session_id>/live/",
            model_admin.admin_site.admin_view(view),
            name=LIVE_URL_NAME,
        )
    ]
