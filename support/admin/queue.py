"""The queue page (`…/conversations/session/queue/`) and the waiting count in the admin's header.

Staff who may attend conversations (`conversations.attend_session`: Support, superusers) see the
customers waiting for a human (`support.queue`), oldest first, 100 a page, all of them or
only those assigned to them (``?assigned=me``), and only those with a label (``?label=<id>``,
the labels listed as links above the table); anyone else gets 403 (the admin's own login check
comes first). Customers are masked for staff without `conversations.view_personal_data`, as on
every conversation page, and so is the summary's next action (it may quote the customer).

The page refreshes itself as the conversation page does: `support/admin/queue.js` (a static
file: the CSP allows no inline script) asks the same URL, query string included, for its JSON
answer (``Accept: application/json``) every `QUEUE_REFRESH_SECONDS` while the tab is visible and
every `QUEUE_HIDDEN_REFRESH_SECONDS` while hidden, with the ``ETag`` of the last answer (a 304
when nothing changed), and swaps the table's body, the counts and the pagination, keeping the
scroll position. The answer: ``rows_html``, ``pages_html``, ``count``, ``count_text``,
``waiting_total`` (the header's count) and ``waiting`` (each row's ``id`` and ``customer``,
masked as the rows), from which the page tells who joined: staff who opted in get a browser
notification and a "(N)" in the title.

`waiting_customers` is a template context processor (`config.settings.TEMPLATES`): for staff
with the permission it puts a lazy `WaitingCustomers` in every admin page's context, which the
header (`templates/admin/base_site.html`) and the index (`templates/admin/index.html`) show; the
COUNT runs once per page, when the template first reads it, and never for anyone else.
"""

from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

from django.conf import settings
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, QueryDict
from django.template.loader import render_to_string
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from agents.phones import format_phone
from conversations.models import Session
from conversations.privacy.personal_data import (
    can_view_personal_data,
    masked_session,
    session_masker,
)
from support.admin.labels import parse_label_id
from support.admin.live import polled_json
from support.models import Label
from support.notes import note_mentions_pending
from support.queue import QueueEntry, queue_entry, waiting_count, waiting_sessions

ATTEND_SESSION = "conversations.attend_session"
QUEUE_PER_PAGE = 100
QUEUE_REFRESH_SECONDS = 5
# A hidden tab keeps polling, more slowly: its notifications are the point of opting in.
QUEUE_HIDDEN_REFRESH_SECONDS = 15
QUEUE_URL_NAME = "conversations_session_queue"
MINE = "me"


def can_attend(user: Any) -> bool:
    return bool(user.is_active and user.is_staff and user.has_perm(ATTEND_SESSION))


@dataclass(frozen=True, slots=True)
class QueueRow:
    entry: QueueEntry
    customer: str
    url: str


def customer_text(session: Session) -> str:
    """Name and phone (or the WhatsApp user id), as the session list shows the customer."""
    phone = (
        format_phone(session.customer_phone) if session.customer_phone else session.customer_user_id
    )
    if session.customer_name and phone:
        return f"{session.customer_name} ({phone})"
    return session.customer_name or phone or "?"


def _row(session: Session, *, now: Any, mask: bool, changelist_url: str) -> QueueRow:
    entry = queue_entry(session, now=now, sla_minutes=settings.SUPPORT_SLA_MINUTES)
    shown = session
    if mask:
        masker = session_masker(session)
        shown = masked_session(session, masker)
        entry = replace(entry, session=shown, next_action=masker.text(entry.next_action))
    return QueueRow(
        entry=entry,
        customer=customer_text(shown),
        # The admin's change URL, `<changelist>/<pk>/change/`, without a reverse per row.
        url=f"{changelist_url}{session.pk}/change/",
    )


def _query_string(params: QueryDict, **changes: str | None) -> str:
    query = params.copy()
    for key, value in changes.items():
        if value is None:
            query.pop(key, None)
        else:
            query[key] = value
    encoded = query.urlencode()
    return f"?{encoded}" if encoded else "?"


def session_queue(request: HttpRequest, *, model_admin: admin.ModelAdmin[Session]) -> HttpResponse:
    """The queue page; 403 for staff who may not attend conversations."""
    if not can_attend(request.user):
        raise PermissionDenied
    mine = request.GET.get("assigned") == MINE
    label_id = parse_label_id(request.GET.get("label", ""))
    queryset = waiting_sessions(assigned_to_id=request.user.pk if mine else None, label_id=label_id)
    page = Paginator(queryset, QUEUE_PER_PAGE).get_page(request.GET.get("page"))
    now = timezone.now()
    mask = not can_view_personal_data(request.user)
    changelist_url = reverse("admin:conversations_session_changelist")
    rows = [
        _row(session, now=now, mask=mask, changelist_url=changelist_url)
        for session in page.object_list
    ]
    params = request.GET
    context = {
        **model_admin.admin_site.each_context(request),
        "title": _("Customers waiting for a person"),
        "opts": Session._meta,
        "rows": rows,
        "page_obj": page,
        "mine": mine,
        "all_url": _query_string(params, assigned=None, page=None),
        "mine_url": _query_string(params, assigned=MINE, page=None),
        "label_id": label_id,
        "any_label_url": _query_string(params, label=None, page=None),
        "labels": [
            (label, _query_string(params, label=str(label.pk), page=None))
            for label in Label.objects.only("id", "name", "colour")
        ],
        "previous_url": (
            _query_string(params, page=str(page.previous_page_number()))
            if page.has_previous()
            else ""
        ),
        "next_url": (
            _query_string(params, page=str(page.next_page_number())) if page.has_next() else ""
        ),
        "sla_minutes": settings.SUPPORT_SLA_MINUTES,
        "refresh_seconds": QUEUE_REFRESH_SECONDS,
        "hidden_refresh_seconds": QUEUE_HIDDEN_REFRESH_SECONDS,
    }
    if "application/json" in request.headers.get("Accept", ""):
        return _queue_json(request, context, waiting_total=None if mine else page.paginator.count)
    return TemplateResponse(request, "admin/conversations/session/queue.html", context)


def _queue_json(
    request: HttpRequest, context: dict[str, Any], *, waiting_total: int | None
) -> HttpResponse:
    """The queue's JSON answer, with an ETag (a digest of its body) and a 304 when the poll's
    ``If-None-Match`` names it."""
    page = context["page_obj"]
    count = page.paginator.count
    answer = {
        "count": count,
        "count_text": ngettext(
            "%(counter)s customer waiting", "%(counter)s customers waiting", count
        )
        % {"counter": count},
        "waiting_total": waiting_count() if waiting_total is None else waiting_total,
        "rows_html": render_to_string(
            "admin/conversations/session/queue_rows.html", context, request=request
        ),
        "pages_html": render_to_string(
            "admin/conversations/session/queue_pages.html", context, request=request
        ),
        "waiting": [
            {"id": row.entry.session.pk, "customer": row.customer} for row in context["rows"]
        ],
        # The reader's unread mentions in colleagues' notes: queue.js notifies the new ones.
        "mentions": [
            {
                "id": mention.id,
                "url": reverse("admin:conversations_session_change", args=[mention.session_id]),
                "text": _("%(author)s mentioned you in a note on conversation #%(id)s")
                % {"author": mention.author, "id": mention.session_id},
            }
            for mention in note_mentions_pending(request.user.pk or 0)
        ],
    }
    return polled_json(request, answer, vary=["Cookie", "Accept"])


def queue_urls(model_admin: admin.ModelAdmin[Session]) -> list[URLPattern]:
    """The queue's URL, for `SessionAdmin.get_urls` (before the admin's `<object_id>/` ones)."""

    def view(request: HttpRequest) -> HttpResponse:
        return session_queue(request, model_admin=model_admin)

    return [path("queue/", model_admin.admin_site.admin_view(view), name=QUEUE_URL_NAME)]


# --- The count in the header -----------------------------------------------------------------


class WaitingCustomers:
    """The header's waiting count: queried once, on first read."""

    @cached_property
    def count(self) -> int:
        return waiting_count()

    @cached_property
    def url(self) -> str:
        return reverse(f"admin:{QUEUE_URL_NAME}")


def waiting_customers(request: HttpRequest) -> dict[str, Any]:
    """Template context processor: `waiting_customers` for staff who may attend conversations."""
    user = getattr(request, "user", None)
    if user is None or not can_attend(user):
        return {}
    return {"waiting_customers": WaitingCustomers()}
