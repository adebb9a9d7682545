"""Internal notes on a conversation (docs/architecture.md, Support workflow: internal notes):
staff write them on the conversation page, colleagues read them in the transcript and in its
live updates, and nobody else ever does.

- `session_note_add` is the use case of ``POST …/session/<id>/note/`` (`support.admin.notes`),
  called once the view has checked ``conversations.attend_session``. A note is allowed in any
  state, a closed conversation included (staff document what happened after the fact), but not
  on a conversation whose personal data was erased: its text would bring back what the erasure
  removed. The session row is locked first, so a note never lands between an erasure's masking
  and its commit.
- ``@username`` of an active colleague who may attend conversations mentions them
  (`NoteMention`): after the commit each is e-mailed once (`support.alerts`, the
  ``conversations.notify_note_mentions`` task), and the mention stays pending — counted by
  `note_mentions_pending`, for the queue's notification — until they open the conversation or
  its live poll brings them the note (`note_mentions_seen`). Writing one's own name mentions
  no one.
- Notes live in their own table (`support.models.InternalNote`): the send task, the model's
  history and the summary read the message log only, so a note can never reach WhatsApp or
  the model. The customer's export lists them apart from the messages and erasure masks them
  as it masks messages (`support.personal_data`).

Log lines carry ids and counts, never a note's text (it may quote the customer).
"""

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from django.contrib.auth.models import User
from django.db import transaction
from django.utils.translation import gettext as _

from conversations.commit_hooks import on_commit_call
from conversations.models import Session
from staff_auth.names import staff_name
from support.models import InternalNote, NoteMention
from support.staff_actions import NUL, StaffActionRefused, attending_users
from support.tasks import enqueue_note_mentions

logger = logging.getLogger(__name__)

# The same bound as a reply: a note is read in a bubble, and WhatsApp's limit is the one staff
# already know.
MAX_NOTE_CHARS = 4096
# Django's username characters but "@" (a mention ends where another one starts); a username
# at the end of a sentence ("fale com @bruno.") is tried without the punctuation too.
_MENTION = re.compile(r"(?<![\w@.+-])@([\w.+-]+)")
_TRAILING = ".,;:!?-+"


@dataclass(frozen=True, slots=True)
class NoteAdded:
    note: InternalNote
    session: Session  # the locked row, for the answer's masking
    mentioned: list[str]  # the usernames notified, in the order written
    message: str  # for staff (pt-BR)


def mention_candidates(text: str) -> list[str]:
    """The usernames `text` may mention, in the order written, each once."""
    found: list[str] = []
    for match in _MENTION.finditer(text):
        name = match.group(1)
        found += [name, name.rstrip(_TRAILING)]
    return [name for name in dict.fromkeys(found) if name]


def mentioned_users(text: str, *, author: User) -> list[User]:
    """Active colleagues who may attend conversations named in `text`, in the order written,
    the author left out; one query, none when the text names nobody."""
    candidates = mention_candidates(text)
    if not candidates:
        return []
    users = {
        u.get_username(): u
        for u in attending_users().filter(username__in=candidates).exclude(pk=author.pk)
    }
    return [users[name] for name in candidates if name in users]


def _notify_later(note_id: int) -> None:
    enqueue_note_mentions(note_id)


def session_note_add(
    *,
    session_id: int,
    user: User,
    text: str,
    now: datetime,
    notify: Callable[[int], None] = _notify_later,
) -> NoteAdded:
    """Write `text` as `user`'s note on the session; `Session.DoesNotExist` for an unknown one,
    `StaffActionRefused` (pt-BR) for an empty, too long or NUL-bearing text or an erased
    conversation."""
    if NUL in text:
        raise StaffActionRefused(
            _("The text has an invalid character (NUL). Remove it and send again.")
        )
    text = text.strip()
    if not text:
        raise StaffActionRefused(_("Write the note before saving it."))
    if len(text) > MAX_NOTE_CHARS:
        raise StaffActionRefused(
            _("The note has %(count)d characters; a note holds at most %(limit)d.")
            % {"count": len(text), "limit": MAX_NOTE_CHARS}
        )
    mentioned = mentioned_users(text, author=user)
    with transaction.atomic():
        session = Session.objects.select_for_update(of=("self",)).get(pk=session_id)
        if session.anonymised_at is not None:
            raise StaffActionRefused(
                _("This conversation's personal data was erased: it takes no new notes.")
            )
        note = InternalNote.objects.create(
            session_id=session_id, author=user, text=text, created_at=now
        )
        if mentioned:
            NoteMention.objects.bulk_create([NoteMention(note=note, user=u) for u in mentioned])
            on_commit_call(notify, note.pk)
    logger.info(
        "internal_note_added",
        extra={
            "session_id": session_id,
            "user_id": user.pk,
            "note_id": note.pk,
            "mentions": len(mentioned),
        },
    )
    if mentioned:
        message = _("Note saved; only the team sees it. Notified: %(users)s.") % {
            "users": ", ".join(staff_name(u) for u in mentioned)
        }
    else:
        message = _("Note saved; only the team sees it.")
    usernames = [u.get_username() for u in mentioned]
    return NoteAdded(note=note, session=session, mentioned=usernames, message=message)


def note_mentions_seen(*, session_id: int, user_id: int, now: datetime) -> int:
    """`user_id`'s pending mentions in the session's notes are seen now: one UPDATE."""
    return NoteMention.objects.filter(
        user_id=user_id, seen_at__isnull=True, note__session_id=session_id
    ).update(seen_at=now)


# The newest pending mentions the queue's answer lists: a colleague rarely has more unread.
MAX_PENDING_MENTIONS = 20


@dataclass(frozen=True, slots=True)
class PendingMention:
    id: int
    session_id: int
    author: str


def note_mentions_pending(user_id: int) -> list[PendingMention]:
    """The notes mentioning `user_id` that they have not opened yet, newest first (at most
    `MAX_PENDING_MENTIONS`), in one query on the pending mentions' partial index: the queue's
    notification reads them."""
    rows = (
        NoteMention.objects.filter(user_id=user_id, seen_at__isnull=True)
        .order_by("-id")
        .values_list("id", "note__session_id", "note__author__username")[:MAX_PENDING_MENTIONS]
    )
    return [
        PendingMention(id=mention_id, session_id=session_id, author=author or "")
        for mention_id, session_id, author in rows
    ]
