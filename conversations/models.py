from typing import Any

from django.conf import settings
from django.core.validators import MaxLengthValidator, RegexValidator
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext, pgettext_lazy
from django.utils.translation import gettext_lazy as _

from agents.circuit import CircuitState
from agents.labels import AGENT_LABELS, HANDOFF_REASON_LABELS, STATE_LABELS, choices
from agents.phones import customer_phone_key
from agents.states import SessionState
from conversations.privacy.encryption import EncryptedTextField
from prompts_admin.models import SatisfactionStyle

# Derived from the one label table (agents.labels), translated when shown.
STATE_CHOICES = choices(STATE_LABELS, translate=_)
AGENT_CHOICES = choices(AGENT_LABELS, translate=_)
HANDOFF_REASON_CHOICES = choices(HANDOFF_REASON_LABELS, translate=_)

MAX_BRAND_CONTEXT_CHARS = 2_000
MAX_ACCESS_TOKEN_CHARS = 512
PHONE_NUMBER_ID_VALIDATOR = RegexValidator(
    r"^\d{5,32}$", _("Use the digits of the phone_number_id shown by Meta, nothing else.")
)
WABA_ID_VALIDATOR = RegexValidator(
    r"^\d{5,32}$",
    _("Use the digits of the WhatsApp Business Account ID shown by Meta, nothing else."),
)
E164_DIGITS_VALIDATOR = RegexValidator(
    r"^\d{8,15}$", _("Use the E.164 number with digits only (8 to 15 digits, no +).")
)
DOCUMENT_DIGITS_VALIDATOR = RegexValidator(
    r"^(\d{11}|\d{14})$", _("Use the 11 digits of a CPF or the 14 digits of a CNPJ.")
)


class Instance(models.Model):
    """One WhatsApp business number of the company."""

    phone_number_id = models.CharField(
        _("WhatsApp phone_number_id"),
        max_length=32,
        unique=True,
        validators=[PHONE_NUMBER_ID_VALIDATOR],
    )
    display_phone = models.CharField(_("display phone"), max_length=32, blank=True)
    name = models.CharField(_("name"), max_length=120)
    # The account whose approved message templates this number may send (WhatsApp Manager,
    # Account tools, or Business settings > WhatsApp accounts); empty: none are synced.
    waba_id = models.CharField(
        _("WhatsApp Business Account ID"),
        max_length=32,
        blank=True,
        validators=[WABA_ID_VALIDATOR],
        help_text=_(
            "The WABA ID shown by Meta; the approved WhatsApp message templates are read from it."
        ),
    )
    brand_context = models.TextField(
        _("brand context"),
        blank=True,
        validators=[MaxLengthValidator(MAX_BRAND_CONTEXT_CHARS)],
        help_text=_("Text about the brand or unit given to the agents as metadata."),
    )
    health_sensitive = models.BooleanField(_("health-sensitive"), default=False)
    # Encrypted at rest with FIELD_ENCRYPTION_KEYS; reads as plaintext
    # (conversations.privacy.encryption).
    access_token = EncryptedTextField(
        _("access token"),
        blank=True,
        help_text=_("Optional; empty uses WHATSAPP_ACCESS_TOKEN. Never displayed."),
    )
    is_active = models.BooleanField(_("active"), default=True)
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)

    class Meta:
        ordering = ["name"]
        verbose_name = _("instance")
        verbose_name_plural = _("instances")

    def __str__(self) -> str:
        return f"{self.name} ({self.display_phone or self.phone_number_id})"

    @property
    def has_access_token(self) -> bool:
        """Whether the instance has its own token, without decrypting it."""
        if "access_token" not in self.__dict__:
            self.refresh_from_db(fields=["access_token"])
        return bool(self.__dict__["access_token"])


class Session(models.Model):
    """One conversation of one customer on one instance, with a state."""

    instance = models.ForeignKey(
        Instance, on_delete=models.PROTECT, related_name="sessions", verbose_name=_("instance")
    )
    customer_phone = models.CharField(
        _("customer phone"),
        max_length=20,
        blank=True,
        validators=[E164_DIGITS_VALIDATOR],
        help_text=_("E.164, digits only"),
    )
    # What the customer is matched by (`agents.phones.customer_phone_key`: a Brazilian mobile
    # with its ninth digit, whichever form WhatsApp sent); `customer_phone` stays the wa_id
    # WhatsApp gave last, the one sends go to. Written by `save` and with every phone update.
    customer_phone_key = models.CharField(
        _("customer phone key"), max_length=20, blank=True, editable=False
    )
    customer_user_id = models.CharField(_("user ID (BSUID)"), max_length=128, blank=True)
    customer_name = models.CharField(_("customer name"), max_length=200, blank=True)
    customer_document = models.CharField(
        _("document (CPF/CNPJ)"),
        max_length=14,
        blank=True,
        validators=[DOCUMENT_DIGITS_VALIDATOR],
        help_text=_("Digits only"),
    )
    state = models.CharField(
        _("state"), max_length=16, choices=STATE_CHOICES, default=SessionState.TRIAGE.value
    )
    segment = models.CharField(_("segment"), max_length=64, blank=True)
    intent = models.CharField(_("intent"), max_length=64, blank=True)
    service = models.CharField(_("service"), max_length=64, blank=True)
    technical_data = models.JSONField(_("technical data"), default=dict, blank=True)
    technical_extras = models.JSONField(
        _("technical data extras"),
        default=dict,
        blank=True,
        help_text=_("Parameters sent by the model that the service's schema does not declare."),
    )
    registration_data = models.JSONField(_("registration data"), default=dict, blank=True)
    registration_extras = models.JSONField(_("registration data extras"), default=dict, blank=True)
    # Written with the code-4 message: the Lead of a code 5 holds exactly this (DESIGN.md §7).
    confirmation_data = models.JSONField(
        _("data shown for confirmation"),
        null=True,
        blank=True,
        help_text=_("The registration data the customer was asked to confirm (code 4)."),
    )
    loaded_packages = models.JSONField(_("loaded packages"), default=list, blank=True)
    # Each prompt agent's version ("builtin" or "override:<history_id>"), keyed by agent, pinned by
    # the session's first turn and kept until it ends (or staff moves it to the current prompts,
    # `support.staff_actions.session_prompts_update`).
    prompt_versions = models.JSONField(
        _("prompt versions"),
        default=dict,
        blank=True,
        editable=False,
        help_text=_(
            "The prompt version of each agent this conversation keeps: pinned at its first turn."
        ),
    )
    # The release published when the first turn pinned (None: none was), and the version of each
    # package active then ({package id: history id}): the conversation is given those texts until
    # it ends, as it keeps its prompt versions.
    release = models.ForeignKey(
        "prompts_admin.Release",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        editable=False,
        related_name="sessions",
        verbose_name=_("release"),
    )
    package_versions = models.JSONField(
        _("knowledge package versions"),
        default=dict,
        blank=True,
        editable=False,
        help_text=_(
            "The version of each knowledge package this conversation keeps: pinned at its first "
            "turn."
        ),
    )
    handoff_reason = models.CharField(
        _("handoff reason"), max_length=32, choices=HANDOFF_REASON_CHOICES, blank=True
    )
    handoff_detail = models.CharField(_("handoff detail"), max_length=255, blank=True)
    # Written by `conversations.handoff.session_handoff` with the state it leaves: "give back"
    # returns the conversation to the bot there by default.
    state_before_handoff = models.CharField(
        _("state before the handoff"), max_length=16, choices=STATE_CHOICES, blank=True
    )
    assigned_to = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="assigned_sessions",
        verbose_name=_("assigned to"),
    )
    # When staff last wrote to the customer (a reply or a template): the customer is waiting for
    # a human when there is none since the handoff, or a newer customer message (the queue).
    last_staff_reply_at = models.DateTimeField(_("last staff reply"), null=True, blank=True)
    # Processing lease: who runs this session's turn now, and until when (DESIGN.md §4 step 2).
    lease_token = models.UUIDField(_("lease token"), null=True, blank=True, editable=False)
    lease_expires_at = models.DateTimeField(_("lease expires at"), null=True, blank=True)
    # When the webhook last enqueued this session's turn that no worker has started yet: a
    # delivery that finds it set (and fresher than `turn_queued_ttl()`, in
    # conversations.inbound.session_rules) does not enqueue another. Cleared when a worker
    # claims or releases the lease.
    turn_queued_at = models.DateTimeField(
        _("turn queued at"), null=True, blank=True, editable=False
    )
    created_at = models.DateTimeField(_("created at"), default=timezone.now)
    last_inbound_at = models.DateTimeField(_("last inbound message"), null=True, blank=True)
    last_message_at = models.DateTimeField(_("last message"), null=True, blank=True)
    handed_off_at = models.DateTimeField(_("handed off at"), null=True, blank=True)
    closed_at = models.DateTimeField(_("closed at"), null=True, blank=True)
    # LGPD (conversations.privacy.retention): set when the customer's personal data was anonymised.
    anonymised_at = models.DateTimeField(_("anonymised at"), null=True, blank=True)
    updated_at = models.DateTimeField(_("updated at"), auto_now=True)
    # A conversation of the simulator (simulator.simulation): its replies never reach WhatsApp
    # (conversations.sending), a real delivery never finds it (conversations.inbound.session_rules)
    # and it stays out of the queue, the handoff alerts, the leads, the CRM and the metrics.
    is_simulated = models.BooleanField(
        _("simulated"),
        default=False,
        help_text=_("A test conversation with the bot: never sent to WhatsApp."),
    )

    class Meta:
        ordering = ["-last_message_at", "-id"]
        verbose_name = _("conversation")
        verbose_name_plural = _("conversations")
        # Without it, names, phones, documents and e-mails are masked on every admin page
        # (conversations.privacy.personal_data); Support has it, prompt editors do not.
        permissions = [
            ("view_personal_data", _("Can view customers' personal data")),
            # Take over, assign, reply, send a template, give back, close: Support has it.
            ("attend_session", _("Can attend conversations")),
            # A customer's export and erasure requests (conversations.privacy.customer_data): no
            # group has it; superusers, or staff it is granted to.
            ("erase_customer_data", _("Can export and erase a customer's personal data")),
        ]
        indexes = [
            models.Index(
                fields=["instance", "customer_phone_key", "-created_at"], name="session_phone_key"
            ),
            models.Index(
                fields=["instance", "customer_user_id", "-created_at"], name="session_user"
            ),
            models.Index(fields=["-last_message_at", "-id"], name="session_recent"),
            models.Index(fields=["state", "-last_message_at"], name="session_state_recent"),
            # The admin list filters by these and keeps its ordering (newest activity first).
            models.Index(fields=["instance", "-last_message_at"], name="session_instance_recent"),
            models.Index(
                fields=["handoff_reason", "-last_message_at"], name="session_handoff_recent"
            ),
            models.Index(fields=["segment", "-last_message_at"], name="session_segment_recent"),
            models.Index(fields=["customer_document"], name="session_document"),
            models.Index(fields=["lease_expires_at"], name="session_lease"),
        ]
        constraints = [
            # At most one open session per customer and instance, even under concurrent webhooks;
            # a real one and a simulated one apart (the simulator never shares a real session).
            models.UniqueConstraint(
                fields=["instance", "customer_phone", "is_simulated"],
                condition=~models.Q(state=SessionState.CLOSED.value) & ~models.Q(customer_phone=""),
                name="session_one_open_per_phone",
            ),
            models.UniqueConstraint(
                fields=["instance", "customer_user_id", "is_simulated"],
                condition=~models.Q(state=SessionState.CLOSED.value)
                & ~models.Q(customer_user_id=""),
                name="session_one_open_per_user_id",
            ),
        ]

    def __str__(self) -> str:
        # By its id only: the admin log copies this into `LogEntry.object_repr`, which every
        # staff member reads in "Ações recentes" and which outlives an erasure.
        return gettext("Conversation #%(id)s") % {"id": self.pk}

    def save(self, *args: Any, **kwargs: Any) -> None:
        self.customer_phone_key = customer_phone_key(self.customer_phone)
        update_fields = kwargs.get("update_fields")
        if update_fields is not None and "customer_phone" in update_fields:
            kwargs["update_fields"] = {*update_fields, "customer_phone_key"}
        super().save(*args, **kwargs)


def phone_changes(changes: dict[str, Any]) -> dict[str, Any]:
    """`changes` to a session's fields for an ``update()``, its phone key with its phone."""
    if "customer_phone" in changes:
        return {**changes, "customer_phone_key": customer_phone_key(changes["customer_phone"])}
    return changes


class Direction(models.TextChoices):
    INBOUND = "INBOUND", _("inbound")
    OUTBOUND = "OUTBOUND", _("outbound")
    SYSTEM = "SYSTEM", _("system")


class DeliveryStatus(models.TextChoices):
    PENDING = "pending", _("pending")
    SENT = "sent", _("sent")
    DELIVERED = "delivered", _("delivered")
    READ = "read", _("read")
    PLAYED = "played", _("played")
    FAILED = "failed", _("failed")


SUPERSEDED = "superseded"
# The message type of a reaction's own row (its emoji is stored on the message it reacts to).
REACTION_TYPE = "reaction"
# An OUTBOUND message not accepted by the Graph API yet and not failed: no wamid, no error (a
# superseded draft has one), delivery status pending (or never set).
UNSENT_OUTBOUND = models.Q(
    direction="OUTBOUND",
    wa_message_id__isnull=True,
    error="",
    delivery_status__in=["pending", ""],
)


# Message.message_type of the INBOUND row that logs a reaction (WhatsApp's type).
REACTION_MESSAGE_TYPE = "reaction"


class MessageQuerySet(models.QuerySet["Message"]):
    """The message log's named filters: each rule written once, used by every caller.

    Each method only filters, so they chain with each other and with `.filter()`, and work
    inside `Exists(...)`/`OuterRef` subqueries.
    """

    def pending_inbound(self) -> "MessageQuerySet":
        """INBOUND messages no turn has answered yet (`processed_at` is NULL).

        The webhook stores text pending only while a bot holds the session; a turn (or a staff
        takeover) sets `processed_at`. Exactly the condition of the partial index
        `message_pending_inbound`.
        """
        return self.filter(direction=Direction.INBOUND, processed_at__isnull=True)

    def not_superseded(self) -> "MessageQuerySet":
        """Without the drafts a newer message or a state change superseded (never sent)."""
        return self.exclude(error=SUPERSEDED)

    def conversational(self) -> "MessageQuerySet":
        """What was said in the conversation: INBOUND and OUTBOUND, no SYSTEM events, no
        superseded drafts (the customer never saw them)."""
        return self.filter(direction__in=(Direction.INBOUND, Direction.OUTBOUND)).not_superseded()

    def without_reaction_events(self) -> "MessageQuerySet":
        """Without the INBOUND rows that log a customer's reaction: the reaction is shown on the
        message it reacts to (`Message.reaction`), not as a message of its own."""
        return self.exclude(direction=Direction.INBOUND, message_type=REACTION_MESSAGE_TYPE)

    def unsent_outbound(self) -> "MessageQuerySet":
        """OUTBOUND messages still waiting for the Graph API to accept them (`UNSENT_OUTBOUND`):
        exactly the condition of the partial index `message_unsent_outbound`."""
        return self.filter(UNSENT_OUTBOUND)


class Message(models.Model):
    """One row of the message log: INBOUND, OUTBOUND or SYSTEM (an event of the pipeline)."""

    session = models.ForeignKey(
        Session, on_delete=models.CASCADE, related_name="messages", verbose_name=_("conversation")
    )
    direction = models.CharField(_("direction"), max_length=8, choices=Direction.choices)
    message_type = models.CharField(
        _("type"),
        max_length=32,
        default="text",
        help_text=_("WhatsApp type (text, image, ...) or, for system events, the event."),
    )
    agent = models.CharField(_("agent"), max_length=16, choices=AGENT_CHOICES, blank=True)
    content = models.TextField(_("content"), blank=True)
    raw_response = models.TextField(_("raw model answer"), blank=True)
    json_part = models.JSONField(_("JSON part"), null=True, blank=True)
    code = models.SmallIntegerField(_("code (s)"), null=True, blank=True)
    action = models.CharField(_("action"), max_length=32, blank=True)
    error = models.CharField(_("error"), max_length=64, blank=True)
    turn_id = models.UUIDField(_("turn"), null=True, blank=True)
    part_index = models.PositiveSmallIntegerField(_("part"), default=0)
    wa_message_id = models.CharField(
        _("WhatsApp message ID"), max_length=128, null=True, blank=True, unique=True
    )
    wa_timestamp = models.DateTimeField(_("WhatsApp timestamp"), null=True, blank=True)
    processed_at = models.DateTimeField(
        _("processed at"),
        null=True,
        blank=True,
        help_text=_("Inbound messages: when a turn answered it."),
    )
    delivery_status = models.CharField(
        _("delivery status"), max_length=16, choices=DeliveryStatus.choices, blank=True
    )
    delivery_status_at = models.DateTimeField(_("status at"), null=True, blank=True)
    delivery_error_code = models.IntegerField(_("error code"), null=True, blank=True)
    delivery_error_title = models.CharField(_("delivery error"), max_length=255, blank=True)
    send_attempts = models.PositiveSmallIntegerField(_("send attempts"), default=0)
    # When the last send attempt was claimed: the unsent-messages sweep starts a new round of
    # retries only for a message nobody tried for a while (conversations.sweeps).
    last_send_attempt_at = models.DateTimeField(_("last send attempt at"), null=True, blank=True)
    staff_user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("staff member"),
    )
    created_at = models.DateTimeField(_("created at"), default=timezone.now)
    # OUTBOUND ``interactive``: the Graph API's ``interactive`` object sent (reply buttons or a
    # list, `whatsapp.interactive`); INBOUND: the reply the customer tapped
    # ({"type": "button_reply" | "list_reply", "id", "title"}).
    interactive = models.JSONField(_("interactive"), null=True, blank=True)
    # The wamid of the message this one answers (WhatsApp's ``context.id``: a quoted reply).
    reply_to_wamid = models.CharField(_("in reply to"), max_length=128, blank=True)
    # The customer's reaction to this message (an emoji; empty when removed or never given).
    reaction = models.CharField(_("reaction"), max_length=32, blank=True)
    reaction_at = models.DateTimeField(_("reaction at"), null=True, blank=True)

    objects = MessageQuerySet.as_manager()

    class Meta:
        ordering = ["created_at", "id"]
        verbose_name = _("message")
        verbose_name_plural = _("messages")
        indexes = [
            # The one conversation order (conversations.message_order): newest first by id.
            models.Index(fields=["session", "id"], name="message_session_order"),
            models.Index(
                fields=["session", "wa_timestamp"],
                condition=models.Q(direction="INBOUND", processed_at__isnull=True),
                name="message_pending_inbound",
            ),
            models.Index(fields=["turn_id"], name="message_turn"),
            # The unsent-messages sweep (conversations.sweeps) reads only the OUTBOUND messages
            # still waiting for a wamid, every minute: a few rows, not the whole message log.
            models.Index(
                fields=["created_at"],
                condition=UNSENT_OUTBOUND,
                name="message_unsent_outbound",
            ),
        ]

    def __str__(self) -> str:
        # The admin's titles and "Ações recentes" show it: no text, which may be personal data.
        return gettext("Message #%(id)s (%(direction)s)") % {
            "id": self.pk,
            "direction": self.get_direction_display(),
        }


class MediaStatus(models.TextChoices):
    PENDING = "pending", _("waiting for download")
    DOWNLOADED = "downloaded", _("downloaded")
    FAILED = "failed", _("download failed")
    EXPIRED = "expired", _("expired at WhatsApp")
    TOO_LARGE = "too_large", _("too large")
    NOT_APPLICABLE = "not_applicable", _("no file")


# Location and contacts carry their data in the webhook: nothing to download.
MEDIA_WITHOUT_FILE = frozenset({"location", "contacts"})


class ReadingStatus(models.TextChoices):
    """Where the bot's reading of a media is: an audio's transcription, an image's description.
    A turn waits while a pending message's media is PENDING (`conversations.media_reading`)."""

    NOT_READ = "", _("not read by the bot")
    PENDING = "pending", _("being read by the bot")
    DONE = "done", _("read by the bot")
    FAILED = "failed", _("the bot could not read it")


class MessageMedia(models.Model):
    """What a media message holds: Meta's metadata, the data of a location or contact card, and,
    once downloaded (inbound) or uploaded (staff's), the file itself in the default storage."""

    message = models.OneToOneField(
        Message, on_delete=models.CASCADE, related_name="media", verbose_name=_("message")
    )
    kind = models.CharField(_("kind"), max_length=16)
    media_id = models.CharField(_("WhatsApp media ID"), max_length=128, blank=True)
    mime_type = models.CharField(_("MIME type"), max_length=255, blank=True)
    sha256 = models.CharField(_("SHA-256"), max_length=128, blank=True)
    caption = models.TextField(_("caption"), blank=True)
    filename = models.CharField(_("file name"), max_length=255, blank=True)
    voice = models.BooleanField(_("voice message"), default=False)
    file_size = models.PositiveBigIntegerField(_("file size"), null=True, blank=True)
    file = models.FileField(_("file"), upload_to="whatsapp-media/%Y/%m/", blank=True)
    status = models.CharField(
        _("status"), max_length=16, choices=MediaStatus.choices, default=MediaStatus.PENDING
    )
    error = models.CharField(_("error"), max_length=255, blank=True)
    downloaded_at = models.DateTimeField(_("downloaded at"), null=True, blank=True)
    # location: latitude, longitude, name, address; contacts: {"contacts": [{name, phones}]}.
    data = models.JSONField(_("data"), default=dict, blank=True)
    # What the bot read in it: an audio's transcript, an image's description (a vision model).
    transcript = models.TextField(_("transcript"), blank=True)
    description = models.TextField(_("description"), blank=True)
    reading_status = models.CharField(
        _("reading"), max_length=16, choices=ReadingStatus.choices, blank=True
    )
    created_at = models.DateTimeField(_("created at"), default=timezone.now)

    class Meta:
        verbose_name = _("message media")
        verbose_name_plural = _("message media")

    def __str__(self) -> str:
        return gettext("Media of message #%(id)s") % {"id": self.message_id}


class DeliveryStatusEvent(models.Model):
    """One WhatsApp status callback, deduplicated on (wamid, status)."""

    wa_message_id = models.CharField(_("WhatsApp message ID"), max_length=128)
    status = models.CharField(_("status"), max_length=16)
    message = models.ForeignKey(
        Message,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="status_events",
        verbose_name=_("message"),
    )
    wa_timestamp = models.DateTimeField(_("WhatsApp timestamp"), null=True, blank=True)
    error_code = models.IntegerField(_("error code"), null=True, blank=True)
    error_title = models.CharField(_("error title"), max_length=255, blank=True)
    error_details = models.TextField(_("error details"), blank=True)
    created_at = models.DateTimeField(_("received at"), default=timezone.now)

    class Meta:
        ordering = ["created_at", "id"]
        verbose_name = _("delivery status")
        verbose_name_plural = _("delivery status")
        constraints = [
            models.UniqueConstraint(
                fields=["wa_message_id", "status"], name="delivery_status_once_per_wamid"
            )
        ]

    def __str__(self) -> str:
        return f"{self.wa_message_id} {self.status}"


class SessionViewer(models.Model):
    """Who has a conversation page open: one row per staff member and session, its `seen_at`
    moved forward by the page's live poll (`support.live`), never a row per poll."""

    session = models.ForeignKey(
        Session, on_delete=models.CASCADE, related_name="viewers", verbose_name=_("conversation")
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="+",
        verbose_name=_("staff member"),
    )
    seen_at = models.DateTimeField(_("seen at"))

    class Meta:
        verbose_name = _("conversation viewer")
        verbose_name_plural = _("conversation viewers")
        constraints = [
            models.UniqueConstraint(fields=["session", "user"], name="session_viewer_once")
        ]

    def __str__(self) -> str:
        return f"{self.user_id} @ {self.session_id}"


class WebhookOutcome(models.TextChoices):
    RECEIVED = "received", _("received")
    PROCESSED = "processed", _("processed")
    IGNORED = "ignored", _("ignored")
    FAILED = "failed", _("failed (reprocess)")


class WebhookDelivery(models.Model):
    """The raw body of one signature-checked webhook POST, kept before it is parsed."""

    raw_body = models.BinaryField(_("raw body"))
    headers = models.JSONField(_("relevant headers"), default=dict, blank=True)
    received_at = models.DateTimeField(_("received at"), default=timezone.now)
    processed_at = models.DateTimeField(_("processed at"), null=True, blank=True)
    outcome = models.CharField(
        _("outcome"),
        max_length=16,
        choices=WebhookOutcome.choices,
        default=WebhookOutcome.RECEIVED,
    )
    error = models.TextField(_("error"), blank=True)
    messages_count = models.PositiveIntegerField(_("messages"), default=0)
    statuses_count = models.PositiveIntegerField(_("statuses"), default=0)
    # Identical bodies (a replay) are stored once and counted (`conversations.inbound`); null on
    # rows stored before the column existed.
    body_sha256 = models.CharField(
        _("body SHA-256"), max_length=64, null=True, blank=True, unique=True, editable=False
    )
    times_received = models.PositiveIntegerField(_("times received"), default=1)

    class Meta:
        ordering = ["-received_at", "-id"]
        verbose_name = _("webhook delivery")
        verbose_name_plural = _("webhook deliveries")
        indexes = [
            models.Index(fields=["-received_at", "-id"], name="webhook_recent"),
            models.Index(fields=["outcome", "-received_at"], name="webhook_outcome"),
        ]

    def __str__(self) -> str:
        return gettext("Delivery #%(id)s (%(outcome)s)") % {
            "id": self.pk,
            "outcome": self.get_outcome_display(),
        }


class LLMCallPurpose(models.TextChoices):
    AGENT = "agent", _("agent")
    REPAIR = "repair", _("format repair")
    SUMMARY = "summary", _("operational summary")
    TRANSCRIPTION = "transcription", _("audio transcription")
    DESCRIPTION = "description", _("image description")


class LLMCall(models.Model):
    """One model call (agent, repair, summary or the reading of a media): its cost, outcome and
    what it was built from."""

    session = models.ForeignKey(
        Session, on_delete=models.CASCADE, related_name="llm_calls", verbose_name=_("conversation")
    )
    message = models.ForeignKey(
        Message,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="llm_calls",
        verbose_name=_("message"),
    )
    turn_id = models.UUIDField(_("turn"), null=True, blank=True)
    agent = models.CharField(_("agent"), max_length=16, choices=AGENT_CHOICES)
    purpose = models.CharField(_("purpose"), max_length=16, choices=LLMCallPurpose.choices)
    model = models.CharField(_("model"), max_length=64)
    tokens_input = models.PositiveIntegerField(_("input tokens"), default=0)
    # The part of tokens_input read from the provider's prompt cache, priced lower
    # (conversations.model_prices).
    cached_tokens = models.PositiveIntegerField(_("cached input tokens"), default=0)
    tokens_output = models.PositiveIntegerField(_("output tokens"), default=0)
    latency_ms = models.PositiveIntegerField(_("latency (ms)"), default=0)
    attempts = models.PositiveSmallIntegerField(_("attempts"), default=1)
    outcome = models.CharField(
        _("outcome"),
        max_length=32,
        help_text=_("ok, timeout, rate_limited, quota_exceeded, provider_error"),
    )
    error = models.TextField(_("error"), blank=True)
    prompt_version = models.CharField(
        _("prompt version"),
        max_length=32,
        blank=True,
        help_text=_('"builtin" or the history id of the override used'),
    )
    context_snapshot = models.JSONField(_("session context"), null=True, blank=True)
    raw_response = models.TextField(_("raw answer"), blank=True)
    created_at = models.DateTimeField(_("created at"), default=timezone.now)

    class Meta:
        ordering = ["created_at", "id"]
        verbose_name = _("model call")
        verbose_name_plural = _("model calls")
        indexes = [
            models.Index(fields=["session", "created_at"], name="llmcall_session"),
            models.Index(fields=["turn_id"], name="llmcall_turn"),
            # The metrics per prompt version read one agent's calls in a period.
            models.Index(fields=["agent", "purpose", "created_at"], name="llmcall_agent_period"),
        ]

    def __str__(self) -> str:
        return gettext("Model call #%(id)s (%(purpose)s)") % {
            "id": self.pk,
            "purpose": self.get_purpose_display(),
        }


class HandoffSummary(models.Model):
    """The operational summary generated when a session is handed to humans (DESIGN.md §10)."""

    session = models.ForeignKey(
        Session, on_delete=models.CASCADE, related_name="summaries", verbose_name=_("conversation")
    )
    closing_reason = models.CharField(_("closing reason"), max_length=255, blank=True)
    identified_service = models.CharField(_("identified service"), max_length=255, blank=True)
    segment = models.CharField(_("segment"), max_length=255, blank=True)
    key_points = models.JSONField(_("key points"), default=list, blank=True)
    collected_data = models.JSONField(_("collected data"), default=dict, blank=True)
    next_action = models.TextField(_("next action"), blank=True)
    summary_text = models.TextField(_("summary text"), blank=True)
    raw_json = models.TextField(_("raw JSON"), blank=True)
    error = models.CharField(_("error"), max_length=255, blank=True)
    model = models.CharField(_("model"), max_length=64, blank=True)
    created_at = models.DateTimeField(_("created at"), default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]
        get_latest_by = "created_at"
        verbose_name = _("handoff summary")
        verbose_name_plural = _("handoff summaries")
        indexes = [models.Index(fields=["session", "-created_at"], name="summary_session")]

    def __str__(self) -> str:
        return gettext("Summary of conversation #%(id)s") % {"id": self.session_id}


class SimulatedTurn(models.Model):
    """One customer message a staff member wrote on the simulator page, and what its turn did
    (simulator.simulation): the page shows these rows and polls the one in flight."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="+",
        verbose_name=_("user"),
    )
    session = models.ForeignKey(
        Session,
        on_delete=models.CASCADE,
        related_name="simulated_turns",
        verbose_name=_("conversation"),
    )
    inbound = models.ForeignKey(
        "Message", on_delete=models.CASCADE, related_name="+", verbose_name=_("message")
    )
    # The newest model call's id before the turn: the report counts the calls after it.
    after_call_id = models.PositiveBigIntegerField(_("last model call before"), default=0)
    prompt_overrides = models.JSONField(_("chosen drafts"), default=dict, blank=True)
    started_at = models.DateTimeField(_("started at"), default=timezone.now)
    finished_at = models.DateTimeField(_("finished at"), null=True, blank=True)
    # `simulator.simulation.TurnReport` as a dict; None until the turn ends or when it failed.
    report = models.JSONField(_("report"), null=True, blank=True)
    error = models.CharField(_("error"), max_length=255, blank=True)
    # The turn's own run (model calls included), not its wait in the queue.
    latency_ms = models.PositiveIntegerField(_("latency (ms)"), null=True, blank=True)

    class Meta:
        ordering = ["id"]
        verbose_name = _("simulated turn")
        verbose_name_plural = _("simulated turns")
        indexes = [models.Index(fields=["user", "-started_at"], name="simulated_turn_user")]
        constraints = [
            # One turn in flight per staff member, even for two POSTs at once.
            models.UniqueConstraint(
                fields=["user"],
                condition=models.Q(finished_at__isnull=True),
                name="simulated_turn_one_in_flight",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.session_id}: {self.pk}"


class CrmStatus(models.TextChoices):
    NOT_CONFIGURED = "not_configured", pgettext_lazy("CRM status", "not configured")
    PENDING = "pending", pgettext_lazy("CRM status", "pending")
    SENT = "sent", pgettext_lazy("CRM status", "sent")
    FAILED = "failed", pgettext_lazy("CRM status", "failed")


class Lead(models.Model):
    """A confirmed request (code 5): the collected data as the customer confirmed it."""

    session = models.OneToOneField(
        Session, on_delete=models.CASCADE, related_name="lead", verbose_name=_("conversation")
    )
    data = models.JSONField(_("data"), default=dict)
    crm_status = models.CharField(
        _("CRM status"), max_length=16, choices=CrmStatus.choices, default=CrmStatus.PENDING
    )
    crm_error = models.TextField(_("CRM error"), blank=True)
    crm_attempts = models.PositiveSmallIntegerField(_("CRM delivery attempts"), default=0)
    crm_sent_at = models.DateTimeField(_("sent to the CRM at"), null=True, blank=True)
    # The delivery's last activity (created, resent, attempted): the stale-leads sweep's clock.
    crm_updated_at = models.DateTimeField(_("last CRM delivery activity"), default=timezone.now)
    created_at = models.DateTimeField(_("created at"), default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = _("lead")
        verbose_name_plural = _("leads")
        permissions = [("export_lead", _("Can export leads"))]

    def __str__(self) -> str:
        return f"lead {self.session_id}"


class SurveyTrigger(models.TextChoices):
    """What asked the satisfaction question (conversations.satisfaction)."""

    STAFF_CLOSE = "staff_close", _("closed by staff")
    LEAD_CONFIRMED = "lead_confirmed", _("confirmed lead")


class SurveyNotSent(models.TextChoices):
    """Why a satisfaction question was due and not sent."""

    WINDOW_CLOSED = "window_closed", _("not sent: window closed")


class SatisfactionSurvey(models.Model):
    """The satisfaction question of one conversation (docs/decisions/0051-satisfaction-survey.md):
    asked once, when staff close it or after a confirmed lead, inside WhatsApp's 24-hour window;
    the customer's answer on the 1-5 scale with its time. A row whose `not_sent` is set records a
    question that was due when the window had closed already (`asked_at` stays empty)."""

    session = models.OneToOneField(
        Session,
        on_delete=models.CASCADE,
        related_name="satisfaction_survey",
        verbose_name=_("conversation"),
    )
    trigger = models.CharField(_("asked after"), max_length=16, choices=SurveyTrigger.choices)
    style = models.CharField(_("answers"), max_length=8, choices=SatisfactionStyle.choices)
    not_sent = models.CharField(
        _("not sent"), max_length=16, choices=SurveyNotSent.choices, blank=True
    )
    question = models.OneToOneField(
        "Message",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="satisfaction_question",
        verbose_name=_("question message"),
    )
    # Who closed the conversation (none after a confirmed lead) and why it had gone to the team,
    # as they were then: giving back or anonymising the session later changes neither.
    closed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("closed by"),
    )
    handoff_reason = models.CharField(
        _("handoff reason"), max_length=32, choices=HANDOFF_REASON_CHOICES, blank=True
    )
    created_at = models.DateTimeField(_("created at"), default=timezone.now)
    asked_at = models.DateTimeField(_("asked at"), null=True, blank=True)
    score = models.PositiveSmallIntegerField(_("score (1-5)"), null=True, blank=True)
    answered_at = models.DateTimeField(_("answered at"), null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = _("satisfaction survey")
        verbose_name_plural = _("satisfaction surveys")
        constraints = [
            models.CheckConstraint(
                condition=models.Q(score__isnull=True) | models.Q(score__gte=1, score__lte=5),
                name="satisfaction_score_1_to_5",
            ),
        ]
        indexes = [
            # The CSAT page reads a period of surveys.
            models.Index(fields=["created_at"], name="satisfaction_created"),
        ]

    def __str__(self) -> str:
        return gettext("Survey of conversation #%(id)s") % {"id": self.session_id}


class ProviderCircuit(models.Model):
    """The model provider's circuit breaker (agents/circuit.py), one row per provider, shared by
    every worker process; written only by `conversations.provider_circuit.DatabaseCircuitStore`."""

    name = models.CharField(_("provider"), max_length=32, primary_key=True)
    state = models.CharField(
        _("state"),
        max_length=16,
        choices=[
            (CircuitState.CLOSED.value, _("closed (calls go through)")),
            (CircuitState.OPEN.value, _("open (turns hand off at once)")),
            (CircuitState.HALF_OPEN.value, _("half-open (one probe call)")),
        ],
        default=CircuitState.CLOSED.value,
    )
    failures = models.PositiveIntegerField(_("provider failures in a row"), default=0)
    first_failure_at = models.DateTimeField(_("first failure at"), null=True, blank=True)
    opened_at = models.DateTimeField(_("opened at"), null=True, blank=True)
    probe_started_at = models.DateTimeField(_("probe started at"), null=True, blank=True)
    updated_at = models.DateTimeField(_("updated at"), auto_now=True)

    class Meta:
        verbose_name = _("model provider circuit")
        verbose_name_plural = _("model provider circuits")

    def __str__(self) -> str:
        return f"{self.name}: {self.state}"


class TemplateCategory(models.TextChoices):
    """Meta's categories of a message template (its price and rules depend on it)."""

    MARKETING = "MARKETING", _("marketing")
    UTILITY = "UTILITY", _("utility")
    AUTHENTICATION = "AUTHENTICATION", _("authentication")


class MessageTemplate(models.Model):
    """A WhatsApp message template approved by Meta, which staff may send outside the 24-hour
    customer service window.

    Synced from the WhatsApp Business Account of the instances (`waba_id`;
    `conversations.message_templates.message_templates_sync`): `name`, `language`, `category`
    and `components` as Meta has them, `body` the BODY component's text, `parameter_count` its
    {{1}}…{{n}}. A template Meta no longer lists as approved is deactivated, never deleted:
    the messages sent with it keep their history. A row with no `waba_id` was registered by
    hand (any instance may send it); `parameters` are the labels staff read for each {{n}}."""

    waba_id = models.CharField(
        _("WhatsApp Business Account ID"),
        max_length=32,
        blank=True,
        help_text=_("Empty: registered by hand, not synced from WhatsApp."),
    )
    name = models.CharField(
        _("template name"),
        max_length=512,
        validators=[
            RegexValidator(
                r"^[a-z0-9_]+$",
                _("Use the template's name as registered at Meta: lowercase, digits and _."),
            )
        ],
    )
    language = models.CharField(_("language"), max_length=16, default="pt_BR")
    category = models.CharField(
        _("category"), max_length=32, blank=True, choices=TemplateCategory.choices
    )
    body = models.TextField(
        _("body"),
        blank=True,
        help_text=_(
            "The approved text with {{1}}, {{2}}, … where the parameters go (shown to staff)."
        ),
    )
    components = models.JSONField(
        _("components"),
        default=list,
        blank=True,
        help_text=_("The template's header, body, footer and buttons as Meta sent them."),
    )
    parameter_count = models.PositiveSmallIntegerField(_("number of parameters"), default=0)
    parameters = models.JSONField(
        _("parameters"),
        default=list,
        blank=True,
        help_text=_('The label of each body parameter, in order, e.g. ["Nome", "Data"].'),
    )
    meta_template_id = models.CharField(_("Meta's template ID"), max_length=64, blank=True)
    meta_status = models.CharField(_("status at Meta"), max_length=32, blank=True)
    is_active = models.BooleanField(_("active"), default=True)
    synced_at = models.DateTimeField(_("last synced at"), null=True, blank=True)
    created_at = models.DateTimeField(_("created at"), default=timezone.now)

    class Meta:
        ordering = ["name", "language"]
        verbose_name = _("message template")
        verbose_name_plural = _("message templates")
        constraints = [
            models.UniqueConstraint(
                fields=["waba_id", "name", "language"], name="template_waba_name_language"
            )
        ]
        permissions = [
            ("sync_messagetemplate", _("Can sync the message templates from WhatsApp")),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.language})"
