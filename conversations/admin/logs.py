"""Read-only admins of the logs: messages, model calls, webhook deliveries, status events and
summaries. Nobody changes them from the admin, superusers included. (Leads: `admin.leads`.)
"""

import contextlib
import json
from typing import Any

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import FileResponse, Http404, HttpRequest
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html
from django.utils.translation import gettext_lazy as _

from agents.masking import PATTERNS_ONLY, KnownValues, Masker
from conversations.admin.failed_sends import FailedSendsFilter
from conversations.admin.masking import ModelT, PersonalDataMaskingMixin
from conversations.labels import delivery_label, event_text
from conversations.media import media_file_find
from conversations.models import (
    DeliveryStatusEvent,
    Direction,
    HandoffSummary,
    LLMCall,
    Message,
    WebhookDelivery,
)
from conversations.privacy.personal_data import can_view_personal_data
from whatsapp.payload import without_surrogates


class ReadOnlyAdmin(PersonalDataMaskingMixin[ModelT]):
    """A log: nobody adds, changes or deletes rows from the admin, superusers included.

    Staff without `conversations.view_personal_data` read it masked (`PersonalDataMaskingMixin`).
    """

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


# The customers' values a WhatsApp body carries: profile names and ids (numbers are masked by
# pattern anyway; the name is found nowhere else).
_WEBHOOK_NAME_KEYS = frozenset({"name", "formatted_name", "first_name", "last_name"})
_WEBHOOK_ID_KEYS = frozenset({"wa_id", "from", "to", "recipient_id", "user_id", "phone"})
# The company's own number and its id are not personal data: they stay readable.
_WEBHOOK_COMPANY_KEYS = frozenset({"display_phone_number", "phone_number_id"})


def webhook_masker(body: str) -> Masker:
    """A masker for one webhook body: the names and ids of its contacts are its known values."""
    try:
        payload = json.loads(body)
    except ValueError:
        return PATTERNS_ONLY
    names: list[str] = []
    ids: list[str] = []
    company: list[str] = []

    def walk(value: Any, key: str = "") -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, str(k))
        elif isinstance(value, list):
            for v in value:
                walk(v, key)
        elif isinstance(value, str) and value:
            if key in _WEBHOOK_NAME_KEYS:
                names.append(value)
            elif key in _WEBHOOK_ID_KEYS:
                ids.append(value)
            elif key in _WEBHOOK_COMPANY_KEYS:
                company.append(value)

    walk(payload)
    numbers = [i for i in ids if i.lstrip("+").isdigit()]
    others = [i for i in ids if not i.lstrip("+").isdigit()]
    return Masker(
        KnownValues(names=tuple(names), numbers=tuple(numbers), identifiers=tuple(others)),
        keep_numbers=company,
    )


MEDIA_URL_NAME = "conversations_message_media"


@admin.register(Message)
class MessageAdmin(ReadOnlyAdmin[Message]):
    list_display = (
        "id",
        "session_link",
        "direction",
        "agent",
        "short_content",
        "code",
        "error",
        "delivery",
        "created_at",
    )
    list_filter = ("direction", "agent", "delivery_status", FailedSendsFilter)
    # Who took a conversation over names its handoff event (`event_text`); whether the session
    # is simulated names a dry-run send's cause (`delivery`).
    list_select_related = ("staff_user", "session")
    # The stored status says "sent" for a send that never left the machine: `delivery` says it.
    exclude = ("delivery_status",)
    readonly_fields = ("delivery",)
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
        # A SYSTEM row's sentence is rendered from its code and parameters (conversations.labels).
        text = event_text(obj) if obj.direction == Direction.SYSTEM else obj.content
        return text if len(text) <= 80 else text[:79] + "…"

    @admin.display(description=_("delivery status"), ordering="delivery_status")
    def delivery(self, obj: Message) -> str:
        if obj.direction != Direction.OUTBOUND:
            return "—"
        return delivery_label(obj, simulated_session=obj.session.is_simulated)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Message]:
        return super().get_queryset(request).defer("raw_response")

    def get_urls(self) -> list[URLPattern]:
        # Before the admin's own `<path:object_id>/`, which would take it.
        view = self.admin_site.admin_view(self.media_view)
        media = path("<int:message_id>/media/", view, name=MEDIA_URL_NAME)
        return [media, *super().get_urls()]

    def media_view(self, request: HttpRequest, message_id: int) -> FileResponse:
        """The customer's media file: to staff who read conversations with personal data (a
        file cannot be masked); an image, audio or video inline, anything else a download, and
        nothing a browser would run as a page."""
        if request.method != "GET":
            raise PermissionDenied
        if not request.user.has_perm("conversations.view_session") or not can_view_personal_data(
            request.user
        ):
            raise PermissionDenied
        found = media_file_find(message_id)
        if found is None:
            raise Http404(_("This message has no downloaded media."))
        response = FileResponse(
            found.media.file.open("rb"),
            content_type=found.content_type,
            as_attachment=found.attachment,
            filename=found.filename,
        )
        response["X-Content-Type-Options"] = "nosniff"
        response["Content-Security-Policy"] = "sandbox; default-src 'none'"
        response["Cache-Control"] = "private, no-store"
        return response


@admin.register(LLMCall)
class LLMCallAdmin(ReadOnlyAdmin[LLMCall]):
    list_display = (
        "id",
        "session_link",
        "agent",
        "purpose",
        "model",
        "tokens_input",
        "cached_tokens",
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
class WebhookDeliveryAdmin(ReadOnlyAdmin[WebhookDelivery]):
    session_relation = None
    list_display = (
        "id",
        "received_at",
        "outcome",
        "messages_count",
        "statuses_count",
        "times_received",
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
        "times_received",
        "error",
        "headers_pretty",
        "body_pretty",
    )
    readonly_fields = ("headers_pretty", "body_pretty")

    class Media:
        css = {"all": ("conversations/admin/webhook_delivery.css",)}

    @admin.display(description=_("relevant headers"))
    def headers_pretty(self, obj: WebhookDelivery) -> str:
        return format_html(
            "<pre>{}</pre>", json.dumps(obj.headers, ensure_ascii=False, indent=2, sort_keys=True)
        )

    @admin.display(description=_("raw body"))
    def body_pretty(self, obj: WebhookDelivery) -> str:
        text = bytes(obj.raw_body).decode("utf-8", errors="replace")
        # Not JSON, or nested too deep to pretty-print (a RecursionError): shown as received.
        with contextlib.suppress(ValueError, RecursionError):
            text = json.dumps(json.loads(text), ensure_ascii=False, indent=2)
        # A lone surrogate ("\ud800" in the JSON) cannot be encoded in the UTF-8 response.
        text = without_surrogates(text)
        # Wrapped by a class (webhook_delivery.css): the CSP blocks a style attribute.
        return format_html('<pre class="raw-body">{}</pre>', text)

    def mask_row(self, obj: WebhookDelivery, maskers: dict[int, Masker]) -> WebhookDelivery:
        masked = super().mask_row(obj, maskers)
        if "raw_body" in obj.__dict__:  # the change page; the list defers the body
            text = bytes(obj.raw_body).decode("utf-8", errors="replace")
            masker = webhook_masker(text)
            masked.raw_body = masker.text(text).encode()
            masked.error = masker.text(obj.error)
        return masked

    def get_queryset(self, request: HttpRequest) -> QuerySet[WebhookDelivery]:
        # Bodies can be megabytes; the list never shows them.
        return super().get_queryset(request).defer("raw_body")


@admin.register(DeliveryStatusEvent)
class DeliveryStatusEventAdmin(ReadOnlyAdmin[DeliveryStatusEvent]):
    session_relation = None
    list_display = ("wa_message_id", "status", "error_code", "error_title", "created_at")
    list_filter = ("status",)
    search_fields = ("=wa_message_id",)
    show_full_result_count = False
    ordering = ("-id",)


@admin.register(HandoffSummary)
class HandoffSummaryAdmin(ReadOnlyAdmin[HandoffSummary]):
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
