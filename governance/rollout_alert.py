"""The e-mail to the prompt editors when a gradual release pauses itself
(`governance.rollout_pause`, docs/operations.md, "Automatic pause of a gradual release").

Registered by the pause for after its commit: a pause rolled back alerts no one, and a mail
server that refuses cannot undo the pause (the failure is logged with its class and the
override's id, never an address). One message per recipient, so no editor reads the others'
addresses: every active staff user with an e-mail who may change prompt overrides (the
permission through a group such as "Prompt editors" or their own, and the superusers). The
pause happens once (a paused candidate is not checked again), so the e-mail does too.

The link is absolute with `SITE_URL`; without it (a production setting left empty) the e-mail
gives the admin's path, which the editor opens on the address they use for the admin.
"""

import logging
from dataclasses import dataclass
from datetime import datetime
from smtplib import SMTPException

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core.exceptions import ValidationError
from django.core.mail import get_connection
from django.core.mail.message import EmailMessage
from django.core.validators import validate_email
from django.db.models import Q
from django.urls import reverse
from django.utils import translation
from django.utils.translation import gettext as _

from conversations.labels import moment_text
from prompts_admin.models import AGENT_CHOICES, PromptOverride

logger = logging.getLogger(__name__)

CHANGE_PERMISSION = ("prompts_admin", "change_promptoverride")


def prompt_editor_addresses() -> list[str]:
    """The addresses of the active staff who may change prompt overrides, sorted, each once
    (two spellings that differ only in case are one inbox: the first in order is kept); a
    stored value that is not one address is left out."""
    user_model = get_user_model()
    app_label, codename = CHANGE_PERMISSION
    permissions = Permission.objects.filter(content_type__app_label=app_label, codename=codename)
    addresses = (
        user_model.objects.filter(is_active=True, is_staff=True)
        .exclude(email="")
        .filter(
            Q(is_superuser=True)
            | Q(groups__permissions__in=permissions)
            | Q(user_permissions__in=permissions)
        )
        .values_list("email", flat=True)
        .distinct()
    )
    inboxes: dict[str, str] = {}
    for address in sorted(a.strip() for a in addresses):
        if is_address(address):
            inboxes.setdefault(address.casefold(), address)
    return sorted(inboxes.values())


def is_address(text: str) -> bool:
    """Whether `text` is one e-mail address, as the admin's user form validates it: one stored
    past that form (an import, a shell) could carry a header or several addresses, and fail
    the send to the editors after it."""
    try:
        validate_email(text)
    except ValidationError:
        return False
    return True


def override_admin_url(override_id: int) -> str:
    """The override's admin page: `SITE_URL` + its path (the path alone without `SITE_URL`)."""
    return settings.SITE_URL + reverse(
        "admin:prompts_admin_promptoverride_change", args=[override_id]
    )


def agent_label(agent: str) -> str:
    """The agent as staff read it ("triagem": agents.labels through the model's choices), in
    the site's language; an unknown value as is."""
    with translation.override(settings.LANGUAGE_CODE):
        return str(dict(AGENT_CHOICES).get(agent, agent))


@dataclass(frozen=True, slots=True)
class PauseAlert:
    override_id: int
    agent_label: str
    percent: int | None
    paused_at: datetime
    reason: str
    url: str

    def email(self) -> tuple[str, str]:
        """The e-mail's subject and body, in pt-BR."""
        with translation.override(settings.LANGUAGE_CODE):
            subject = _("Gradual release paused: %(agent)s agent's prompt (override #%(id)s)") % {
                "agent": self.agent_label,
                "id": self.override_id,
            }
            lines = [
                _(
                    "The gradual release of override #%(id)s of the %(agent)s agent's prompt "
                    "paused itself: no new conversation gets this version until it is resumed. "
                    "The conversations that got it keep it."
                )
                % {"id": self.override_id, "agent": self.agent_label},
                "",
                _("Reason: %(reason)s") % {"reason": self.reason},
                _("Paused at: %(when)s") % {"when": moment_text(self.paused_at)},
            ]
            if self.percent is not None:
                lines.append(
                    _("Share of new conversations: %(percent)s%%") % {"percent": self.percent}
                )
            lines += [
                "",
                _(
                    "To resume, save the override's page with the share; to end the release, "
                    "save it with the share empty. Compare the two versions on the prompt "
                    "metrics page."
                ),
                "",
                _("Open: %(url)s") % {"url": self.url},
            ]
        return subject, "\n".join(lines) + "\n"


def rollout_pause_alert_send(override_id: int) -> int:
    """E-mail the prompt editors that the override's release paused; how many were e-mailed.

    Not retried, as the other alerts: a mail server that refuses is a configuration to fix."""
    row = (
        PromptOverride.objects.filter(pk=override_id, rollout_paused_at__isnull=False)
        .values_list("agent", "rollout_percent", "rollout_paused_at", "rollout_pause_reason")
        .first()
    )
    if row is None:  # resumed or deleted before the hook ran: nothing paused to tell
        return 0
    agent, percent, paused_at, reason = row
    if paused_at is None:  # the filter's; typed as nullable
        return 0
    recipients = prompt_editor_addresses()
    log = {"override_id": override_id, "recipients": len(recipients)}
    if not recipients:
        logger.warning("rollout_pause_email_skipped", extra=log)
        return 0
    alert = PauseAlert(
        override_id=override_id,
        agent_label=agent_label(agent),
        percent=percent,
        paused_at=paused_at,
        reason=reason,
        url=override_admin_url(override_id),
    )
    subject, body = alert.email()
    try:
        connection = get_connection()
        messages = [
            EmailMessage(
                subject, body, settings.DEFAULT_FROM_EMAIL, [address], connection=connection
            )
            for address in recipients
        ]
        sent = connection.send_messages(messages) or 0
    # ValueError: an address or header the message refuses (Django's BadHeaderError is one);
    # its text would name the address, so only its class is logged.
    except (SMTPException, OSError, ValueError) as exc:
        logger.error("rollout_pause_email_failed", extra={**log, "error": type(exc).__name__})
        return 0
    logger.info("rollout_pause_email_sent", extra={**log, "sent": sent})
    return sent
