"""What staff do on a conversation from the admin (docs/architecture.md, Actions on the conversation
page): take over, assign, reply, send a template, give back, close, regenerate the summary.

One use case per action, called by the admin views (`support.admin.staff_actions`) once
they have checked ``conversations.attend_session`` and parsed the form. Each use case:

- runs in one transaction that first locks the session row (``SELECT ... FOR UPDATE``), so two
  clicks, two colleagues, a running turn's commit or a webhook never interleave with it;
- checks the session's state under that lock and refuses what does not fit it with a pt-BR
  message (`StaffActionRefused`), writing nothing;
- changes nothing on a second identical POST: the state guards find the work done; a reply, a
  template and a summary request carry the form's one-time token (`form_token`), kept in the row
  they write (``json_part["form_token"]``), and a token seen before on a row of the same kind is
  a no-op;
- records who did it and when: a SYSTEM event in the transcript and an admin log entry.

Rules chosen here:

- Reply and template only while the session is HUMAN (take it over first): the bot and a person
  never answer the same customer at the same time. A free-text reply or a file only inside
  WhatsApp's 24-hour window; templates are allowed at any time, so the refusal names them.
- A file (`session_send_file`) is what its content says it is (`whatsapp.outbound_media`), within
  Meta's limits and the settings' (``WHATSAPP_MEDIA_MAX_BYTES_*``); the request only stores it
  (an OUTBOUND message with its `MessageMedia`, as a downloaded inbound file is kept) and the
  send task uploads it to the Graph API after the commit.
- Take over goes through `conversations.handoff.session_handoff` (reason ``staff_takeover``, no
  fixed text, no summary: staff are in the conversation). The customer's pending messages are
  marked processed, as the Business-app echo does: staff read them on the page. A turn already
  running does not send its answer: its commit re-reads the session under the row lock, sees the
  state changed and stores the draft as ``superseded``.
- New summary: one in flight per session. While the last request has no summary written after
  it and is younger than the summary task's time limit (``CELERY_TASK_TIME_LIMIT``), another
  click changes nothing: each request is one model call.
- Use the current prompts: what the session pinned at its first turn — its prompt versions
  (`Session.prompt_versions`), release and package versions — becomes what is active now, so its
  next turn uses it.
"""

import base64
import hashlib
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID, uuid4

from django.conf import settings
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractUser, AnonymousUser, Permission, User
from django.core.files.storage import default_storage
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction
from django.db.models import Q
from django.template.defaultfilters import filesizeformat
from django.utils.translation import gettext as _

from agents.sources import package_versions_of, prompt_versions_of
from agents.states import BOT_STATES, HandoffReason, SessionState
from conversations.commit_hooks import on_commit_call
from conversations.event_codes import EventCode
from conversations.handoff import HandoffRequest, session_handoff
from conversations.media import media_max_bytes
from conversations.models import (
    SUPERSEDED,
    DeliveryStatus,
    Direction,
    HandoffSummary,
    MediaStatus,
    Message,
    MessageMedia,
    MessageTemplate,
    Session,
    SurveyTrigger,
)
from conversations.satisfaction import SurveyOutcome, SurveySettings, survey_ask
from conversations.sending import (
    TEMPLATE_MESSAGE_TYPE,
    DryRunReason,
    TemplatePayload,
    dry_run_reason,
)
from conversations.sending.worker import send_message
from conversations.turns.tasks import generate_handoff_summary
from knowledge_base.selectors import DatabaseKBSource
from prompts_admin.models import RuntimeConfig
from prompts_admin.selectors import DatabasePromptSource, override_ids_of
from staff_auth.names import staff_name
from whatsapp import CUSTOMER_SERVICE_WINDOW
from whatsapp.outbound_media import (
    FILE_MESSAGE_TYPES,
    MAX_CAPTION_CHARS,
    SendableType,
    max_bytes_of,
    sendable_filename,
    sendable_type,
)

logger = logging.getLogger(__name__)

ATTEND_PERMISSION = "conversations.attend_session"
# WhatsApp's limit for a text message's body.
MAX_REPLY_CHARS = 4096
# WhatsApp refuses longer template parameters, and any with a line break or a tab.
MAX_TEMPLATE_PARAMETER_CHARS = 1024
_FORBIDDEN_IN_PARAMETER = re.compile(r"[\n\r\t]")
# PostgreSQL refuses NUL in text; no one types it, so a form that carries one is refused whole.
NUL = "\x00"
_PLACEHOLDER = re.compile(r"\{\{(\d+)\}\}")
REPLY_MESSAGE_TYPE = "text"


class StaffActionRefused(Exception):
    """The action does not fit the session or the form; `message` is for staff (pt-BR)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class AssignedToAnother(StaffActionRefused):
    """The conversation is assigned to a colleague: the sender confirms before writing to the
    customer (`confirm_other_assignee`); `message` is the question to ask."""


@dataclass(frozen=True, slots=True)
class ActionOutcome:
    """What the action did: `changed` is False for a repeated submit (nothing written)."""

    changed: bool
    message: str
    message_id: int | None = None


# --- Shared rules ----------------------------------------------------------------------------


def window_closes_at(session: Session) -> datetime | None:
    """When WhatsApp's 24-hour customer-service window closes (None: the customer never wrote)."""
    if session.last_inbound_at is None:
        return None
    return session.last_inbound_at + CUSTOMER_SERVICE_WINDOW


def window_is_open(session: Session, now: datetime) -> bool:
    closes_at = window_closes_at(session)
    return closes_at is not None and now < closes_at


def can_attend(user: AbstractUser | AnonymousUser) -> bool:
    return bool(user.is_active and user.has_perm(ATTEND_PERMISSION))


def attending_users() -> Any:
    """Active staff who may attend conversations: whom a conversation can be assigned to."""
    user_model = get_user_model()
    app_label, codename = ATTEND_PERMISSION.split(".")
    permission = Q(content_type__app_label=app_label, codename=codename)
    permissions = Permission.objects.filter(permission)
    return (
        user_model.objects.filter(is_active=True, is_staff=True)
        .filter(
            Q(is_superuser=True)
            | Q(groups__permissions__in=permissions)
            | Q(user_permissions__in=permissions)
        )
        .distinct()
        .order_by(user_model.USERNAME_FIELD)
    )


def sendable_templates(session: Session) -> Any:
    """The active WhatsApp message templates `session`'s number may send: those of its
    WhatsApp Business Account and those registered by hand (no account)."""
    accounts = {"", session.instance.waba_id}
    return MessageTemplate.objects.filter(is_active=True, waba_id__in=accounts)


def render_template_body(body: str, values: Sequence[str]) -> str:
    """The template's text as the customer reads it: {{1}}, {{2}}, … replaced by `values`."""

    def value(match: re.Match[str]) -> str:
        index = int(match.group(1)) - 1
        return values[index] if 0 <= index < len(values) else match.group(0)

    return _PLACEHOLDER.sub(value, body)


def template_placeholders(body: str) -> int:
    """How many body parameters a template's text uses: the highest {{n}} in it."""
    return max((int(n) for n in _PLACEHOLDER.findall(body)), default=0)


def _refuse_nul(*texts: str) -> None:
    if any(NUL in text for text in texts):
        raise StaffActionRefused(
            _("The text has an invalid character (NUL). Remove it and send again.")
        )


def parse_form_token(raw: str) -> UUID:
    try:
        return UUID(raw)
    except (ValueError, TypeError):
        raise StaffActionRefused(
            _("This form has expired. Reload the page and try again.")
        ) from None


def _locked_session(session_id: int) -> Session:
    """The session under a row lock, for the rest of the caller's transaction."""
    return Session.objects.select_for_update(of=("self",)).get(pk=session_id)


def _token_used(session_id: int, token: UUID, *, kind: str | Sequence[str]) -> bool:
    """Whether a row of `kind` (its ``message_type``, or one of them) was written with this
    form's token."""
    kinds = [kind] if isinstance(kind, str) else list(kind)
    return (
        Message.objects.filter(
            session_id=session_id, staff_user__isnull=False, message_type__in=kinds
        )
        .filter(json_part__form_token=str(token))
        .exists()
    )


def _event(
    *, session_id: int, event: EventCode, user: User, now: datetime, **params: Any
) -> Message:
    return Message.objects.create(
        session_id=session_id,
        direction=Direction.SYSTEM,
        message_type=event.value,
        staff_user=user,
        json_part=params or None,
        created_at=now,
    )


def _admin_log(*, user: User, session: Session, text: str) -> None:
    LogEntry.objects.log_actions(
        user_id=user.pk,
        queryset=[session],
        action_flag=CHANGE,
        change_message=text,
        single_object=True,
    )


def _mark_pending_processed(session_id: int, now: datetime) -> None:
    # Staff read them on the page; no turn will answer them.
    Message.objects.pending_inbound().filter(session_id=session_id).update(processed_at=now)


def _require_human(session: Session) -> None:
    if session.state != SessionState.HUMAN:
        raise StaffActionRefused(
            _("Take the conversation over first: it is not with the team now.")
        )


def _require_window(session: Session, now: datetime) -> None:
    """Refuse a free-form message (text or file) once WhatsApp's 24-hour window is closed,
    naming the templates that may be sent instead."""
    if window_is_open(session, now):
        return
    names = ", ".join(sendable_templates(session).order_by("name").values_list("name", flat=True))
    raise StaffActionRefused(
        _(
            "WhatsApp's 24-hour window is closed: the customer last wrote more than 24 "
            "hours ago. Send an approved template instead: %(templates)s."
        )
        % {"templates": names or _("none registered yet")}
    )


def _send_later(message_id: int) -> None:
    # The same task as the bot's answers (retries, order, delivery statuses).
    send_message.delay(message_id)


def _summary_later(session_id: int) -> None:
    generate_handoff_summary.delay(session_id)


# --- The actions -----------------------------------------------------------------------------


def session_take_over(*, session_id: int, user: User, now: datetime) -> ActionOutcome:
    """A bot state → HUMAN, assigned to `user` (see the module docstring)."""
    with transaction.atomic():
        session = _locked_session(session_id)
        if session.state == SessionState.HUMAN and session.assigned_to_id == user.pk:
            return ActionOutcome(False, _("You are already attending this conversation."))
        if session.state not in BOT_STATES:
            raise StaffActionRefused(
                _("Only a conversation with the bot can be taken over; this one is %(state)s.")
                % {"state": session.get_state_display()}
            )
        written = session_handoff(
            HandoffRequest(
                session_id=session_id,
                reason=HandoffReason.STAFF_TAKEOVER,
                now=now,
                fixed_text=False,
                by_user=user,
                fields={"assigned_to": user},
            )
        )
        assert written is not None, "the state was checked under the row lock"
        _mark_pending_processed(session_id, now)
        _admin_log(user=user, session=session, text=_("Took the conversation over."))
    logger.info("staff_take_over", extra={"session_id": session_id, "user_id": user.pk})
    return ActionOutcome(True, _("You took the conversation over."), written.event_id)


def session_assign(
    *, session_id: int, user: User, assignee_id: int, now: datetime
) -> ActionOutcome:
    """Assign an open session to a colleague who may attend conversations (or to oneself)."""
    assignee = attending_users().filter(pk=assignee_id).first()
    if assignee is None:
        raise StaffActionRefused(_("Choose a member of the team who attends conversations."))
    with transaction.atomic():
        session = _locked_session(session_id)
        if session.state == SessionState.CLOSED:
            raise StaffActionRefused(_("This conversation is closed."))
        if session.assigned_to_id == assignee.pk:
            return ActionOutcome(
                False,
                _("The conversation is already assigned to %(user)s.")
                % {"user": staff_name(assignee)},
            )
        Session.objects.filter(pk=session_id).update(assigned_to=assignee)
        event = _event(
            session_id=session_id,
            event=EventCode.STAFF_ASSIGNED,
            user=user,
            now=now,
            assignee_id=assignee.pk,
            assignee=assignee.get_username(),
        )
        text = _("Assigned the conversation to %(user)s.") % {"user": staff_name(assignee)}
        _admin_log(user=user, session=session, text=text)
    logger.info(
        "staff_assign",
        extra={"session_id": session_id, "user_id": user.pk, "assignee_id": assignee.pk},
    )
    return ActionOutcome(True, text, event.pk)


def _confirm_assignee(session: Session, user: User, *, confirmed: bool) -> None:
    """Refuse a message to the customer of a conversation assigned to a colleague unless the
    sender confirmed it: two people answering one customer at once confuse them."""
    if confirmed or session.assigned_to_id is None or session.assigned_to_id == user.pk:
        return
    assignee = session.assigned_to
    assert assignee is not None  # its id is set
    raise AssignedToAnother(
        _("It is assigned to %(name)s — reply anyway?") % {"name": staff_name(assignee)}
    )


def reply_failed(message: Message) -> bool:
    """Whether a staff reply did not reach the customer: WhatsApp said it failed, or the send
    stopped with an error (a discarded draft is no failure)."""
    if message.error == SUPERSEDED:
        return False
    return message.delivery_status == DeliveryStatus.FAILED or bool(message.error)


def session_reply(
    *,
    session_id: int,
    user: User,
    text: str,
    form_token: UUID,
    now: datetime,
    confirm_other_assignee: bool = False,
    retry_of: int | None = None,
    send: Callable[[int], None] = _send_later,
) -> ActionOutcome:
    """Send `text` to the customer as `user`, inside the 24-hour window, while HUMAN; to a
    conversation assigned to a colleague only with `confirm_other_assignee`."""
    _refuse_nul(text)
    text = text.strip()
    if not text:
        raise StaffActionRefused(_("Write the reply before sending it."))
    if len(text) > MAX_REPLY_CHARS:
        raise StaffActionRefused(
            _("The reply has %(count)d characters; WhatsApp accepts at most %(limit)d.")
            % {"count": len(text), "limit": MAX_REPLY_CHARS}
        )
    with transaction.atomic():
        session = _locked_session(session_id)
        if _token_used(session_id, form_token, kind=REPLY_MESSAGE_TYPE):
            return ActionOutcome(False, _("This reply was sent already."))
        _require_human(session)
        _confirm_assignee(session, user, confirmed=confirm_other_assignee)
        _require_window(session, now)
        json_part: dict[str, Any] = {"form_token": str(form_token)}
        if retry_of is not None:
            json_part["retry_of"] = retry_of
        message = _outbound(
            session_id=session_id, user=user, content=text, json_part=json_part, now=now
        )
        on_commit_call(send, message.pk)
        _admin_log(user=user, session=session, text=_("Replied to the customer."))
        dry_run = dry_run_reason(session)
    _sent_logged("staff_reply", session_id=session_id, user=user, message=message, dry_run=dry_run)
    sent = {
        None: _("Reply sent to WhatsApp."),
        DryRunReason.NO_ACCESS_TOKEN: _(
            "Reply simulated (no WhatsApp token): nothing was sent to the customer."
        ),
        DryRunReason.SIMULATED_SESSION: _(
            "Reply simulated (simulator conversation): nothing was sent to WhatsApp."
        ),
    }
    return ActionOutcome(True, sent[dry_run], message.pk)


def session_reply_retry(
    *,
    session_id: int,
    user: User,
    message_id: int,
    form_token: UUID,
    now: datetime,
    confirm_other_assignee: bool = False,
    send: Callable[[int], None] = _send_later,
) -> ActionOutcome:
    """Send the text of a team reply that failed again, as a new message (`retry_of` names the
    failed one) under the reply's rules; each failed reply is sent again once."""
    failed = Message.objects.filter(
        pk=message_id,
        session_id=session_id,
        direction=Direction.OUTBOUND,
        staff_user__isnull=False,
        message_type=REPLY_MESSAGE_TYPE,
    ).first()
    if failed is None or not reply_failed(failed):
        if not Session.objects.filter(pk=session_id).exists():
            raise Session.DoesNotExist
        raise StaffActionRefused(_("Only a reply of the team that failed can be sent again."))
    again = Message.objects.filter(session_id=session_id, json_part__retry_of=failed.pk)
    if again.exclude(json_part__form_token=str(form_token)).exists():
        raise StaffActionRefused(_("This reply was sent again already."))
    return session_reply(
        session_id=session_id,
        user=user,
        text=failed.content,
        form_token=form_token,
        now=now,
        confirm_other_assignee=confirm_other_assignee,
        retry_of=failed.pk,
        send=send,
    )


def _sent_logged(
    event: str, *, session_id: int, user: User, message: Message, dry_run: DryRunReason | None
) -> None:
    logger.info(
        event,
        extra={
            "session_id": session_id,
            "user_id": user.pk,
            "message_id": message.pk,
            "dry_run": dry_run.value if dry_run else "",
        },
    )


@dataclass(frozen=True, slots=True)
class CheckedFile:
    """A file staff chose, checked: what it is, the name the customer sees, its size and
    SHA-256 (base64, as Meta announces a customer's)."""

    sendable: SendableType
    filename: str
    size: int
    sha256: str


def upload_max_bytes(kind: str) -> int:
    """The largest file of a kind staff may send: Meta's limit or the settings' lower one."""
    return min(max_bytes_of(kind), media_max_bytes(kind))


def file_check(upload: UploadedFile[bytes] | None) -> CheckedFile:
    """What `upload` is by its content (never the browser's Content-Type), or the pt-BR
    refusal that says what is wrong with it."""
    if upload is None:
        raise StaffActionRefused(_("Choose the file to send."))
    size = upload.size or 0
    if size == 0:
        raise StaffActionRefused(_("The file is empty."))
    largest = max(upload_max_bytes(kind) for kind in FILE_MESSAGE_TYPES)
    if size > largest:
        raise StaffActionRefused(_too_large(size, largest))
    upload.open("rb")
    sendable = sendable_type(upload, upload.name or "")
    if sendable is None:
        raise StaffActionRefused(
            _(
                "This file cannot be sent: its content is not a JPEG or PNG image nor a PDF, "
                "Word, Excel or PowerPoint document (whatever its name says)."
            )
        )
    limit = upload_max_bytes(sendable.kind)
    if size > limit:
        raise StaffActionRefused(_too_large(size, limit, image=sendable.kind == "image"))
    digest = hashlib.sha256()
    for chunk in upload.chunks():
        digest.update(chunk)
    upload.seek(0)
    return CheckedFile(
        sendable=sendable,
        filename=sendable_filename(upload.name or "", sendable),
        size=size,
        sha256=base64.b64encode(digest.digest()).decode(),
    )


def _too_large(size: int, limit: int, *, image: bool = False) -> str:
    values = {"size": filesizeformat(size), "limit": filesizeformat(limit)}
    if image:
        return _("The image has %(size)s; WhatsApp accepts images of at most %(limit)s.") % values
    return _("The file has %(size)s; WhatsApp accepts files of at most %(limit)s.") % values


def _file_stored(upload: UploadedFile[bytes], checked: CheckedFile) -> str:
    """The file saved in the default storage under a name of ours (never the customer's nor
    staff's file name); the name the storage chose."""
    field = MessageMedia._meta.get_field("file")
    name = field.generate_filename(MessageMedia(), f"{uuid4().hex}{checked.sendable.extensions[0]}")
    upload.seek(0)
    stored: str = default_storage.save(name, upload)
    return stored


def session_send_file(
    *,
    session_id: int,
    user: User,
    upload: UploadedFile[bytes] | None,
    caption: str,
    form_token: UUID,
    now: datetime,
    confirm_other_assignee: bool = False,
    send: Callable[[int], None] = _send_later,
) -> ActionOutcome:
    """Send a file (an image or a document, `file_check`) with an optional caption, under the
    reply's rules (HUMAN, the 24-hour window, a colleague's conversation only confirmed). The
    request stores it; the send task uploads it to the Graph API after the commit."""
    _refuse_nul(caption)
    caption = caption.strip()
    if len(caption) > MAX_CAPTION_CHARS:
        raise StaffActionRefused(
            _("The caption has %(count)d characters; WhatsApp accepts at most %(limit)d.")
            % {"count": len(caption), "limit": MAX_CAPTION_CHARS}
        )
    checked = file_check(upload)
    assert upload is not None  # file_check refuses a missing file
    # Written before the session's lock is taken (a storage may be a network away) and deleted
    # again unless the message that names it is committed.
    stored = _file_stored(upload, checked)
    kept = False
    try:
        with transaction.atomic():
            session = _locked_session(session_id)
            if _token_used(session_id, form_token, kind=FILE_MESSAGE_TYPES):
                return ActionOutcome(False, _("This file was sent already."))
            _require_human(session)
            _confirm_assignee(session, user, confirmed=confirm_other_assignee)
            _require_window(session, now)
            message = _outbound(
                session_id=session_id,
                user=user,
                content=caption,
                json_part={"form_token": str(form_token)},
                message_type=checked.sendable.kind,
                now=now,
            )
            MessageMedia.objects.create(
                message=message,
                kind=checked.sendable.kind,
                mime_type=checked.sendable.mime_type,
                sha256=checked.sha256,
                caption=caption,
                filename=checked.filename,
                file_size=checked.size,
                file=stored,
                status=MediaStatus.DOWNLOADED,
                downloaded_at=now,
                created_at=now,
            )
            on_commit_call(send, message.pk)
            _admin_log(user=user, session=session, text=_("Sent a file to the customer."))
            dry_run = dry_run_reason(session)
        kept = True
    finally:
        if not kept:
            default_storage.delete(stored)
    _sent_logged("staff_file", session_id=session_id, user=user, message=message, dry_run=dry_run)
    sent = {
        None: _("File sent to WhatsApp."),
        DryRunReason.NO_ACCESS_TOKEN: _(
            "File simulated (no WhatsApp token): nothing was sent to the customer."
        ),
        DryRunReason.SIMULATED_SESSION: _(
            "File simulated (simulator conversation): nothing was sent to WhatsApp."
        ),
    }
    return ActionOutcome(True, sent[dry_run], message.pk)


def session_send_template(
    *,
    session_id: int,
    user: User,
    template_id: int,
    values: Sequence[str],
    form_token: UUID,
    now: datetime,
    send: Callable[[int], None] = _send_later,
) -> ActionOutcome:
    """Send an approved template with its parameters filled in; allowed outside the window.
    The template must be one the session's number may send (`sendable_templates`)."""
    own_account = Session.objects.filter(pk=session_id).values("instance__waba_id")
    template = (
        MessageTemplate.objects.filter(pk=template_id, is_active=True)
        .filter(Q(waba_id="") | Q(waba_id__in=own_account))
        .first()
    )
    if template is None:
        raise StaffActionRefused(_("Choose one of the active templates."))
    _refuse_nul(*values)
    values = [value.strip() for value in values]
    labels = [str(label) for label in template.parameters or []]
    if len(values) != len(labels) or not all(values):
        raise StaffActionRefused(
            _("Fill in every parameter of the template: %(labels)s.")
            % {"labels": ", ".join(labels)}
        )
    for label, value in zip(labels, values, strict=True):
        if len(value) > MAX_TEMPLATE_PARAMETER_CHARS or _FORBIDDEN_IN_PARAMETER.search(value):
            raise StaffActionRefused(
                _("The parameter %(label)s must be one line of at most %(limit)d characters.")
                % {"label": label, "limit": MAX_TEMPLATE_PARAMETER_CHARS}
            )
    payload = TemplatePayload(template.name, template.language, tuple(values))
    with transaction.atomic():
        session = _locked_session(session_id)
        if _token_used(session_id, form_token, kind=TEMPLATE_MESSAGE_TYPE):
            return ActionOutcome(False, _("This template was sent already."))
        _require_human(session)
        message = _outbound(
            session_id=session_id,
            user=user,
            content=render_template_body(template.body, values) or template.name,
            json_part={"template": payload.as_json(), "form_token": str(form_token)},
            message_type=TEMPLATE_MESSAGE_TYPE,
            now=now,
        )
        on_commit_call(send, message.pk)
        _admin_log(
            user=user,
            session=session,
            text=_("Sent the template %(name)s.") % {"name": template.name},
        )
        dry_run = dry_run_reason(session)
    _sent_logged(
        "staff_template", session_id=session_id, user=user, message=message, dry_run=dry_run
    )
    sent = {
        None: _("Template sent to WhatsApp."),
        DryRunReason.NO_ACCESS_TOKEN: _(
            "Template simulated (no WhatsApp token): nothing was sent to the customer."
        ),
        DryRunReason.SIMULATED_SESSION: _(
            "Template simulated (simulator conversation): nothing was sent to WhatsApp."
        ),
    }
    return ActionOutcome(True, sent[dry_run], message.pk)


def _outbound(
    *,
    session_id: int,
    user: User,
    content: str,
    json_part: Mapping[str, Any],
    now: datetime,
    message_type: str = REPLY_MESSAGE_TYPE,
) -> Message:
    message = Message.objects.create(
        session_id=session_id,
        direction=Direction.OUTBOUND,
        message_type=message_type,
        content=content,
        json_part=dict(json_part),
        staff_user=user,
        delivery_status=DeliveryStatus.PENDING,
        created_at=now,
    )
    Session.objects.filter(pk=session_id).update(last_staff_reply_at=now, last_message_at=now)
    return message


def session_give_back(*, session_id: int, user: User, state: str, now: datetime) -> ActionOutcome:
    """HUMAN → a bot state: `state`, or by default the state before the handoff (else TRIAGE)."""
    if state and state not in {s.value for s in BOT_STATES}:
        raise StaffActionRefused(_("Choose one of the bot's states."))
    with transaction.atomic():
        session = _locked_session(session_id)
        if session.state != SessionState.HUMAN:
            raise StaffActionRefused(_("This conversation is not with the team now."))
        target = state or (
            session.state_before_handoff
            if session.state_before_handoff in {s.value for s in BOT_STATES}
            else SessionState.TRIAGE.value
        )
        Session.objects.filter(pk=session_id).update(
            state=target,
            assigned_to=None,
            state_before_handoff="",
            handoff_reason="",
            handoff_detail="",
            handed_off_at=None,
        )
        event = _event(
            session_id=session_id,
            event=EventCode.STAFF_GIVEN_BACK,
            user=user,
            now=now,
            state=target,
        )
        label = dict(Session._meta.get_field("state").flatchoices)[target]
        text = _("Gave the conversation back to the bot (%(state)s).") % {"state": label}
        _admin_log(user=user, session=session, text=text)
    logger.info(
        "staff_give_back", extra={"session_id": session_id, "user_id": user.pk, "state": target}
    )
    return ActionOutcome(True, text, event.pk)


def session_close(
    *, session_id: int, user: User, now: datetime, send: Callable[[int], None] = _send_later
) -> ActionOutcome:
    """Any open state → CLOSED; the customer's next message opens a new session. With the
    satisfaction question on (RuntimeConfig), the customer is asked it once
    (`conversations.satisfaction.survey_ask`: inside the 24-hour window, never when simulated)."""
    with transaction.atomic():
        session = _locked_session(session_id)
        if session.state == SessionState.CLOSED:
            return ActionOutcome(False, _("This conversation is closed already."))
        Session.objects.filter(pk=session_id).update(state=SessionState.CLOSED.value, closed_at=now)
        _mark_pending_processed(session_id, now)
        event = _event(
            session_id=session_id,
            event=EventCode.STAFF_CLOSED,
            user=user,
            now=now,
            from_state=session.state,
        )
        _admin_log(user=user, session=session, text=_("Closed the conversation."))
        config = RuntimeConfig.load()
        survey = SurveyOutcome.NOT_DUE
        if config.satisfaction_after_close:
            survey = survey_ask(
                session_id=session_id,
                trigger=SurveyTrigger.STAFF_CLOSE,
                survey=SurveySettings.of(config),
                now=now,
                send=send,
                closed_by=user,
            )
        # A simulated session is never asked; without a token the question goes nowhere.
        no_token = survey is SurveyOutcome.ASKED and dry_run_reason(session) is not None
    logger.info(
        "staff_close",
        extra={"session_id": session_id, "user_id": user.pk, "survey": survey.value},
    )
    if no_token:
        return ActionOutcome(
            True,
            _(
                "Conversation closed. The satisfaction question was simulated (no WhatsApp "
                "token): nothing was sent to the customer."
            ),
            event.pk,
        )
    closed = {
        SurveyOutcome.NOT_DUE: _("Conversation closed."),
        SurveyOutcome.ASKED: _(
            "Conversation closed. The satisfaction question was sent to the customer."
        ),
        SurveyOutcome.WINDOW_CLOSED: _(
            "Conversation closed. The satisfaction question was not sent: WhatsApp's 24-hour "
            "window is closed."
        ),
    }
    return ActionOutcome(True, closed[survey], event.pk)


def session_summary_regenerate(
    *,
    session_id: int,
    user: User,
    form_token: UUID,
    now: datetime,
    enqueue: Callable[[int], None] = _summary_later,
) -> ActionOutcome:
    """Enqueue the handoff summary again (the newest summary is the one shown)."""
    with transaction.atomic():
        session = _locked_session(session_id)
        if _token_used(session_id, form_token, kind=EventCode.STAFF_SUMMARY_REQUESTED.value):
            return ActionOutcome(False, _("A new summary was requested already."))
        _require_human(session)
        if _summary_in_flight(session_id, now):
            return ActionOutcome(
                False, _("A summary is being written already; reload the page in a moment.")
            )
        event = _event(
            session_id=session_id,
            event=EventCode.STAFF_SUMMARY_REQUESTED,
            user=user,
            now=now,
            form_token=str(form_token),
        )
        on_commit_call(enqueue, session_id)
        _admin_log(user=user, session=session, text=_("Requested a new summary."))
    logger.info("staff_summary_requested", extra={"session_id": session_id, "user_id": user.pk})
    return ActionOutcome(True, _("A new summary was requested; reload in a moment."), event.pk)


def _summary_in_flight(session_id: int, now: datetime) -> bool:
    """Whether the last summary request has no summary yet and may still get one (its task
    ends within the task time limit, or is gone)."""
    requested = (
        Message.objects.filter(
            session_id=session_id, message_type=EventCode.STAFF_SUMMARY_REQUESTED.value
        )
        .order_by("-created_at", "-id")
        .values_list("created_at", flat=True)
        .first()
    )
    if requested is None or requested <= now - timedelta(seconds=settings.CELERY_TASK_TIME_LIMIT):
        return False
    return not HandoffSummary.objects.filter(
        session_id=session_id, created_at__gte=requested
    ).exists()


def session_prompts_update(*, session_id: int, user: User, now: datetime) -> ActionOutcome:
    """Pin an open session to the prompt versions, release and package versions active now;
    its next turn uses them."""
    with transaction.atomic():
        session = _locked_session(session_id)
        if session.state == SessionState.CLOSED:
            raise StaffActionRefused(_("This conversation is closed."))
        # Read under the session's lock: the versions written are the ones active at the click.
        prompts = DatabasePromptSource()
        current = prompt_versions_of(prompts.active_overrides())
        release = prompts.live_release()
        packages = package_versions_of(DatabaseKBSource().packages())
        before = {str(agent): str(v) for agent, v in (session.prompt_versions or {}).items()}
        packages_before = dict(session.package_versions or {})
        if (before, session.release_id, packages_before) == (current, release, packages):
            return ActionOutcome(False, _("The conversation already uses the current prompts."))
        Session.objects.filter(pk=session_id).update(
            prompt_versions=current, release_id=release, package_versions=packages
        )
        # The override ids, so the event reads "override #12 (versão 345)" with no query.
        overrides = override_ids_of([*before.values(), *current.values()])
        event = _event(
            session_id=session_id,
            event=EventCode.STAFF_PROMPTS_UPDATED,
            user=user,
            now=now,
            **{
                "from": before,
                "to": current,
                "overrides": {str(h): o for h, o in sorted(overrides.items())},
                "release": {"from": session.release_id, "to": release},
                "packages": {"from": packages_before, "to": packages},
            },
        )
        _admin_log(
            user=user, session=session, text=_("Moved the conversation to the current prompts.")
        )
    logger.info(
        "staff_prompts_update",
        extra={
            "session_id": session_id,
            "user_id": user.pk,
            "from_versions": ",".join(f"{a}={v}" for a, v in sorted(before.items())),
            "to_versions": ",".join(f"{a}={v}" for a, v in sorted(current.items())),
            "from_release": session.release_id,
            "to_release": release,
        },
    )
    return ActionOutcome(True, _("The conversation now uses the current prompts."), event.pk)
