"""Admin of the conversation store: instances, sessions (read as a chat) and the read-only logs.

Sessions are read-only here for now; the staff actions (take over, reply, give back, close,
regenerate the summary) come with a later issue. The message log, model calls, webhook
deliveries, status events, summaries and leads are read-only for everyone, superusers included.
"""

import contextlib
import json
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django import forms
from django.contrib import admin
from django.db.models import Count, Exists, OuterRef, Q, QuerySet, Sum
from django.http import HttpRequest
from django.urls import reverse
from django.utils import dateformat, timezone
from django.utils.formats import number_format
from django.utils.html import format_html
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from agents.parameters import ParameterSchemaError, parse_parameter_schema
from conversations.models import (
    AGENT_CHOICES,
    SUPERSEDED,
    DeliveryStatus,
    DeliveryStatusEvent,
    Direction,
    HandoffSummary,
    Instance,
    Lead,
    LLMCall,
    Message,
    Session,
    WebhookDelivery,
)
from knowledge_base.models import Segment, Service

# WhatsApp lets a business send free-form messages only within 24 h of the customer's last one.
CUSTOMER_SERVICE_WINDOW = timedelta(hours=24)
# The transcript shows the newest messages of a session; older ones are in the message log.
MAX_TRANSCRIPT_MESSAGES = 500
# Shorter terms would match most messages and could not use the trigram index on PostgreSQL.
MIN_MESSAGE_SEARCH_CHARS = 3
MAX_SEARCH_CHARS = 200
_NUMBER_PUNCTUATION = re.compile(r"[\s().+/-]")
# Plain dicts: Model.get_FOO_display() rebuilds its lookup on every call, 300 times a page.
AGENT_LABELS = dict(AGENT_CHOICES)
DELIVERY_LABELS = dict(DeliveryStatus.choices)

REGISTRATION_LABELS = {
    "nome": _("Name"),
    "email": _("E-mail"),
    "documento": _("Document (CPF/CNPJ)"),
    "empresa": _("Company"),
    "cidade": _("City"),
    "uf": _("State (UF)"),
    "telefone": _("Alternative phone"),
}


# --- Instances -----------------------------------------------------------------------------


class InstanceForm(forms.ModelForm):
    """The access token is write-only: a new one can be typed or the stored one removed."""

    new_access_token = forms.CharField(
        label=_("new access token"),
        required=False,
        strip=True,
        max_length=Instance._meta.get_field("access_token").max_length,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text=_("Leave empty to keep the current token. The stored token is never shown."),
    )
    clear_access_token = forms.BooleanField(
        label=_("remove the stored token"),
        required=False,
        help_text=_("The instance then sends with WHATSAPP_ACCESS_TOKEN."),
    )

    class Meta:
        model = Instance
        fields = [
            "name",
            "phone_number_id",
            "display_phone",
            "brand_context",
            "health_sensitive",
            "is_active",
        ]

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        if cleaned.get("new_access_token") and cleaned.get("clear_access_token"):
            raise forms.ValidationError(_("Either type a new token or remove it, not both."))
        return cleaned

    def save(self, commit: bool = True) -> Instance:
        if self.cleaned_data.get("clear_access_token"):
            self.instance.access_token = ""
        elif self.cleaned_data.get("new_access_token"):
            self.instance.access_token = self.cleaned_data["new_access_token"]
        return super().save(commit=commit)


@admin.register(Instance)
class InstanceAdmin(admin.ModelAdmin):
    form = InstanceForm
    list_display = (
        "name",
        "phone_number_id",
        "display_phone",
        "health_sensitive",
        "has_access_token",
        "is_active",
    )
    list_filter = ("is_active", "health_sensitive")
    search_fields = ("name", "phone_number_id", "display_phone")
    readonly_fields = ("has_access_token", "created_at")
    fieldsets = (
        (
            None,
            {
                "fields": (
                    "name",
                    "phone_number_id",
                    "display_phone",
                    "brand_context",
                    "health_sensitive",
                    "is_active",
                    "created_at",
                )
            },
        ),
        (
            _("Access token"),
            {"fields": ("has_access_token", "new_access_token", "clear_access_token")},
        ),
    )

    @admin.display(description=_("own access token"), boolean=True)
    def has_access_token(self, obj: Instance) -> bool:
        return bool(obj.access_token)

    def get_fieldsets(self, request: HttpRequest, obj: Instance | None = None) -> Any:
        if not self.has_change_permission(request, obj):
            # View-only users see whether a token is set, without the write-only fields.
            return (
                (None, self.fieldsets[0][1]),
                (_("Access token"), {"fields": ("has_access_token",)}),
            )
        return self.fieldsets


# --- Sessions: list and search -------------------------------------------------------------


def sessions_search(*, queryset: QuerySet[Session], term: str) -> QuerySet[Session]:
    """Sessions matching a staff search: name, phone, document, user id or a message's text.

    Message text is matched with one `EXISTS` subquery (no join, so no duplicate rows and no
    DISTINCT), only for terms of at least `MIN_MESSAGE_SEARCH_CHARS` characters.
    """
    term = term.strip()[:MAX_SEARCH_CHARS]
    if not term:
        return queryset
    condition = Q(customer_name__icontains=term) | Q(customer_user_id=term)
    if _NUMBER_PUNCTUATION.sub("", term).isdigit():
        # The term is a number, maybe written with punctuation: "(11) 91234-5678", "123.456.789-09".
        digits = re.sub(r"\D", "", term)
        condition |= Q(customer_phone__contains=digits) | Q(customer_document__startswith=digits)
    if len(term) >= MIN_MESSAGE_SEARCH_CHARS:
        condition |= Exists(Message.objects.filter(session=OuterRef("pk"), content__icontains=term))
    return queryset.filter(condition)


class SegmentFilter(admin.SimpleListFilter):
    """Segments from the catalog (one small query), not a DISTINCT over every session."""

    title = _("segment")
    parameter_name = "segment"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple[str, str]]:
        return [
            (code, f"{code} — {label}")
            for code, label in Segment.objects.order_by("code").values_list("code", "label")
        ]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Session]) -> QuerySet[Session]:
        if self.value():
            return queryset.filter(segment=self.value())
        return queryset


# --- Sessions: the transcript --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LLMCost:
    calls: int = 0
    tokens_input: int = 0
    tokens_output: int = 0
    latency_ms: int = 0

    @property
    def tokens(self) -> int:
        return self.tokens_input + self.tokens_output

    @property
    def display(self) -> dict[str, str]:
        """The numbers grouped by thousands in the active locale (1.234 in pt-BR)."""
        return {
            name: number_format(getattr(self, name), force_grouping=True)
            for name in ("calls", "tokens", "tokens_input", "tokens_output", "latency_ms")
        }

    def turn_text(self) -> str:
        numbers = self.display
        return ngettext(
            "turn: %(calls)s model call · %(tin)s tokens in, %(tout)s out · %(ms)s ms",
            "turn: %(calls)s model calls · %(tin)s tokens in, %(tout)s out · %(ms)s ms",
            self.calls,
        ) % {
            "calls": numbers["calls"],
            "tin": numbers["tokens_input"],
            "tout": numbers["tokens_output"],
            "ms": numbers["latency_ms"],
        }

    def __add__(self, other: "LLMCost") -> "LLMCost":
        return LLMCost(
            self.calls + other.calls,
            self.tokens_input + other.tokens_input,
            self.tokens_output + other.tokens_output,
            self.latency_ms + other.latency_ms,
        )


@dataclass(frozen=True, slots=True)
class TranscriptEntry:
    """One line of the chat, with its texts prepared here: a 300-message page stays fast."""

    message: Message
    side: str  # "customer", "bot", "staff" or "system"
    superseded: bool
    turn_cost: str  # on the last message of a turn that called the model; else ""
    who: str
    meta: str  # time, WhatsApp type, code and action
    delivery: str  # outbound only: the delivery status, its time, and any error
    delivery_failed: bool


@dataclass(frozen=True, slots=True)
class ServiceWindow:
    """WhatsApp's customer-service window: 24 h after the customer's last message."""

    last_inbound_at: datetime | None
    closes_at: datetime | None
    remaining: timedelta | None  # None when closed or never opened

    @property
    def is_open(self) -> bool:
        return self.remaining is not None

    @property
    def remaining_text(self) -> str:
        if self.remaining is None:
            return ""
        minutes = int(self.remaining.total_seconds() // 60)
        return f"{minutes // 60} h {minutes % 60:02d} min"


@dataclass(frozen=True, slots=True)
class DataRow:
    key: str
    label: str
    value: str


@dataclass(frozen=True, slots=True)
class SessionTranscript:
    entries: list[TranscriptEntry]
    omitted: bool  # older messages exist beyond MAX_TRANSCRIPT_MESSAGES
    total_cost: LLMCost
    window: ServiceWindow
    summary: HandoffSummary | None
    technical: list[DataRow]
    technical_extras: list[DataRow]
    registration: list[DataRow]
    registration_extras: list[DataRow]


def _format_value(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return str(_("yes") if value else _("no"))
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def _data_rows(data: Any, labels: dict[str, Any]) -> list[DataRow]:
    if not isinstance(data, dict):
        return [DataRow("", "", _format_value(data))] if data else []
    return [
        DataRow(str(key), str(labels.get(key, key)), _format_value(value))
        for key, value in data.items()
    ]


def _parameter_labels(service_code: str) -> dict[str, Any]:
    if not service_code:
        return {}
    schema = (
        Service.objects.filter(code=service_code)
        .order_by()
        .values_list("parameter_schema", flat=True)
        .first()
    )
    try:
        return {spec.name: spec.label for spec in parse_parameter_schema(schema)}
    except ParameterSchemaError:
        return {}


def _side(message: Message) -> str:
    if message.direction == Direction.INBOUND:
        return "customer"
    if message.direction == Direction.SYSTEM:
        return "system"
    return "staff" if message.staff_user_id else "bot"


def _entry(message: Message, *, session: Session, turn_cost: LLMCost | None) -> TranscriptEntry:
    side = _side(message)
    superseded = message.error == SUPERSEDED
    if side == "customer":
        who = session.customer_name or str(_("Customer"))
    elif side == "staff":
        who = str(_("Staff")) + f" · {message.staff_user.get_username()}"
    else:
        agent = AGENT_LABELS.get(message.agent, message.agent)
        who = str(_("Bot")) + (f" · {agent}" if message.agent else "")
    when = dateformat.format(timezone.localtime(message.created_at), "d/m H:i:s")
    meta = [when]
    if message.message_type != "text":
        meta.append(message.message_type)
    if message.code is not None:
        meta.append(f"s={message.code}")
    if message.action:
        meta.append(message.action)
    delivery: list[str] = []
    failed = False
    if message.direction == Direction.OUTBOUND and not superseded:
        status = str(DELIVERY_LABELS.get(message.delivery_status) or _("not sent yet"))
        if message.delivery_status_at:
            status += " " + dateformat.format(
                timezone.localtime(message.delivery_status_at), "H:i:s"
            )
        delivery.append(status)
        if message.delivery_error_code or message.delivery_error_title:
            code = message.delivery_error_code or ""
            error = str(_("error"))
            delivery.append(f"{error} {code} {message.delivery_error_title}".strip())
        failed = message.delivery_status == DeliveryStatus.FAILED
    if message.error and not superseded:
        delivery.append(message.error)
        failed = True
    return TranscriptEntry(
        message=message,
        side=side,
        superseded=superseded,
        turn_cost=turn_cost.turn_text() if turn_cost else "",
        who=who,
        meta=" · ".join(meta),
        delivery=" · ".join(delivery),
        delivery_failed=failed,
    )


def session_transcript(*, session: Session, now: datetime) -> SessionTranscript:
    """Everything the session page shows, in a fixed number of queries whatever its length."""
    newest_first = list(
        session.messages.select_related("staff_user")
        .defer("raw_response")
        .order_by("-created_at", "-id")[: MAX_TRANSCRIPT_MESSAGES + 1]
    )
    omitted = len(newest_first) > MAX_TRANSCRIPT_MESSAGES
    messages = newest_first[:MAX_TRANSCRIPT_MESSAGES][::-1]

    costs = {
        row["turn_id"]: LLMCost(
            row["calls"], row["tokens_input"], row["tokens_output"], row["latency_ms"]
        )
        for row in LLMCall.objects.filter(session=session)
        .order_by()
        .values("turn_id")
        .annotate(
            calls=Count("id"),
            tokens_input=Sum("tokens_input"),
            tokens_output=Sum("tokens_output"),
            latency_ms=Sum("latency_ms"),
        )
    }
    total_cost = sum(costs.values(), LLMCost())

    last_of_turn = {m.turn_id: m.pk for m in messages if m.turn_id is not None}
    entries = [
        _entry(
            m,
            session=session,
            turn_cost=costs.get(m.turn_id) if last_of_turn.get(m.turn_id) == m.pk else None,
        )
        for m in messages
    ]

    inbound_times = [
        m.wa_timestamp or m.created_at for m in messages if m.direction == Direction.INBOUND
    ]
    last_inbound = max([*inbound_times, *filter(None, [session.last_inbound_at])], default=None)
    closes_at = last_inbound + CUSTOMER_SERVICE_WINDOW if last_inbound else None
    window = ServiceWindow(
        last_inbound_at=last_inbound,
        closes_at=closes_at,
        remaining=closes_at - now if closes_at and closes_at > now else None,
    )

    summary = session.summaries.order_by("-created_at", "-id").first()
    parameter_labels = _parameter_labels(session.service)
    return SessionTranscript(
        entries=entries,
        omitted=omitted,
        total_cost=total_cost,
        window=window,
        summary=summary,
        technical=_data_rows(session.technical_data, parameter_labels),
        technical_extras=_data_rows(session.technical_extras, {}),
        registration=_data_rows(session.registration_data, REGISTRATION_LABELS),
        registration_extras=_data_rows(session.registration_extras, {}),
    )


# --- Sessions: admin -----------------------------------------------------------------------


@admin.register(Session)
class SessionAdmin(admin.ModelAdmin):
    list_display = (
        "customer",
        "instance",
        "state",
        "segment",
        "service",
        "last_inbound_at",
        "handoff_reason",
    )
    list_filter = (
        "state",
        "instance",
        SegmentFilter,
        "handoff_reason",
        ("last_message_at", admin.DateFieldListFilter),
    )
    # The search itself is `sessions_search`; this only turns the search box on.
    search_fields = ("customer_name",)
    search_help_text = _(
        "Phone, name, CPF/CNPJ, user id, or a text from the conversation (3+ characters)."
    )
    list_select_related = ("instance",)
    show_full_result_count = False
    list_per_page = 50
    fieldsets = (
        (
            _("Customer"),
            {
                "fields": (
                    "instance",
                    "customer_name",
                    "customer_phone",
                    "customer_user_id",
                    "customer_document",
                )
            },
        ),
        (
            _("Attendance"),
            {
                "fields": (
                    "state",
                    "segment",
                    "intent",
                    "service",
                    "loaded_packages",
                    "handoff_reason",
                    "handoff_detail",
                )
            },
        ),
        (
            _("Times"),
            {
                "fields": (
                    "created_at",
                    "last_inbound_at",
                    "last_message_at",
                    "handed_off_at",
                    "closed_at",
                )
            },
        ),
        (
            _("Processing"),
            {
                "classes": ("collapse",),
                "fields": ("lease_token", "lease_expires_at", "updated_at"),
            },
        ),
    )

    @admin.display(description=_("customer"), ordering="customer_name")
    def customer(self, obj: Session) -> str:
        phone = f"+{obj.customer_phone}" if obj.customer_phone else obj.customer_user_id
        if obj.customer_name and phone:
            return f"{obj.customer_name} ({phone})"
        return obj.customer_name or phone or "?"

    def get_queryset(self, request: HttpRequest) -> QuerySet[Session]:
        return super().get_queryset(request).select_related("instance")

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Session], search_term: str
    ) -> tuple[QuerySet[Session], bool]:
        return sessions_search(queryset=queryset, term=search_term), False

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Session | None = None) -> bool:
        # Read-only until the staff actions arrive; they are use cases, not field edits.
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Session | None = None) -> bool:
        # Deleting a session would delete its message log.
        return False

    def render_change_form(
        self,
        request: HttpRequest,
        context: dict[str, Any],
        add: bool = False,
        change: bool = False,
        form_url: str = "",
        obj: Session | None = None,
    ) -> Any:
        if obj is not None:
            context["transcript"] = session_transcript(session=obj, now=timezone.now())
            context["message_log_url"] = (
                reverse("admin:conversations_message_changelist") + f"?session__id__exact={obj.pk}"
            )
        return super().render_change_form(request, context, add, change, form_url, obj)


# --- Read-only logs ------------------------------------------------------------------------


class ReadOnlyAdmin(admin.ModelAdmin):
    """A log: nobody adds, changes or deletes rows from the admin, superusers included."""

    actions: list[Any] = []

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


def _session_link(session_id: int) -> str:
    url = reverse("admin:conversations_session_change", args=[session_id])
    return format_html('<a href="{}">#{}</a>', url, session_id)


@admin.register(Message)
class MessageAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "session_link",
        "direction",
        "agent",
        "short_content",
        "code",
        "error",
        "delivery_status",
        "created_at",
    )
    list_filter = ("direction", "agent", "delivery_status")
    search_fields = ("=wa_message_id",)
    search_help_text = _("Exact WhatsApp message id (wamid).")
    show_full_result_count = False
    # The primary key follows creation order and is indexed; created_at alone is not.
    ordering = ("-id",)

    @admin.display(description=_("conversation"), ordering="session_id")
    def session_link(self, obj: Message) -> str:
        return _session_link(obj.session_id)

    @admin.display(description=_("content"))
    def short_content(self, obj: Message) -> str:
        return obj.content if len(obj.content) <= 80 else obj.content[:79] + "…"

    def get_queryset(self, request: HttpRequest) -> QuerySet[Message]:
        return super().get_queryset(request).defer("raw_response")


@admin.register(LLMCall)
class LLMCallAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "session_link",
        "agent",
        "purpose",
        "model",
        "tokens_input",
        "tokens_output",
        "latency_ms",
        "attempts",
        "outcome",
        "prompt_version",
        "created_at",
    )
    list_filter = ("purpose", "agent", "outcome")
    show_full_result_count = False
    ordering = ("-id",)

    @admin.display(description=_("conversation"), ordering="session_id")
    def session_link(self, obj: LLMCall) -> str:
        return _session_link(obj.session_id)

    def get_queryset(self, request: HttpRequest) -> QuerySet[LLMCall]:
        return super().get_queryset(request).defer("context_snapshot", "raw_response")


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "received_at",
        "outcome",
        "messages_count",
        "statuses_count",
        "processed_at",
    )
    list_filter = ("outcome", ("received_at", admin.DateFieldListFilter))
    show_full_result_count = False
    fields = (
        "received_at",
        "processed_at",
        "outcome",
        "messages_count",
        "statuses_count",
        "error",
        "headers_pretty",
        "body_pretty",
    )
    readonly_fields = ("headers_pretty", "body_pretty")

    @admin.display(description=_("relevant headers"))
    def headers_pretty(self, obj: WebhookDelivery) -> str:
        return format_html(
            "<pre>{}</pre>", json.dumps(obj.headers, ensure_ascii=False, indent=2, sort_keys=True)
        )

    @admin.display(description=_("raw body"))
    def body_pretty(self, obj: WebhookDelivery) -> str:
        text = bytes(obj.raw_body).decode("utf-8", errors="replace")
        with contextlib.suppress(ValueError):  # not JSON: shown as received
            text = json.dumps(json.loads(text), ensure_ascii=False, indent=2)
        return format_html('<pre style="white-space: pre-wrap">{}</pre>', text)

    def get_queryset(self, request: HttpRequest) -> QuerySet[WebhookDelivery]:
        # Bodies can be megabytes; the list never shows them.
        return super().get_queryset(request).defer("raw_body")


@admin.register(DeliveryStatusEvent)
class DeliveryStatusEventAdmin(ReadOnlyAdmin):
    list_display = ("wa_message_id", "status", "error_code", "error_title", "created_at")
    list_filter = ("status",)
    search_fields = ("=wa_message_id",)
    show_full_result_count = False
    ordering = ("-id",)


@admin.register(HandoffSummary)
class HandoffSummaryAdmin(ReadOnlyAdmin):
    list_display = (
        "session_link",
        "closing_reason",
        "identified_service",
        "segment",
        "error",
        "created_at",
    )
    show_full_result_count = False

    @admin.display(description=_("conversation"), ordering="session_id")
    def session_link(self, obj: HandoffSummary) -> str:
        return _session_link(obj.session_id)


@admin.register(Lead)
class LeadAdmin(ReadOnlyAdmin):
    list_display = ("session_link", "crm_status", "created_at")
    list_filter = ("crm_status",)
    show_full_result_count = False

    @admin.display(description=_("conversation"), ordering="session_id")
    def session_link(self, obj: Lead) -> str:
        return _session_link(obj.session_id)
