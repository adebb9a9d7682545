"""What only the support team writes about a conversation: internal notes and who they mention.

A note is staff talking to staff inside the conversation page: it lives in its own table, so
nothing that reads the message log — the send task, the model's history, the summary's input,
the customer's export of messages — can ever pick one up. The store (`conversations`) reaches
the notes only through `conversations.privacy.data_holders` (erasure and export), registered by
`support.apps`.
"""

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from conversations.models import Session


class InternalNote(models.Model):
    """A note staff wrote on a conversation; never sent to the customer."""

    session = models.ForeignKey(
        Session,
        on_delete=models.CASCADE,
        related_name="internal_notes",
        verbose_name=_("conversation"),
    )
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("author"),
    )
    text = models.TextField(_("text"))
    created_at = models.DateTimeField(_("created at"), default=timezone.now)
    mentioned_users = models.ManyToManyField(
        settings.AUTH_USER_MODEL,
        through="NoteMention",
        related_name="+",
        verbose_name=_("mentioned staff members"),
    )

    class Meta:
        verbose_name = _("internal note")
        verbose_name_plural = _("internal notes")
        indexes = [
            # The page's live poll: a session's notes after the newest one shown.
            models.Index(fields=["session", "id"], name="internal_note_session_order"),
        ]

    def __str__(self) -> str:
        return f"#{self.pk} @ {self.session_id}"


class NoteMention(models.Model):
    """A colleague named in a note (``@username``): e-mailed once, pending until they open the
    conversation."""

    note = models.ForeignKey(
        InternalNote,
        on_delete=models.CASCADE,
        related_name="mentions",
        verbose_name=_("internal note"),
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="+",
        verbose_name=_("staff member"),
    )
    emailed_at = models.DateTimeField(_("e-mailed at"), null=True, blank=True)
    seen_at = models.DateTimeField(_("seen at"), null=True, blank=True)

    class Meta:
        verbose_name = _("note mention")
        verbose_name_plural = _("note mentions")
        constraints = [
            models.UniqueConstraint(fields=["note", "user"], name="note_mention_once"),
        ]
        indexes = [
            # A staff member's pending mentions (the queue's count), never the seen ones.
            models.Index(
                fields=["user"],
                condition=Q(seen_at__isnull=True),
                name="note_mention_pending",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user_id} @ note {self.note_id}"
