"""``POST …/conversations/session/<id>/note/`` (field ``text``): an internal note, a thin view over
`support.notes.session_note_add`.

POST-only (a GET answers 405), CSRF-checked and behind the admin login (`AdminSite.admin_view`);
staff without ``conversations.attend_session`` get a 403 before anything is read. A form post is
answered with a 303 to the conversation page and an admin message (post/redirect/get: a reload
does not write the note twice); a request with ``Accept: application/json`` (the composer's)
with 200 ``{"ok": true, "message": …, "note": {id, author, text, html, created_at}}``, or 400
(the text, an erased conversation), 403 or 404 ``{"error": "<pt-BR sentence>"}``. The note in
the answer is masked as the page is for staff without `conversations.view_personal_data`.
"""

from typing import Any

from django.contrib import admin, messages
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from conversations.models import Session
from conversations.privacy.personal_data import can_view_personal_data, session_masker
from support.admin.transcript import NoteEntry, note_entry
from support.notes import session_note_add
from support.staff_actions import StaffActionRefused, can_attend

NOTE_URL_NAME = "conversations_session_note"


class HttpResponseSeeOther(HttpResponseRedirect):
    """A redirect the browser follows with a GET, whatever the method that got it."""

    status_code = 303


def wants_json(request: HttpRequest) -> bool:
    return "application/json" in request.headers.get("Accept", "")


def note_json(entry: NoteEntry) -> dict[str, Any]:
    """A note as the live endpoint and this one answer it."""
    return {
        "id": entry.note.pk,
        "author": entry.who,
        "text": entry.text,
        "html": str(entry.html),
        "meta": entry.meta,
        "created_at": entry.note.created_at.isoformat(),
    }


def _refused(request: HttpRequest, status: int, text: str, page: str) -> HttpResponse:
    if wants_json(request):
        return JsonResponse({"error": text}, status=status)
    messages.error(request, text)
    return HttpResponseSeeOther(page)


@require_POST
def session_note_view(request: HttpRequest, session_id: int) -> HttpResponse:
    user = request.user
    if not can_attend(user):
        if wants_json(request):
            return JsonResponse(
                {"error": _("You may not write notes: you do not attend conversations.")},
                status=403,
            )
        raise PermissionDenied
    assert isinstance(user, User)  # the admin lets only logged-in staff through
    page = reverse("admin:conversations_session_change", args=[session_id])
    try:
        added = session_note_add(
            session_id=session_id,
            user=user,
            text=request.POST.get("text", ""),
            now=timezone.now(),
        )
    except Session.DoesNotExist:
        missing = _("Conversation #%(id)s does not exist.") % {"id": session_id}
        return _refused(request, 404, missing, reverse("admin:conversations_session_changelist"))
    except StaffActionRefused as refused:
        return _refused(request, 400, refused.message, page + "#transcript")
    if wants_json(request):
        masker = None if can_view_personal_data(user) else session_masker(added.session)
        return JsonResponse(
            {
                "ok": True,
                "message": added.message,
                "note": note_json(note_entry(added.note, masker=masker)),
                "mentioned": added.mentioned,
            }
        )
    messages.success(request, added.message)
    return HttpResponseSeeOther(f"{page}#note-{added.note.pk}")


def note_urls(model_admin: admin.ModelAdmin[Session]) -> list[URLPattern]:
    """``<id>/note/``, registered with `support.admin.sessions.session_admin_urls`."""
    return [
        path(
            "<int:session_id>/note/",
            model_admin.admin_site.admin_view(session_note_view),
            name=NOTE_URL_NAME,
        )
    ]
