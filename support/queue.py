"""The queue of customers waiting for a human (docs/architecture.md, The queue): who waits, since
when, in what order.

A session is in the queue when it is with a human (state HUMAN; bot states and CLOSED are not)
and its customer is waiting for the team:

- no staff reply since the handoff: `last_staff_reply_at` is NULL or older than `handed_off_at`
  — waiting since the handoff (`handed_off_at`);
- or a customer message newer than the last staff reply (`last_inbound_at` after
  `last_staff_reply_at`) — waiting since the *first* customer message after that reply: the
  WhatsApp timestamp of the earliest INBOUND message stamped after it (WhatsApp's clock, the one
  `last_inbound_at` is written with), found by one correlated subquery on the
  `(session, wa_timestamp)` index; `last_inbound_at` when no such message has a timestamp.

A session without `handed_off_at` (written by `conversations.handoff.session_handoff` since the
column exists) waits since it was created. The oldest wait comes first (ties by id).

Everything the page shows is read in one query, whatever the number of rows: the session, its
instance and its assignee joined (`QUEUE_COLUMNS` only), the wait and the latest handoff
summary's next action as annotations. The display values (age, SLA colour, WhatsApp window,
reason label) are computed from the row by `queue_entry`, which queries nothing.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from django.db.models import Case, F, OuterRef, Q, QuerySet, Subquery, When
from django.db.models.functions import Coalesce
from django.utils.text import capfirst
from django.utils.translation import gettext, pgettext

from agents.states import SessionState
from conversations.labels import handoff_label
from conversations.models import REACTION_TYPE, Direction, HandoffSummary, Message, Session
from support.labels import with_label
from whatsapp import CUSTOMER_SERVICE_WINDOW

# From this share of SUPPORT_SLA_MINUTES on a wait is shown "near" (amber); from 100 %, "late".
SLA_NEAR_FRACTION = 0.75
# The columns a row reads: what the page shows and what masking needs (the customer's known
# values); the large JSON columns of the collected technical data are left in the database.
QUEUE_COLUMNS = (
    "id",
    "state",
    "customer_name",
    "customer_phone",
    "customer_user_id",
    "customer_document",
    "registration_data",
    "registration_extras",
    "handoff_reason",
    "handoff_detail",
    "handed_off_at",
    "last_inbound_at",
    "last_staff_reply_at",
    "created_at",
    "instance__id",
    "instance__display_phone",
    "assigned_to__id",
    "assigned_to__username",
    "assigned_to__first_name",
    "assigned_to__last_name",
)
# Plain dict: the field's choices (lazy labels, translated when shown), built once.


class SlaStatus(StrEnum):
    OK = "ok"
    NEAR = "near"
    LATE = "late"


def waiting_condition() -> Q:
    """The customer is waiting for the team (see the module docstring)."""
    return (
        Q(last_staff_reply_at__isnull=True)
        | Q(last_staff_reply_at__lt=F("handed_off_at"))
        | Q(last_inbound_at__gt=F("last_staff_reply_at"))
    )


def _no_reply_since_handoff() -> Q:
    return Q(last_staff_reply_at__isnull=True) | Q(last_staff_reply_at__lt=F("handed_off_at"))


def waiting_queryset() -> QuerySet[Session]:
    """Sessions with a human whose customer waits, unordered and without annotations: what the
    header counts."""
    # `state__exact`: a read (the one writer of HUMAN is conversations.handoff). A simulated
    # session (`python manage.py simulate`) has no customer to wait.
    return Session.objects.filter(
        waiting_condition(), state__exact=SessionState.HUMAN.value, is_simulated=False
    )


def waiting_count() -> int:
    """How many customers wait for the team now: one COUNT query."""
    return waiting_queryset().count()


def waiting_sessions(
    *, assigned_to_id: int | None = None, label_id: int | None = None
) -> QuerySet[Session]:
    """The queue, oldest wait first, each row annotated with `waiting_since` and
    `summary_next_action` (None when no summary was written yet), with its instance and assignee
    joined; only the sessions assigned to `assigned_to_id`, and those with the label `label_id`,
    when given."""
    first_inbound_after_reply = (
        Message.objects.filter(
            session=OuterRef("pk"),
            direction=Direction.INBOUND,
            wa_timestamp__gt=OuterRef("last_staff_reply_at"),
        )
        # A reaction is not the customer writing (it moves no `last_inbound_at` either).
        .exclude(message_type=REACTION_TYPE)
        .order_by("wa_timestamp", "id")
        .values("wa_timestamp")[:1]
    )
    latest_summary = HandoffSummary.objects.filter(session=OuterRef("pk")).order_by(
        "-created_at", "-id"
    )
    queryset = waiting_queryset()
    if assigned_to_id is not None:
        queryset = queryset.filter(assigned_to_id=assigned_to_id)
    if label_id is not None:
        queryset = with_label(queryset, label_id)
    return (
        queryset.select_related("instance", "assigned_to")
        .only(*QUEUE_COLUMNS)
        .annotate(
            waiting_since=Case(
                When(_no_reply_since_handoff(), then=Coalesce("handed_off_at", "created_at")),
                default=Coalesce(Subquery(first_inbound_after_reply), "last_inbound_at"),
            ),
            summary_next_action=Subquery(latest_summary.values("next_action")[:1]),
            summary_error=Subquery(latest_summary.values("error")[:1]),
        )
        .order_by("waiting_since", "id")
    )


# --- What a row shows ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class QueueEntry:
    """One row of the queue as staff read it (texts in the active language)."""

    session: Session
    waiting_since: datetime
    waited: timedelta
    waited_text: str
    sla: SlaStatus
    reason: str
    next_action: str
    window_closes_at: datetime | None
    window_text: str
    window_open: bool


def sla_status(waited: timedelta, *, sla_minutes: int) -> SlaStatus:
    """ok below 75 % of the SLA, near from 75 % to just below it, late from the SLA on."""
    limit = timedelta(minutes=sla_minutes)
    if waited >= limit:
        return SlaStatus.LATE
    if waited >= limit * SLA_NEAR_FRACTION:
        return SlaStatus.NEAR
    return SlaStatus.OK


def duration_text(delta: timedelta) -> str:
    """A short age: ``"12 min"``, ``"2 h 05 min"``, ``"3 d 4 h"`` (whole minutes, rounded down;
    a negative delta — clock skew — reads ``"0 min"``)."""
    minutes = max(int(delta.total_seconds() // 60), 0)
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h {minutes:02d} min"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h"


def handoff_reason_label(reason: str, detail: str) -> str:
    """Why the session went to a human, as staff read it (`conversations.labels.handoff_label`:
    a customer who asked for a person reads as such, not as the model's request)."""
    return capfirst(handoff_label(reason, detail)) if reason else "—"


# The handoff summary is written by a task within a minute or two (its model call, retried);
# none after this long means it failed and nobody will write it unless staff ask.
SUMMARY_PREPARING = timedelta(minutes=5)


def summary_state_text(
    *, next_action: str | None, error: str | None, handed_off_at: datetime | None, now: datetime
) -> str:
    """The queue's "next action": the latest summary's, or what became of the summary."""
    if next_action is None:
        if handed_off_at is not None and now - handed_off_at > SUMMARY_PREPARING:
            return gettext("no summary: use “Generate summary” in the conversation")
        return gettext("summary being prepared")
    if not next_action and error:
        return gettext("the summary failed: use “Generate summary” in the conversation")
    return next_action or "—"


def queue_entry(session: Session, *, now: datetime, sla_minutes: int) -> QueueEntry:
    """The display values of one annotated row of `waiting_sessions` (no query)."""
    waiting_since: datetime = session.waiting_since  # type: ignore[attr-defined]
    waited = now - waiting_since
    next_action_text = summary_state_text(
        next_action=session.summary_next_action,  # type: ignore[attr-defined]
        error=session.summary_error,  # type: ignore[attr-defined]
        handed_off_at=session.handed_off_at,
        now=now,
    )
    closes_at = (
        session.last_inbound_at + CUSTOMER_SERVICE_WINDOW if session.last_inbound_at else None
    )
    window_open = closes_at is not None and closes_at > now
    return QueueEntry(
        session=session,
        waiting_since=waiting_since,
        waited=waited,
        waited_text=duration_text(waited),
        sla=sla_status(waited, sla_minutes=sla_minutes),
        reason=handoff_reason_label(session.handoff_reason, session.handoff_detail),
        next_action=next_action_text,
        window_closes_at=closes_at,
        window_text=(
            duration_text(closes_at - now)
            if window_open and closes_at is not None
            else pgettext("customer service window", "closed")
        ),
        window_open=window_open,
    )
