"""Alerts on handoff: the team hears that a customer waits for a human, by e-mail and webhook.

`conversations.handoff.session_handoff` registers, after commit, `enqueue_handoff_alert`
(`support.tasks`) for every handoff `alert_due` — every reason but a staff
takeover, whose staff member is in the conversation already (the summary's rule too) — when an
alert is configured (`alerts_configured`). The task then:

1. **waits briefly for the summary**, whose next action the alert carries: the summary is another
   task, enqueued just before this one, and is a model call. While no summary exists and the
   handoff is younger than `SUMMARY_WAIT`, the task retries itself every few seconds; after that
   the alert goes without it, saying "resumo em preparo" (``next_action: null,
   summary_ready: false``) — a slow model must not keep the team from hearing about the
   customer. Run eagerly (no broker) the summary's hook has run already, so there is no wait.
2. **e-mails** `HANDOFF_NOTIFY_EMAILS` (`handoff_alert_email_send`), once;
3. **POSTs the signed JSON** to `HANDOFF_WEBHOOK_URL` (`handoff_alert_webhook_post`, its own task,
   retried with backoff on timeouts, connection errors and 5xx; a 4xx is not retried).

Out of business hours (RuntimeConfig's hours and the national holidays at the handoff's time)
the alert is sent all the same, marked: ``"out_of_hours": true`` and the subject says so. Both
carry the customer's **first name only** — no phone, no document, no e-mail (LGPD: the alert
reaches inboxes and chat tools that keep it), the reason (code and pt-BR label), the summary's
next action and the absolute link to the conversation's admin page (`SITE_URL`).

Each channel's outcome is recorded where staff and operators look: a SYSTEM ``handoff_alert``
event in the conversation's transcript (sent, or not sent and why) and a log line
(``handoff_alert_email_sent`` / ``_failed``, ``handoff_alert_webhook_sent`` / ``_retry`` /
``_failed``) with the session id; neither carries the receiver's URL or secret.

A mention in an internal note (`support.notes`) takes the same path: after the note's commit the
``conversations.notify_note_mentions`` task e-mails each colleague named
(`note_mentions_email_send`), once, to their own address. The e-mail says who wrote, in which
conversation, and the note's text masked as staff without the personal-data permission read it
(the session's known values and the patterns: no name, phone, document or e-mail of the
customer), with the link; the log lines (``note_mention_email_sent`` / ``_skipped`` /
``_failed``) carry ids, never the address or the text.
"""

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from smtplib import SMTPException
from typing import Any

from django.conf import settings
from django.core.mail import send_mail
from django.urls import reverse
from django.utils import timezone, translation
from django.utils.translation import gettext as _

from agents.business_hours import business_hours_status
from agents.sources import RuntimeSettings
from agents.states import HandoffReason
from conversations.event_codes import EventCode
from conversations.labels import handoff_label, moment_text
from conversations.models import Direction, HandoffSummary, Message, Session
from conversations.privacy.personal_data import session_masker
from staff_auth.names import staff_name
from support.models import InternalNote, NoteMention
from support.signed_post import RetryableDeliveryError, host_of, signed_post

logger = logging.getLogger(__name__)

# How long the alert waits for the operational summary, and how often it looks.
SUMMARY_WAIT = timedelta(seconds=30)
SUMMARY_POLL_SECONDS = 5
# A mention's e-mail quotes the note up to this many characters; the page has the rest.
MENTION_EMAIL_QUOTE_CHARS = 1000


def alert_due(reason: HandoffReason) -> bool:
    """Every handoff alerts the team but a staff takeover: someone is attending already."""
    return reason is not HandoffReason.STAFF_TAKEOVER


def alert_suppressed(session_id: int) -> bool:
    """A simulated session (`python manage.py simulate`) never alerts the team: nobody waits."""
    return Session.objects.filter(pk=session_id, is_simulated=True).exists()


def alerts_configured() -> bool:
    return bool(settings.HANDOFF_NOTIFY_EMAILS or settings.HANDOFF_WEBHOOK_URL)


def session_admin_url(session_id: int) -> str:
    """The absolute link to the conversation's admin page (`SITE_URL` + the admin's path)."""
    return settings.SITE_URL + reverse("admin:conversations_session_change", args=[session_id])


def first_name(session: Session) -> str:
    """The customer's first name: the first word of the name we know, else of the collected one."""
    registered = session.registration_data if isinstance(session.registration_data, dict) else {}
    for name in (session.customer_name, str(registered.get("nome") or "")):
        words = name.split()
        if words:
            return words[0]
    return ""


def reason_label(reason: str, detail: str = "") -> str:
    """The handoff reason as staff read it (`conversations.labels.handoff_label`: a customer who
    asked for a person reads as such), in the site's language even when a staff member's request
    with another language runs the task eagerly."""
    with translation.override(settings.LANGUAGE_CODE):
        return handoff_label(reason, detail) or reason


@dataclass(frozen=True, slots=True)
class HandoffAlert:
    """What both channels say about one handoff."""

    session_id: int
    url: str
    instance: str
    reason: str
    reason_label: str
    first_name: str
    handed_off_at: datetime
    out_of_hours: bool
    summary_ready: bool
    next_action: str | None

    def payload(self) -> dict[str, Any]:
        """The webhook's JSON document (schema in docs/operations.md, Alerts and the CRM →
        Alerts)."""
        return {
            "event": "session.handoff",
            "session_id": self.session_id,
            "url": self.url,
            "instance": self.instance,
            "reason": self.reason,
            "reason_label": self.reason_label,
            "customer_first_name": self.first_name,
            "handed_off_at": self.handed_off_at.isoformat(),
            "out_of_hours": self.out_of_hours,
            "summary_ready": self.summary_ready,
            "next_action": self.next_action,
        }

    def email(self) -> tuple[str, str]:
        """The e-mail's subject and body, in pt-BR."""
        with translation.override(settings.LANGUAGE_CODE):
            marker = _("[out of hours] ") if self.out_of_hours else ""
            subject = _("%(marker)sCustomer waiting for the team: conversation #%(id)s") % {
                "marker": marker,
                "id": self.session_id,
            }
            when = moment_text(self.handed_off_at)
            if self.out_of_hours:
                when += " " + _("(out of business hours)")
            lines = [
                _("A conversation was handed to the team."),
                "",
                _("Conversation: #%(id)s (%(instance)s)")
                % {"id": self.session_id, "instance": self.instance},
                _("Customer: %(name)s") % {"name": self.first_name or "—"},
                _("Reason: %(label)s (%(code)s)")
                % {"label": self.reason_label, "code": self.reason},
                _("Next action: %(action)s")
                % {"action": self.next_action or _("summary still being prepared")},
                _("Handed off at: %(when)s") % {"when": when},
                "",
                _("Open: %(url)s") % {"url": self.url},
            ]
        return subject, "\n".join(lines) + "\n"


def latest_summary(session_id: int) -> HandoffSummary | None:
    return (
        HandoffSummary.objects.filter(session_id=session_id)
        .order_by("-created_at", "-id")
        .only("id", "next_action", "created_at")
        .first()
    )


def summary_awaited(*, session_id: int, now: datetime) -> bool:
    """True while the alert should still wait for the summary (none yet, handoff recent)."""
    session = Session.objects.only("handed_off_at").get(pk=session_id)
    recent = session.handed_off_at is not None and now - session.handed_off_at < SUMMARY_WAIT
    return recent and not HandoffSummary.objects.filter(session_id=session_id).exists()


def handoff_alert_build(*, session_id: int, runtime: RuntimeSettings) -> HandoffAlert:
    session = Session.objects.select_related("instance").get(pk=session_id)
    handed_off_at = session.handed_off_at or timezone.now()
    summary = latest_summary(session_id)
    return HandoffAlert(
        session_id=session_id,
        url=session_admin_url(session_id),
        instance=session.instance.name,
        reason=session.handoff_reason,
        reason_label=reason_label(session.handoff_reason, session.handoff_detail),
        first_name=first_name(session),
        handed_off_at=handed_off_at,
        out_of_hours=not business_hours_status(runtime.business_hours, handed_off_at).is_open,
        summary_ready=summary is not None,
        next_action=(summary.next_action or None) if summary is not None else None,
    )


def _record(session_id: int, *, channel: str, outcome: str, **details: Any) -> None:
    """The outcome as a SYSTEM event of the conversation: its parameters, rendered in pt-BR when
    staff read the transcript (`conversations.labels.event_text`)."""
    Message.objects.create(
        session_id=session_id,
        direction=Direction.SYSTEM,
        message_type=EventCode.HANDOFF_ALERT,
        action=f"{channel}_{outcome}",
        json_part={"channel": channel, "outcome": outcome, **details},
    )


def handoff_alert_email_send(*, session_id: int, runtime: RuntimeSettings) -> str:
    """E-mail the alert to `HANDOFF_NOTIFY_EMAILS`; returns ``sent``, ``failed`` or ``skipped``.

    Not retried: a mail server that refuses is a configuration to fix, and the failure is
    recorded on the conversation and logged with its class (never the server's credentials).
    """
    recipients = list(settings.HANDOFF_NOTIFY_EMAILS)
    if not recipients:
        return "skipped"
    alert = handoff_alert_build(session_id=session_id, runtime=runtime)
    subject, body = alert.email()
    log = {"session_id": session_id, "recipients": len(recipients)}
    try:
        send_mail(subject, body, settings.DEFAULT_FROM_EMAIL, recipients)
    except (SMTPException, OSError) as exc:
        error = type(exc).__name__
        logger.error("handoff_alert_email_failed", extra={**log, "error": error})
        _record(
            session_id,
            channel="email",
            outcome="failed",
            error=error,
        )
        return "failed"
    logger.info("handoff_alert_email_sent", extra={**log, "out_of_hours": alert.out_of_hours})
    _record(
        session_id,
        channel="email",
        outcome="sent",
        recipients=len(recipients),
        out_of_hours=alert.out_of_hours,
    )
    return "sent"


def handoff_alert_webhook_post(
    *,
    session_id: int,
    runtime: RuntimeSettings,
    attempt: int,
    last_attempt: bool,
    deadline_errors: tuple[type[BaseException], ...] = (),
) -> str:
    """POST the signed alert to `HANDOFF_WEBHOOK_URL`; returns ``sent``, ``failed`` or
    ``skipped``. Raises `RetryableDeliveryError` (timeout, connection error, 5xx, or one of
    `deadline_errors` — the task's time limit — during the POST) unless this is the
    `last_attempt`, which records the failure instead."""
    url = settings.HANDOFF_WEBHOOK_URL
    if not url:
        return "skipped"
    alert = handoff_alert_build(session_id=session_id, runtime=runtime)
    log = {"session_id": session_id, "host": host_of(url), "attempt": attempt}
    try:
        answer = signed_post(
            url=url,
            secret=settings.HANDOFF_WEBHOOK_SECRET,
            document=alert.payload(),
            timeout=settings.SIGNED_POST_TIMEOUT_SECONDS,
            deadline_errors=deadline_errors,
        )
    except RetryableDeliveryError as exc:
        if not last_attempt:
            logger.warning("handoff_alert_webhook_retry", extra={**log, "error": exc.error})
            raise
        error = exc.error
    else:
        if answer.accepted:
            logger.info("handoff_alert_webhook_sent", extra={**log, "status": answer.status})
            _record(
                session_id,
                channel="webhook",
                outcome="sent",
                status=answer.status,
                attempts=attempt,
                out_of_hours=alert.out_of_hours,
            )
            return "sent"
        error = answer.error
    logger.error("handoff_alert_webhook_failed", extra={**log, "error": error})
    _record(
        session_id,
        channel="webhook",
        outcome="failed",
        error=error,
        attempts=attempt,
    )
    return "failed"


# --- Mentions in internal notes --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MentionAlert:
    """What the e-mail to a colleague named in a note says."""

    session_id: int
    url: str
    author: str  # "" when the author's account is gone
    quote: str  # the note's text, masked, at most MENTION_EMAIL_QUOTE_CHARS

    def email(self) -> tuple[str, str]:
        """The e-mail's subject and body, in pt-BR."""
        with translation.override(settings.LANGUAGE_CODE):
            author = self.author or _("A colleague")
            subject = _("%(author)s mentioned you in a note: conversation #%(id)s") % {
                "author": author,
                "id": self.session_id,
            }
            lines = [
                _("%(author)s mentioned you in an internal note of conversation #%(id)s:")
                % {"author": author, "id": self.session_id},
                "",
                self.quote,
                "",
                _("Open: %(url)s") % {"url": self.url},
            ]
        return subject, "\n".join(lines) + "\n"


def mention_alert_build(note: InternalNote) -> MentionAlert:
    """`note` loaded with its session and author."""
    quote = session_masker(note.session).text(note.text)
    if len(quote) > MENTION_EMAIL_QUOTE_CHARS:
        quote = quote[: MENTION_EMAIL_QUOTE_CHARS - 1] + "…"
    author = note.author
    return MentionAlert(
        session_id=note.session_id,
        url=session_admin_url(note.session_id),
        author=staff_name(author) if author else "",
        quote=quote,
    )


def note_mentions_email_send(*, note_id: int, now: datetime) -> int:
    """E-mail each colleague the note mentions who was not e-mailed yet; how many were.

    Not retried, as the handoff's e-mail: a colleague without an address or one who left the
    team is skipped, a mail server that refuses is logged with its class."""
    note = (
        InternalNote.objects.select_related("session", "session__instance", "author")
        .filter(pk=note_id)
        .first()
    )
    if note is None:
        return 0
    mentions = list(note.mentions.filter(emailed_at__isnull=True).select_related("user"))
    if not mentions:
        return 0
    alert = mention_alert_build(note)
    subject, body = alert.email()
    sent = 0
    for mention in mentions:
        log = {"session_id": note.session_id, "note_id": note.pk, "user_id": mention.user_id}
        address = mention.user.email
        if not address or not mention.user.is_active:
            logger.info("note_mention_email_skipped", extra=log)
            continue
        try:
            send_mail(subject, body, settings.DEFAULT_FROM_EMAIL, [address])
        except (SMTPException, OSError) as exc:
            logger.error("note_mention_email_failed", extra={**log, "error": type(exc).__name__})
            continue
        NoteMention.objects.filter(pk=mention.pk).update(emailed_at=now)
        logger.info("note_mention_email_sent", extra=log)
        sent += 1
    return sent
