"""The staff actions on the session page: thin POST views over `support.staff_actions`,
their URLs, and the panel of buttons and forms the page shows.

Every view is POST-only (a GET answers 405), CSRF-checked and behind the admin login
(`AdminSite.admin_view`), and refuses users without ``conversations.attend_session`` with a 403
before doing anything. It parses the form and calls one use case. A plain form post gets the
outcome (or the refusal, in pt-BR) in the messages framework and a 303 back to the page
(post/redirect/get: a reload does not repost). A request with ``Accept: application/json`` (the
workspace's composer and buttons) gets 200 ``{"ok": true, "changed", "message", "message_id",
"form_token"}`` — a fresh one-time token for the page's next send — or
``{"error": "<pt-BR sentence>"}`` with 400 (refused), 403 (no permission), 404 (no such
conversation) or 409 (assigned to a colleague: the question to confirm, `assigned_to_another`).
"""

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import uuid4

from django.contrib import admin, messages
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.template.defaultfilters import filesizeformat
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.formats import date_format
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from agents.states import BOT_STATES, SessionState
from conversations.labels import moment_text
from conversations.models import STATE_CHOICES, MessageTemplate, Session
from staff_auth.names import staff_name
from support.staff_actions import (
    ActionOutcome,
    AssignedToAnother,
    StaffActionRefused,
    attending_users,
    can_attend,
    parse_form_token,
    sendable_templates,
    session_assign,
    session_close,
    session_give_back,
    session_prompts_update,
    session_reply,
    session_reply_retry,
    session_send_file,
    session_send_template,
    session_summary_regenerate,
    session_take_over,
    upload_max_bytes,
    window_closes_at,
    window_is_open,
)
from whatsapp.outbound_media import ACCEPT

ACTION_NAMES = (
    "take_over",
    "assign",
    "reply",
    "send_file",
    "send_template",
    "give_back",
    "close",
    "regenerate_summary",
    "prompts_update",
    "retry",
)
BOT_STATE_CHOICES = [(value, label) for value, label in STATE_CHOICES if value in BOT_STATES]


def action_url_name(action: str) -> str:
    return f"conversations_session_{action}"


# --- Views -----------------------------------------------------------------------------------

Run = Callable[[HttpRequest, int, datetime], ActionOutcome]


def _staff(request: HttpRequest) -> User:
    """The logged-in staff member (`action_view` lets no one else through)."""
    assert isinstance(request.user, User)
    return request.user


def _take_over(request: HttpRequest, session_id: int, now: datetime) -> ActionOutcome:
    return session_take_over(session_id=session_id, user=_staff(request), now=now)


def _assign(request: HttpRequest, session_id: int, now: datetime) -> ActionOutcome:
    raw = request.POST.get("user", "").strip()
    if raw == "me":
        assignee_id = _staff(request).pk
    elif raw.isascii() and raw.isdigit():
        assignee_id = int(raw)
    else:
        raise StaffActionRefused(_("Choose a member of the team who attends conversations."))
    return session_assign(
        session_id=session_id,
        user=_staff(request),
        assignee_id=assignee_id,
        now=now,
    )


def _confirmed(request: HttpRequest) -> bool:
    return request.POST.get("confirm_other_assignee") == "1"


def _reply(request: HttpRequest, session_id: int, now: datetime) -> ActionOutcome:
    return session_reply(
        session_id=session_id,
        user=_staff(request),
        text=request.POST.get("text", ""),
        form_token=parse_form_token(request.POST.get("form_token", "")),
        now=now,
        confirm_other_assignee=_confirmed(request),
    )


def _send_file(request: HttpRequest, session_id: int, now: datetime) -> ActionOutcome:
    return session_send_file(
        session_id=session_id,
        user=_staff(request),
        upload=request.FILES.get("file"),
        caption=request.POST.get("caption", ""),
        form_token=parse_form_token(request.POST.get("form_token", "")),
        now=now,
        confirm_other_assignee=_confirmed(request),
    )


def _retry(request: HttpRequest, session_id: int, now: datetime) -> ActionOutcome:
    raw = request.POST.get("message", "").strip()
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 19:
        raise StaffActionRefused(_("Only a reply of the team that failed can be sent again."))
    return session_reply_retry(
        session_id=session_id,
        user=_staff(request),
        message_id=int(raw),
        form_token=parse_form_token(request.POST.get("form_token", "")),
        now=now,
        confirm_other_assignee=_confirmed(request),
    )


def _send_template(request: HttpRequest, session_id: int, now: datetime) -> ActionOutcome:
    raw = request.POST.get("template", "")
    if not (raw.isascii() and raw.isdigit()):
        raise StaffActionRefused(_("Choose one of the active templates."))
    return session_send_template(
        session_id=session_id,
        user=_staff(request),
        template_id=int(raw),
        values=request.POST.getlist("parameter"),
        form_token=parse_form_token(request.POST.get("form_token", "")),
        now=now,
    )


def _give_back(request: HttpRequest, session_id: int, now: datetime) -> ActionOutcome:
    return session_give_back(
        session_id=session_id,
        user=_staff(request),
        state=request.POST.get("state", "").strip(),
        now=now,
    )


def _close(request: HttpRequest, session_id: int, now: datetime) -> ActionOutcome:
    return session_close(session_id=session_id, user=_staff(request), now=now)


def _regenerate_summary(request: HttpRequest, session_id: int, now: datetime) -> ActionOutcome:
    return session_summary_regenerate(
        session_id=session_id,
        user=_staff(request),
        form_token=parse_form_token(request.POST.get("form_token", "")),
        now=now,
    )


def _prompts_update(request: HttpRequest, session_id: int, now: datetime) -> ActionOutcome:
    return session_prompts_update(session_id=session_id, user=_staff(request), now=now)


RUNS: dict[str, Run] = {
    "take_over": _take_over,
    "assign": _assign,
    "reply": _reply,
    "send_file": _send_file,
    "send_template": _send_template,
    "give_back": _give_back,
    "close": _close,
    "regenerate_summary": _regenerate_summary,
    "prompts_update": _prompts_update,
    "retry": _retry,
}


def wants_json(request: HttpRequest) -> bool:
    """Whether the caller asked for the JSON answer (``Accept: application/json``)."""
    return "application/json" in request.headers.get("Accept", "")


def _json_error(status: int, message: str, **extra: Any) -> JsonResponse:
    return JsonResponse({"error": message, **extra}, status=status)


def action_view(run: Run) -> Callable[..., HttpResponse]:
    @require_POST
    def view(request: HttpRequest, session_id: int) -> HttpResponse:
        as_json = wants_json(request)
        if not can_attend(request.user):
            if as_json:
                return _json_error(403, _("You may not attend conversations."))
            raise PermissionDenied
        try:
            outcome = run(request, session_id, timezone.now())
        except Session.DoesNotExist:
            if as_json:
                return _json_error(
                    404, _("Conversation #%(id)s does not exist.") % {"id": session_id}
                )
            raise Http404 from None
        except StaffActionRefused as refused:
            if as_json:
                if isinstance(refused, AssignedToAnother):
                    return _json_error(409, refused.message, assigned_to_another=True)
                return _json_error(400, refused.message)
            messages.error(request, refused.message)
        else:
            if as_json:
                return JsonResponse(
                    {
                        "ok": True,
                        "changed": outcome.changed,
                        "message": outcome.message,
                        "message_id": outcome.message_id,
                        "form_token": str(uuid4()),
                    }
                )
            level = messages.SUCCESS if outcome.changed else messages.INFO
            messages.add_message(request, level, outcome.message)
        page = reverse("admin:conversations_session_change", args=[session_id])
        return HttpResponseRedirect(page + "#staff-actions", status=303)

    return view


def staff_action_urls(model_admin: admin.ModelAdmin[Session]) -> list[URLPattern]:
    """``<id>/take-over/``, ``<id>/assign/``, … for `SessionAdmin.get_urls` (before its own)."""
    return [
        path(
            f"<int:session_id>/{action.replace('_', '-')}/",
            model_admin.admin_site.admin_view(action_view(RUNS[action])),
            name=action_url_name(action),
        )
        for action in ACTION_NAMES
    ]


# --- The panel on the page -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TemplateChoice:
    template: MessageTemplate
    parameters: list[str]


@dataclass(frozen=True, slots=True)
class StaffActionsPanel:
    """What `admin/conversations/session/staff_actions.html` shows (users who may attend)."""

    urls: dict[str, str]
    state: str
    can_take_over: bool
    with_team: bool  # HUMAN: reply, templates, give back, new summary
    is_open: bool  # not CLOSED: assign, close, use the current prompts
    window_open: bool
    window_text: str
    assigned_to: str  # the assignee's name ("Bruno Lima", else the username); "" for nobody
    assigned_to_other: bool  # assigned to someone other than the reader
    assignees: list[Any]  # the colleagues it may be assigned to ("me" is offered apart)
    bot_states: list[tuple[str, Any]]
    default_state: str
    templates: list[TemplateChoice]
    form_token: str
    file_accept: str = ACCEPT  # what the file picker offers (the server reads the content)
    file_limits: str = ""  # "Imagens JPEG ou PNG até 5,0 MB; …"


def staff_actions_panel(*, session: Session, user: Any, now: datetime) -> StaffActionsPanel | None:
    """The panel for `user`, or None when they may not attend conversations (no buttons)."""
    if not can_attend(user):
        return None
    state = session.state
    with_team = state == SessionState.HUMAN
    closes_at = window_closes_at(session)
    open_ = window_is_open(session, now)
    if open_:
        assert closes_at is not None
        same_day = timezone.localtime(closes_at).date() == timezone.localtime(now).date()
        when = (
            date_format(timezone.localtime(closes_at), "TIME_FORMAT")
            if same_day
            else moment_text(closes_at)
        )
        window_text = _("window open until %(time)s") % {"time": when}
    else:
        window_text = _("window closed: use a template")
    assigned = session.assigned_to
    default_state = (
        session.state_before_handoff
        if session.state_before_handoff in {s.value for s in BOT_STATES}
        else SessionState.TRIAGE.value
    )
    templates = (
        [
            TemplateChoice(t, [str(label) for label in t.parameters or []])
            for t in sendable_templates(session)
        ]
        if with_team
        else []
    )
    return StaffActionsPanel(
        urls={
            action: reverse(f"admin:{action_url_name(action)}", args=[session.pk])
            for action in ACTION_NAMES
        },
        state=state,
        can_take_over=state in BOT_STATES,
        with_team=with_team,
        is_open=state != SessionState.CLOSED,
        window_open=open_,
        window_text=window_text,
        assigned_to=staff_name(assigned) if assigned else "",
        assigned_to_other=assigned is not None and assigned.pk != user.pk,
        assignees=(
            list(attending_users().exclude(pk=user.pk)) if state != SessionState.CLOSED else []
        ),
        bot_states=BOT_STATE_CHOICES,
        default_state=default_state,
        templates=templates,
        form_token=str(uuid4()),
        file_limits=_(
            "JPEG or PNG images up to %(image)s; PDF, Word, Excel or PowerPoint documents up "
            "to %(document)s."
        )
        % {
            "image": filesizeformat(upload_max_bytes("image")),
            "document": filesizeformat(upload_max_bytes("document")),
        },
    )
