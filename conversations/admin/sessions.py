"""Admin of the sessions: the list, its filters and search, and the change view with the chat."""

import re
from typing import Any

from django.contrib import admin, messages
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.http import HttpRequest
from django.urls import URLPattern, URLResolver, reverse
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from agents.masking import contains_personal_data
from conversations.admin.failed_sends import SessionFailedSendsFilter
from conversations.admin.masking import PersonalDataMaskingMixin
from conversations.admin.queue import queue_urls
from conversations.admin.transcript import session_transcript
from conversations.models import Message, Session
from conversations.personal_data import masker_of
from knowledge_base.models import Segment

# Shorter terms would match most messages and could not use the trigram index on PostgreSQL.
MIN_MESSAGE_SEARCH_CHARS = 3
MAX_SEARCH_CHARS = 200
_NUMBER_PUNCTUATION = re.compile(r"[\s().+/-]")
# Staff who may not read personal data search the conversations' text only, and not for a
# number of this many digits or more (part of a phone or document) nor an e-mail.
MAX_DIGITS_WITHOUT_PERSONAL_DATA = 3


# --- Sessions: list and search -------------------------------------------------------------


def is_personal_data_search(term: str) -> bool:
    """Whether a search term looks for a person: an e-mail, or a number long enough to be
    part of a phone or a document."""
    term = term.strip()[:MAX_SEARCH_CHARS]
    digits = sum(c.isdigit() for c in term)
    return "@" in term or digits > MAX_DIGITS_WITHOUT_PERSONAL_DATA or contains_personal_data(term)


def sessions_search(
    *, queryset: QuerySet[Session], term: str, personal_data: bool = True
) -> QuerySet[Session]:
    """Sessions matching a staff search: name, phone, document, user id or a message's text;
    with `personal_data=False`, a message's text only (the caller refuses personal terms).

    Message text is matched with one `EXISTS` subquery (no join, so no duplicate rows and no
    DISTINCT), only for terms of at least `MIN_MESSAGE_SEARCH_CHARS` characters.
    """
    term = term.strip()[:MAX_SEARCH_CHARS]
    if not term:
        return queryset
    if not personal_data:
        if len(term) < MIN_MESSAGE_SEARCH_CHARS:
            return queryset.none()
        return queryset.filter(
            Exists(Message.objects.filter(session=OuterRef("pk"), content__icontains=term))
        )
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


# --- Sessions: admin -----------------------------------------------------------------------


@admin.register(Session)
class SessionAdmin(PersonalDataMaskingMixin, admin.ModelAdmin):
    session_relation = None
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
        SessionFailedSendsFilter,
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
                "fields": ("lease_token", "lease_expires_at", "turn_queued_at", "updated_at"),
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

    def get_urls(self) -> list[URLPattern | URLResolver]:
        return [*queue_urls(self), *super().get_urls()]

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Session], search_term: str
    ) -> tuple[QuerySet[Session], bool]:
        if not self.masks_personal_data(request):
            return sessions_search(queryset=queryset, term=search_term), False
        # Without the permission a search could tell whether a given person talked to us:
        # only the conversations' text is searched, and not for personal data.
        if is_personal_data_search(search_term):
            self.message_user(
                request,
                _(
                    "Searching by phone, document, e-mail or long numbers needs permission to "
                    "view personal data. Search the conversations' text instead."
                ),
                messages.WARNING,
            )
            return queryset.none(), False
        return sessions_search(queryset=queryset, term=search_term, personal_data=False), False

    def get_changelist_instance(self, request: HttpRequest) -> Any:
        changelist = super().get_changelist_instance(request)
        if self.masks_personal_data(request):
            changelist.search_help_text = _("A text from the conversation (3+ characters).")
        return changelist

    @admin.display(description=_("customer"))
    def masked_customer(self, obj: Session) -> str:
        """The customer column without its ordering: sorting by name (even `?o=0` typed in the
        URL) would reveal the order of names that are shown masked."""
        return self.customer(obj)

    def get_list_display(self, request: HttpRequest) -> Any:
        columns = super().get_list_display(request)
        if self.masks_personal_data(request):
            return tuple("masked_customer" if c == "customer" else c for c in columns)
        return columns

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
            context["transcript"] = session_transcript(
                session=obj, now=timezone.now(), masker=masker_of(obj)
            )
            context["message_log_url"] = (
                reverse("admin:conversations_message_changelist") + f"?session__id__exact={obj.pk}"
            )
        return super().render_change_form(request, context, add, change, form_url, obj)
