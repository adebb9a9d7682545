"""The conversation page's live updates: what changed since the page's last message, and who
else has the page open (docs/architecture.md, Support workflow: live updates).

`session_live` is what `GET …/session/<id>/live/?after=<message id>` answers
(`support.admin.live`), in a fixed number of queries whatever the session's length: the
session, the messages after `after` (at most `MAX_LIVE_MESSAGES`, oldest first), the delivery
status of the latest outbound messages already shown, and the viewers; the reader's heartbeat
row is written at most every `HEARTBEAT_WRITE_SECONDS` (one more query then). With
``after_note`` (the newest internal note shown), the notes after it too (one query, at most
`MAX_LIVE_NOTES`), and when there are any, the reader's mentions in this conversation are seen
(one UPDATE). New messages come with their media; a reply quoting a message older than them
costs one query for all of them. With ``media`` (the messages whose media block is still
changing on the page: a download or a transcription under way), those blocks as they are now
(one query). Given a masker, every text is masked as on the page.
"""

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from agents.masking import Masker
from conversations.labels import state_label
from conversations.models import Direction, MessageMedia, Session, SessionViewer
from staff_auth.names import staff_name
from support.admin.media_block import media_block, media_html
from support.admin.notes import note_json
from support.admin.transcript import (
    TranscriptEntry,
    can_save_cases,
    message_delivery,
    note_entry,
    quotes_find,
    save_case_url,
    transcript_entry,
)
from support.models import InternalNote
from support.notes import note_mentions_seen
from whatsapp import CUSTOMER_SERVICE_WINDOW

# A page that asked for more than this (a long-hidden tab) gets the oldest ones and `more`.
MAX_LIVE_MESSAGES = 100
# The same for notes (`notes_more`).
MAX_LIVE_NOTES = 50
# Outbound bubbles whose delivery status the answer carries: the ones staff are looking at.
STATUS_MESSAGES = 30
# Media blocks a poll may ask for again (those still downloading or being transcribed).
MAX_LIVE_MEDIA = 30
# A viewer whose last poll is older than this has left. Hidden pages poll every 10 s.
VIEWER_TTL = timedelta(seconds=30)
# A viewer's row is moved forward at most this often: a write every poll (2 s) would be
# five times the writes for the same answer.
HEARTBEAT_WRITE_SECONDS = 10


@dataclass(frozen=True, slots=True)
class LiveMessage:
    id: int
    direction: str
    side: str  # "customer", "bot", "staff" or "system", as the page's bubbles
    kind: str  # the WhatsApp message type ("text", "image", …); "event" for a system line
    text: str
    html: str  # `text` escaped, WhatsApp's *bold* in bold
    author: str
    meta: str
    delivery: str
    delivery_failed: bool
    superseded: bool
    created_at: str  # ISO 8601
    technical: str = ""  # where an outbound text came from ("código 1"), for the details
    retryable: bool = False  # a failed team text reply: the page offers "Tentar de novo"
    media_html: str = ""  # the media block (media.html), rendered as the page renders it
    quote: str = ""
    reaction: str = ""
    options: tuple[str, ...] = ()
    reply_kind: str = ""
    # A bot's bubble's "Guardar como caso de teste" page, for staff who may save cases.
    save_case_url: str = ""


@dataclass(frozen=True, slots=True)
class LiveStatus:
    """An outbound bubble's delivery, for bubbles already on the page."""

    id: int
    delivery: str
    delivery_failed: bool
    reaction: str = ""  # the customer's emoji on it ("" when none or removed)


@dataclass(frozen=True, slots=True)
class LiveMedia:
    """A media block shown on the page, as it is now (`state` tells the page whether it
    changed)."""

    id: int  # the message's
    state: str
    html: str


@dataclass(frozen=True, slots=True)
class LiveWindow:
    is_open: bool
    closes_at: str  # ISO 8601; "" when the customer never wrote


@dataclass(frozen=True, slots=True)
class SessionLive:
    messages: list[LiveMessage]
    more: bool  # more messages after the last one returned
    statuses: list[LiveStatus]
    state: str
    state_label: str
    assigned_to: str
    assigned_to_other: bool  # assigned to someone other than the reader
    status_text: str  # "Com um humano · atribuída a Bruno"
    window: LiveWindow
    viewers: list[str]
    presence: str  # "Ana também está nesta conversa"; "" when nobody else is here
    notes: list[dict[str, Any]]  # {id, author, text, html, meta, created_at}, oldest first
    notes_more: bool  # more notes after the last one returned
    media: list[LiveMedia] = field(default_factory=list)  # the blocks asked for (`media`)

    def as_json(self) -> dict[str, Any]:
        return {
            "messages": [_message_json(m) for m in self.messages],
            "more": self.more,
            "statuses": [
                {
                    "id": s.id,
                    "delivery": s.delivery,
                    "delivery_failed": s.delivery_failed,
                    "reaction": s.reaction,
                }
                for s in self.statuses
            ],
            "state": self.state,
            "state_label": self.state_label,
            "assigned_to": self.assigned_to,
            "assigned_to_other": self.assigned_to_other,
            "status_text": self.status_text,
            "window": {"is_open": self.window.is_open, "closes_at": self.window.closes_at},
            "viewers": self.viewers,
            "presence": self.presence,
            "notes": self.notes,
            "notes_more": self.notes_more,
            "media": [{"id": m.id, "state": m.state, "html": m.html} for m in self.media],
        }


def _message_json(message: LiveMessage) -> dict[str, Any]:
    return {
        "id": message.id,
        "direction": message.direction,
        "side": message.side,
        "kind": message.kind,
        "text": message.text,
        "html": message.html,
        "author": message.author,
        "meta": message.meta,
        "delivery": message.delivery,
        "delivery_failed": message.delivery_failed,
        "superseded": message.superseded,
        "created_at": message.created_at,
        "technical": message.technical,
        "retryable": message.retryable,
        "media_html": message.media_html,
        "quote": message.quote,
        "reaction": message.reaction,
        "options": list(message.options),
        "reply_kind": message.reply_kind,
        "save_case_url": message.save_case_url,
    }


def _live_message(entry: TranscriptEntry, *, save_cases: bool) -> LiveMessage:
    message = entry.message
    return LiveMessage(
        id=message.pk,
        direction=message.direction,
        side=entry.side,
        kind="event" if entry.side == "system" else message.message_type,
        text=entry.text,
        html=str(entry.html),
        author=entry.who,
        meta=entry.meta,
        delivery=entry.delivery,
        delivery_failed=entry.delivery_failed,
        superseded=entry.superseded,
        created_at=message.created_at.isoformat(),
        technical=entry.technical,
        retryable=entry.retryable,
        media_html=str(media_html(entry.media)) if entry.media is not None else "",
        quote=entry.quote,
        reaction=entry.reaction,
        options=tuple(entry.options),
        reply_kind=entry.reply_kind,
        save_case_url=save_case_url(entry) if save_cases else "",
    )


def presence_text(names: list[str]) -> str:
    """ "Ana também está nesta conversa", "Ana e Bruno também estão …", "" for nobody."""
    if not names:
        return ""
    if len(names) == 1:
        listed = names[0]
    else:
        listed = _("%(names)s and %(last)s") % {"names": ", ".join(names[:-1]), "last": names[-1]}
    return ngettext(
        "%(names)s is also in this conversation",
        "%(names)s are also in this conversation",
        len(names),
    ) % {"names": listed}


def session_viewers_touch(
    *, session_id: int, user: AbstractBaseUser, now: datetime
) -> list[SessionViewer]:
    """The session's viewers seen within `VIEWER_TTL` other than `user`, oldest arrival
    first; `user`'s heartbeat row is upserted when missing or older than
    `HEARTBEAT_WRITE_SECONDS`."""
    recent = list(
        SessionViewer.objects.filter(session_id=session_id, seen_at__gte=now - VIEWER_TTL)
        .select_related("user")
        .order_by("seen_at", "id")
    )
    own = next((v for v in recent if v.user_id == user.pk), None)
    if own is None or now - own.seen_at >= timedelta(seconds=HEARTBEAT_WRITE_SECONDS):
        # One statement whether the row exists or not (INSERT … ON CONFLICT DO UPDATE).
        SessionViewer.objects.bulk_create(
            [SessionViewer(session_id=session_id, user_id=user.pk, seen_at=now)],
            update_conflicts=True,
            unique_fields=["session", "user"],
            update_fields=["seen_at"],
        )
    return [v for v in recent if v.user_id != user.pk and v.user.is_active]


def session_live(
    *,
    session: Session,
    after: int,
    user: AbstractBaseUser,
    now: datetime,
    masker: Masker | None = None,
    after_note: int | None = None,
    media: list[int] | None = None,
) -> SessionLive:
    """What the page at message `after` (and note `after_note`, when given) has not shown yet,
    and records `user` as viewing.

    `session` is loaded with its `instance` and `assigned_to` (`select_related`): reading them
    costs no query here."""
    rows = list(
        session.messages.filter(pk__gt=after)
        .without_reaction_events()
        .select_related("staff_user", "media")
        .defer("raw_response")
        .order_by("pk")[: MAX_LIVE_MESSAGES + 1]
    )
    more = len(rows) > MAX_LIVE_MESSAGES
    rows = rows[:MAX_LIVE_MESSAGES]
    shown = list(
        session.messages.filter(pk__lte=after, direction=Direction.OUTBOUND)
        .only(
            "id",
            "session_id",
            "direction",
            "error",
            "wa_message_id",
            "delivery_status",
            "delivery_status_at",
            "delivery_error_code",
            "delivery_error_title",
            "reaction",
        )
        .order_by("-pk")[:STATUS_MESSAGES]
    )
    viewers = session_viewers_touch(session_id=session.pk, user=user, now=now)
    note_rows: list[InternalNote] = []
    if after_note is not None:
        note_rows = list(
            InternalNote.objects.filter(session=session, pk__gt=after_note)
            .select_related("author")
            .order_by("pk")[: MAX_LIVE_NOTES + 1]
        )
        if note_rows:
            note_mentions_seen(session_id=session.pk, user_id=user.pk, now=now)
    notes_more = len(note_rows) > MAX_LIVE_NOTES
    note_rows = note_rows[:MAX_LIVE_NOTES]
    names = [staff_name(v.user) for v in viewers]
    blocks = []
    if media:
        blocks = [
            media_block(found, masker=masker)
            for found in MessageMedia.objects.filter(
                message__session=session, message_id__in=media[:MAX_LIVE_MEDIA]
            ).order_by("message_id")
        ]

    quotes = quotes_find(rows, session=session, masker=masker)
    save_cases = can_save_cases(user)
    messages = [
        _live_message(
            transcript_entry(m, session=session, turn_cost=None, masker=masker, quotes=quotes),
            save_cases=save_cases,
        )
        for m in rows
    ]
    statuses = [
        LiveStatus(m.pk, *message_delivery(m, session=session, masker=masker), reaction=m.reaction)
        for m in reversed(shown)
    ]
    closes_at = (
        session.last_inbound_at + CUSTOMER_SERVICE_WINDOW if session.last_inbound_at else None
    )
    assigned = session.assigned_to
    state = state_label(session.state)
    assignee = staff_name(assigned) if assigned is not None else ""
    return SessionLive(
        messages=messages,
        more=more,
        statuses=statuses,
        state=session.state,
        state_label=state,
        assigned_to=assignee,
        assigned_to_other=assigned is not None and assigned.pk != user.pk,
        status_text=(
            _("%(state)s · assigned to %(user)s") % {"state": state, "user": assignee}
            if assignee
            else state
        ),
        window=LiveWindow(
            is_open=closes_at is not None and now < closes_at,
            closes_at=timezone.localtime(closes_at).isoformat() if closes_at else "",
        ),
        viewers=names,
        presence=presence_text(names),
        notes=[note_json(note_entry(n, masker=masker)) for n in note_rows],
        notes_more=notes_more,
        media=[LiveMedia(b.message_id, b.state, str(media_html(b))) for b in blocks],
    )
