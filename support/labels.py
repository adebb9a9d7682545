"""Labels on a conversation: add one, remove one (the use cases of ``POST …/<id>/labels/``),
the labels a page shows, and the filter of the conversation list and the queue.

Like the staff actions (`support.staff_actions`), each change runs in one transaction that
first locks the session row, so two colleagues labelling the same conversation never interleave;
repeating a change (a double click, two colleagues at once) writes nothing and says so. Each
change writes a SYSTEM event naming who did it (`EventCode.STAFF_LABEL_ADDED` /
`STAFF_LABEL_REMOVED`, the label's name kept in it, so a renamed or deleted label leaves the
history as it was) and an admin log entry. Labels can change in any state, a closed conversation
included: that is when a team often files it ("venda perdida").
"""

import logging
from dataclasses import dataclass
from datetime import datetime

from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Exists, OuterRef, QuerySet
from django.utils.translation import gettext as _

from conversations.event_codes import EventCode
from conversations.models import Direction, Message, Session
from support.models import Label, SessionLabel
from support.staff_actions import ActionOutcome, StaffActionRefused

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SessionLabels:
    """Every label, split into those on the session and those that can be added."""

    current: list[Label]
    available: list[Label]


def session_labels(session_id: int) -> SessionLabels:
    """The labels of a session and the others, by name: one query."""
    labels = Label.objects.annotate(
        on_session=Exists(SessionLabel.objects.filter(session_id=session_id, label=OuterRef("pk")))
    ).order_by("name", "id")
    current: list[Label] = []
    available: list[Label] = []
    for label in labels:
        (current if label.on_session else available).append(label)
    return SessionLabels(current=current, available=available)


def with_label(queryset: QuerySet[Session], label_id: int) -> QuerySet[Session]:
    """The sessions of `queryset` that carry the label: one `EXISTS` (no join, no DISTINCT)."""
    return queryset.filter(
        Exists(SessionLabel.objects.filter(session=OuterRef("pk"), label_id=label_id))
    )


def _label(label_id: int) -> Label:
    label = Label.objects.filter(pk=label_id).first()
    if label is None:
        raise StaffActionRefused(
            _("The label #%(id)s does not exist; reload the page to see the current labels.")
            % {"id": label_id}
        )
    return label


def _recorded(
    *, session: Session, user: User, label: Label, event: EventCode, now: datetime, text: str
) -> Message:
    message = Message.objects.create(
        session_id=session.pk,
        direction=Direction.SYSTEM,
        message_type=event.value,
        staff_user=user,
        json_part={"label_id": label.pk, "label": label.name},
        created_at=now,
    )
    LogEntry.objects.log_actions(
        user_id=user.pk,
        queryset=[session],
        action_flag=CHANGE,
        change_message=text,
        single_object=True,
    )
    return message


def session_label_add(
    *, session_id: int, user: User, label_id: int, now: datetime
) -> ActionOutcome:
    """Put the label on the session (nothing when it is there already)."""
    label = _label(label_id)
    with transaction.atomic():
        session = Session.objects.select_for_update(of=("self",)).get(pk=session_id)
        if SessionLabel.objects.filter(session_id=session_id, label=label).exists():
            return ActionOutcome(
                False,
                _("The conversation has the label %(label)s already.") % {"label": label.name},
            )
        SessionLabel.objects.create(session=session, label=label, added_by=user, added_at=now)
        text = _("Added the label %(label)s.") % {"label": label.name}
        event = _recorded(
            session=session,
            user=user,
            label=label,
            event=EventCode.STAFF_LABEL_ADDED,
            now=now,
            text=text,
        )
    logger.info(
        "staff_label_added",
        extra={"session_id": session_id, "user_id": user.pk, "label_id": label.pk},
    )
    return ActionOutcome(True, text, event.pk)


def session_label_remove(
    *, session_id: int, user: User, label_id: int, now: datetime
) -> ActionOutcome:
    """Take the label off the session (nothing when it is not there)."""
    label = _label(label_id)
    with transaction.atomic():
        session = Session.objects.select_for_update(of=("self",)).get(pk=session_id)
        deleted, _rows = SessionLabel.objects.filter(session_id=session_id, label=label).delete()
        if not deleted:
            return ActionOutcome(
                False,
                _("The conversation does not have the label %(label)s.") % {"label": label.name},
            )
        text = _("Removed the label %(label)s.") % {"label": label.name}
        event = _recorded(
            session=session,
            user=user,
            label=label,
            event=EventCode.STAFF_LABEL_REMOVED,
            now=now,
            text=text,
        )
    logger.info(
        "staff_label_removed",
        extra={"session_id": session_id, "user_id": user.pk, "label_id": label.pk},
    )
    return ActionOutcome(True, text, event.pk)
