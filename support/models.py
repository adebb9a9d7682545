"""What only the support team writes, which the bot never reads: internal notes on a
conversation and who they mention, quick replies (canned texts the composer inserts after "/")
and labels put on conversations.

A note is staff talking to staff inside the conversation page: it lives in its own table, so
nothing that reads the message log — the send task, the model's history, the summary's input,
the customer's export of messages — can ever pick one up. The store (`conversations`) reaches
the notes only through `conversations.privacy.data_holders` (erasure and export), registered by
`support.apps`. Models of the store (Session, Message, …) stay in `conversations`.
"""

from typing import Any

from django.conf import settings
from django.core.validators import MaxLengthValidator, RegexValidator
from django.db import models
from django.db.models import Q
from django.db.models.functions import Lower
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy
from simple_history.models import HistoricalRecords

from conversations.models import Session

MANAGE_SHARED_QUICK_REPLIES = "support.manage_shared_quickreply"
MAX_SHORTCUT_CHARS = 30
MAX_QUICK_REPLY_TITLE_CHARS = 80
# WhatsApp's limit for a text message's body (support.staff_actions.MAX_REPLY_CHARS): a quick
# reply is inserted in the reply box, which cannot send more.
MAX_QUICK_REPLY_TEXT_CHARS = 4096
MAX_LABEL_NAME_CHARS = 40

SHORTCUT_VALIDATOR = RegexValidator(
    r"^[a-z0-9]+(-[a-z0-9]+)*$",
    _(
        "Use only letters without accents, digits and hyphens between them, "
        "e.g. boas-vindas or prazo-2."
    ),
)


class QuickReply(models.Model):
    """A text staff insert in the reply box by typing "/" and its shortcut. Shared with the
    whole team (`owner` empty) or personal to its owner; the shortcut is unique among the
    shared ones and among each person's own, so a personal "/prazo" may sit beside a shared
    one (the composer lists both, the personal first)."""

    shortcut = models.CharField(
        _("shortcut"),
        max_length=MAX_SHORTCUT_CHARS,
        validators=[SHORTCUT_VALIDATOR],
        help_text=_('Typed after "/" in the reply box: letters, digits and hyphens.'),
    )
    title = models.CharField(_("title"), max_length=MAX_QUICK_REPLY_TITLE_CHARS)
    text = models.TextField(
        _("text"),
        validators=[MaxLengthValidator(MAX_QUICK_REPLY_TEXT_CHARS)],
        help_text=_(
            "{{primeiro_nome}} becomes the customer's first name and {{atendente}} yours; "
            "the text can still be edited before it is sent."
        ),
    )
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="quick_replies",
        verbose_name=_("personal to"),
    )
    created_at = models.DateTimeField(_("created at"), default=timezone.now)
    updated_at = models.DateTimeField(_("updated at"), auto_now=True)
    history = HistoricalRecords()

    class Meta:
        ordering = ["shortcut", "id"]
        verbose_name = _("quick reply")
        verbose_name_plural = _("quick replies")
        permissions = [("manage_shared_quickreply", _("Can manage shared quick replies"))]
        constraints = [
            models.UniqueConstraint(
                fields=["owner", "shortcut"],
                condition=models.Q(owner__isnull=False),
                name="quick_reply_personal_shortcut",
            ),
            models.UniqueConstraint(
                fields=["shortcut"],
                condition=models.Q(owner__isnull=True),
                name="quick_reply_shared_shortcut",
            ),
        ]

    def __str__(self) -> str:
        return f"/{self.shortcut} — {self.title}"

    @property
    def is_shared(self) -> bool:
        return self.owner_id is None


class LabelColour(models.TextChoices):
    """The fixed palette of labels: each a class of labels.css with a readable text colour
    (the CSP allows no inline style, so a free colour could not be shown)."""

    GREY = "grey", _("grey")
    RED = "red", _("red")
    ORANGE = "orange", _("orange")
    YELLOW = "yellow", _("yellow")
    GREEN = "green", _("green")
    TEAL = "teal", _("teal")
    BLUE = "blue", _("blue")
    PURPLE = "purple", _("purple")
    PINK = "pink", _("pink")


class Label(models.Model):
    """A label staff put on conversations ("orçamento", "urgente") to find them again."""

    name = models.CharField(_("name"), max_length=MAX_LABEL_NAME_CHARS)
    colour = models.CharField(
        _("colour"), max_length=16, choices=LabelColour.choices, default=LabelColour.GREY
    )
    created_at = models.DateTimeField(_("created at"), default=timezone.now)
    history = HistoricalRecords()

    class Meta:
        ordering = ["name", "id"]
        # "label" alone is a form field's label ("rótulo") elsewhere.
        verbose_name = pgettext_lazy("tag", "label")
        verbose_name_plural = pgettext_lazy("tag", "labels")
        constraints = [
            models.UniqueConstraint(
                Lower("name"),
                name="label_name_case_insensitive",
                violation_error_message=_("A label with this name exists already."),
            )
        ]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        self.name = " ".join(self.name.split())

    def as_json(self) -> dict[str, Any]:
        return {"id": self.pk, "name": self.name, "colour": self.colour}


class SessionLabel(models.Model):
    """A label on a conversation, with who put it there and when (the conversation's SYSTEM
    events keep every addition and removal)."""

    session = models.ForeignKey(
        Session, on_delete=models.CASCADE, related_name="labels", verbose_name=_("conversation")
    )
    label = models.ForeignKey(
        Label,
        on_delete=models.CASCADE,
        related_name="sessions",
        verbose_name=pgettext_lazy("tag", "label"),
    )
    added_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("added by"),
    )
    added_at = models.DateTimeField(_("added at"), default=timezone.now)

    class Meta:
        verbose_name = _("conversation label")
        verbose_name_plural = _("conversation labels")
        constraints = [
            models.UniqueConstraint(fields=["session", "label"], name="session_label_once")
        ]

    def __str__(self) -> str:
        return f"#{self.session_id} {self.label_id}"


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
