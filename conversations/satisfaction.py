"""The satisfaction question after the attendance (docs/decisions/0051-satisfaction-survey.md).

`survey_ask` asks it once per conversation — when staff close it (`support.staff_actions`) or
after a confirmed lead (the turn's commit, code 5) — as one interactive message: three reply
buttons or a list from 1 to 5 (RuntimeConfig says which, with the text and whether to ask). It
asks only inside WhatsApp's 24-hour customer-service window; outside it the survey row records
"not sent: window closed". A simulated conversation is never asked, and no conversation twice
(the survey is one row per session).

Every answer carries a reply id ``csat:<score>`` on the 1-5 scale (the buttons are Ótimo 5,
Regular 3, Ruim 1), so the webhook tells an answer from any other reply by its id alone
(`score_of_reply`): no query for anything else a customer sends. `survey_answer_find` finds the
survey an answer belongs to and `survey_answer_record` stores it on it.
"""

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from django.contrib.auth.models import User
from django.db.models import Q

from conversations.commit_hooks import on_commit_call
from conversations.event_codes import ACTION_SATISFACTION_SURVEY
from conversations.models import (
    DeliveryStatus,
    Direction,
    Message,
    SatisfactionSurvey,
    Session,
    SurveyNotSent,
    SurveyTrigger,
)
from prompts_admin.models import DEFAULT_SATISFACTION_QUESTION, RuntimeConfig, SatisfactionStyle
from whatsapp import CUSTOMER_SERVICE_WINDOW
from whatsapp.interactive import (
    INTERACTIVE_MESSAGE_TYPE,
    MAX_BODY_CHARS,
    Option,
    list_message,
    reply_buttons,
)
from whatsapp.payload import Customer

SURVEY_REPLY_PREFIX = "csat:"
# An answer tapped later than this after the question is not counted: the customer is rating
# something else by then (the tap is still kept in the conversation).
ANSWER_DAYS = 7
# A score at least this high is a satisfied customer (the CSAT share): 4 and 5 on the list,
# Ótimo on the buttons.
TOP_SCORE = 4
BUTTONS = ((5, "Ótimo"), (3, "Regular"), (1, "Ruim"))
LIST_ROWS = (
    (5, "5 - Excelente"),
    (4, "4 - Bom"),
    (3, "3 - Regular"),
    (2, "2 - Ruim"),
    (1, "1 - Péssimo"),
)
LIST_BUTTON = "Avaliar"


def survey_reply_id(score: int) -> str:
    return f"{SURVEY_REPLY_PREFIX}{score}"


def score_of_reply(reply_id: str) -> int | None:
    """The score a survey answer's reply id carries, or None for any other reply."""
    if not reply_id.startswith(SURVEY_REPLY_PREFIX):
        return None
    tail = reply_id.removeprefix(SURVEY_REPLY_PREFIX)
    if len(tail) == 1 and tail in "12345":
        return int(tail)
    return None


def survey_interactive(question: str, style: str) -> dict[str, Any]:
    """The ``interactive`` object of the question (an empty question is the default one)."""
    body = question.strip() or DEFAULT_SATISFACTION_QUESTION
    if len(body) > MAX_BODY_CHARS:
        body = DEFAULT_SATISFACTION_QUESTION  # the form refuses it; only a row edited by hand
    if style == SatisfactionStyle.LIST:
        rows = [Option(survey_reply_id(score), title) for score, title in LIST_ROWS]
        return list_message(body, rows, button=LIST_BUTTON)
    buttons = [Option(survey_reply_id(score), title) for score, title in BUTTONS]
    return reply_buttons(body, buttons)


@dataclass(frozen=True, slots=True)
class SurveySettings:
    """What RuntimeConfig says of the question (the turn passes its cached copy)."""

    question: str
    style: str

    @classmethod
    def of(cls, config: RuntimeConfig) -> "SurveySettings":
        return cls(question=config.satisfaction_question, style=config.satisfaction_style)


class SurveyOutcome(StrEnum):
    ASKED = "asked"
    WINDOW_CLOSED = "window_closed"
    NOT_DUE = "not_due"  # simulated, or asked before


def survey_ask(
    *,
    session_id: int,
    trigger: SurveyTrigger,
    survey: SurveySettings,
    now: datetime,
    send: Callable[[int], None],
    closed_by: User | None = None,
) -> SurveyOutcome:
    """Ask the session's satisfaction question (see the module docstring), inside the caller's
    transaction, which holds the session's row lock; the question is sent after its commit."""
    session = (
        Session.objects.filter(pk=session_id)
        .values("is_simulated", "last_inbound_at", "handoff_reason")
        .get()
    )
    if session["is_simulated"] or SatisfactionSurvey.objects.filter(session_id=session_id).exists():
        return SurveyOutcome.NOT_DUE
    row = SatisfactionSurvey(
        session_id=session_id,
        trigger=trigger,
        style=survey.style,
        closed_by=closed_by,
        handoff_reason=session["handoff_reason"],
        created_at=now,
    )
    last_inbound = session["last_inbound_at"]
    if last_inbound is None or now >= last_inbound + CUSTOMER_SERVICE_WINDOW:
        row.not_sent = SurveyNotSent.WINDOW_CLOSED
        row.save()
        return SurveyOutcome.WINDOW_CLOSED
    interactive = survey_interactive(survey.question, survey.style)
    question = Message.objects.create(
        session_id=session_id,
        direction=Direction.OUTBOUND,
        message_type=INTERACTIVE_MESSAGE_TYPE,
        content=interactive["body"]["text"],
        interactive=interactive,
        action=ACTION_SATISFACTION_SURVEY,
        delivery_status=DeliveryStatus.PENDING,
        created_at=now,
    )
    Session.objects.filter(pk=session_id).update(last_message_at=now)
    row.question = question
    row.asked_at = now
    row.save()
    on_commit_call(send, question.pk)
    return SurveyOutcome.ASKED


def survey_answer_find(
    *, phone_number_id: str, customer: Customer, simulated: bool
) -> SatisfactionSurvey | None:
    """The newest survey asked of this customer on that number: the one a ``csat:`` reply
    answers. None when there is none (the reply is then an ordinary text)."""
    who = Q()
    if customer.user_id:
        who |= Q(session__customer_user_id=customer.user_id)
    if customer.phone:
        who |= Q(session__customer_phone=customer.phone)
    if not who:
        return None
    return (
        SatisfactionSurvey.objects.filter(
            who,
            asked_at__isnull=False,
            session__instance__phone_number_id=phone_number_id,
            session__instance__is_active=True,
            session__is_simulated=simulated,
        )
        .select_related("session")
        .order_by("-asked_at", "-id")
        .first()
    )


def survey_answer_record(survey: SatisfactionSurvey, *, score: int, at: datetime) -> bool:
    """Store `score` tapped at `at` on the survey; a later tap replaces an earlier one (a
    mis-tap corrected). False, and nothing stored, past `ANSWER_DAYS` after the question."""
    assert survey.asked_at is not None, "survey_answer_find returns asked surveys"
    if at > survey.asked_at + timedelta(days=ANSWER_DAYS):
        return False
    SatisfactionSurvey.objects.filter(pk=survey.pk).update(score=score, answered_at=at)
    survey.score, survey.answered_at = score, at
    return True
