"""Admin of the sessions: the list, its filters and search, and the change view with the chat."""

import re
from collections.abc import Callable
from typing import Any

from django.contrib import admin, messages
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.db.models.expressions import Combinable
from django.http import HttpRequest
from django.urls import URLPattern, reverse
from django.utils import timezone
from django.utils.formats import date_format
from django.utils.html import escape, format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe
from django.utils.text import capfirst
from django.utils.translation import gettext_lazy as _

from agents.masking import contains_personal_data
from agents.phones import customer_phone_key, format_phone
from conversations.admin.customer_data import CUSTOMER_DATA_URL_NAME, customer_data_urls
from conversations.admin.display import format_document
from conversations.admin.failed_sends import SessionFailedSendsFilter
from conversations.admin.masking import PersonalDataMaskingMixin
from conversations.labels import (
    handoff_explanation,
    handoff_label,
    prompt_versions_lines,
    release_label,
)
from conversations.models import Message, Session
from conversations.privacy.customer_data import can_request_customer_data
from conversations.privacy.personal_data import masker_of
from knowledge_base.models import Segment
from prompts_admin.selectors import override_ids_of
from support.admin.labels import LabelFilter, labels_panel
from support.admin.live import LIVE_URL_NAME, live_urls
from support.admin.notes import NOTE_URL_NAME
from support.admin.queue import queue_urls
from support.admin.quick_replies import QUICK_REPLIES_URL_NAME
from support.admin.staff_actions import staff_action_urls, staff_actions_panel
from support.admin.template_picker import template_picker_for
from support.admin.transcript import can_save_cases, session_transcript
from support.notes import note_mentions_seen
from support.staff_actions import can_attend

# Shorter terms would match most messages and could not use the trigram index on PostgreSQL.
MIN_MESSAGE_SEARCH_CHARS = 3
MAX_SEARCH_CHARS = 200
_NUMBER_PUNCTUATION = re.compile(r"[\s().+/-]")
# Prompt editors read the technical details (tokens, latency, codes, model) as superusers do;
# Support finds them behind "Detalhes técnicos".
TECHNICAL_READER_PERMISSION = "prompts_admin.change_promptoverride"

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
    condition: Q | Combinable = Q(customer_name__icontains=term) | Q(customer_user_id=term)
    if (number := _NUMBER_PUNCTUATION.sub("", term)).isascii() and number.isdigit():
        # The term is a number, maybe written with punctuation: "(11) 91234-5678", "123.456.789-09".
        digits = re.sub(r"\D", "", term)
        condition |= Q(customer_phone__contains=digits) | Q(customer_document__startswith=digits)
        # The whole number in the customer's other form (a Brazilian mobile's ninth digit).
        condition |= Q(customer_phone_key=customer_phone_key(digits))
    if len(term) >= MIN_MESSAGE_SEARCH_CHARS:
        condition |= Exists(Message.objects.filter(session=OuterRef("pk"), content__icontains=term))
    return queryset.filter(condition)


class SegmentFilter(admin.SimpleListFilter):
    """Segments from the catalog (one small query), not a DISTINCT over every session."""

    title = _("segment")
    parameter_name = "segment"

    def lookups(
        self, request: HttpRequest, model_admin: admin.ModelAdmin[Session]
    ) -> list[tuple[str, str]]:
        return [
            (code, f"{code} — {label}")
            for code, label in Segment.objects.order_by("code").values_list("code", "label")
        ]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Session]) -> QuerySet[Session]:
        if self.value():
            return queryset.filter(segment=self.value())
        return queryset


def breakable_code(code: str) -> SafeString:
    """A catalog code (``ANALISE_AGUA_POTABILIDADE``), escaped, that may wrap after its
    underscores in a narrow column, and nowhere else."""
    return mark_safe("_<wbr>".join(escape(part) for part in code.split("_")))


# --- Sessions: admin -----------------------------------------------------------------------


class SessionAdminUrls:
    """Pages of other apps hosted under the session admin's URLs (``/admin/conversations/
    session/<page>/``, names ``admin:conversations_session_<page>``): an app above this one
    registers its own from its ``AppConfig.ready`` (the simulator), so this module never
    imports it."""

    def __init__(self) -> None:
        self._sources: list[Callable[[admin.ModelAdmin[Session]], list[URLPattern]]] = []

    def register(self, urls: Callable[[admin.ModelAdmin[Session]], list[URLPattern]]) -> None:
        if urls not in self._sources:
            self._sources.append(urls)

    def patterns(self, model_admin: admin.ModelAdmin[Session]) -> list[URLPattern]:
        return [pattern for urls in self._sources for pattern in urls(model_admin)]


session_admin_urls = SessionAdminUrls()


@admin.register(Session)
class SessionAdmin(PersonalDataMaskingMixin[Session]):
    session_relation = None
    # Fits a 1,366-pixel screen with the sidebar open: the instance by its name, times short,
    # long catalog codes wrapped (support/admin/session_list.css).
    list_display = (
        "customer",
        "instance_name",
        "state",
        "segment_code",
        "service_code",
        "last_inbound",
        "handoff",
    )
    list_filter = (
        "state",
        "instance",
        SegmentFilter,
        "handoff_reason",
        LabelFilter,
        ("last_message_at", admin.DateFieldListFilter),
        SessionFailedSendsFilter,
        "is_simulated",
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
                    "document",
                    "is_simulated",
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
                    "handoff",
                    "handoff_explanation",
                    "prompts",
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
                # The handoff's machine detail (a parser error, an HTTP status), for engineers.
                "fields": (
                    "handoff_detail",
                    "lease_token",
                    "lease_expires_at",
                    "turn_queued_at",
                    "updated_at",
                ),
            },
        ),
    )

    readonly_fields = ("document", "handoff", "handoff_explanation", "prompts")

    class Media:
        css = {"all": ("support/admin/session_list.css", "support/admin/notes.css")}

    @admin.display(description=_("segment"), ordering="segment")
    def segment_code(self, obj: Session) -> SafeString:
        return breakable_code(obj.segment)

    @admin.display(description=_("service"), ordering="service")
    def service_code(self, obj: Session) -> SafeString:
        return breakable_code(obj.service)

    @admin.display(description=_("instance"), ordering="instance__name")
    def instance_name(self, obj: Session) -> str:
        return obj.instance.name

    @admin.display(description=_("customer's last message"), ordering="last_inbound_at")
    def last_inbound(self, obj: Session) -> str:
        if obj.last_inbound_at is None:
            return "—"
        return date_format(timezone.localtime(obj.last_inbound_at), "SHORT_DATETIME_FORMAT")

    @admin.display(description=_("document (CPF/CNPJ)"))
    def document(self, obj: Session) -> str:
        return format_document(obj.customer_document) if obj.customer_document else "—"

    @admin.display(description=_("handoff reason"), ordering="handoff_reason")
    def handoff(self, obj: Session) -> str:
        """The reason's label; a model handoff by its motive ("cliente pediu um atendente")."""
        return capfirst(handoff_label(obj.handoff_reason, obj.handoff_detail)) or "—"

    @admin.display(description=_("handoff detail"))
    def handoff_explanation(self, obj: Session) -> str:
        return handoff_explanation(obj.handoff_reason, obj.handoff_detail) or "—"

    @admin.display(description=_("prompt versions"))
    def prompts(self, obj: Session) -> str:
        """The versions the conversation keeps, per agent ("Triagem: override #12 (versão 345)"),
        and the release it pinned with them ("Publicação #3 — Março"); one query for the
        override ids, none when every agent is on the built-in prompt, and one for the release
        when it pinned one."""
        versions = obj.prompt_versions or {}
        if not versions:
            return str(_("Not pinned yet: the conversation's first turn pins the active prompts."))
        lines = prompt_versions_lines(versions, override_ids_of(map(str, versions.values())))
        shown = format_html_join(mark_safe("<br>"), "{}: {}", lines)
        if obj.release is None:
            return shown
        return format_html("{}<br>{}", shown, release_label(obj.release.pk, obj.release.name))

    @admin.display(description=_("customer"), ordering="customer_name")
    def customer(self, obj: Session) -> str:
        phone = format_phone(obj.customer_phone) if obj.customer_phone else obj.customer_user_id
        if obj.customer_name and phone:
            return f"{obj.customer_name} ({phone})"
        return obj.customer_name or phone or "?"

    def get_queryset(self, request: HttpRequest) -> QuerySet[Session]:
        return super().get_queryset(request).select_related("instance")

    def get_urls(self) -> list[URLPattern]:
        # Before the admin's own `<path:object_id>/`, which would take them.
        return [
            *queue_urls(self),
            *customer_data_urls(self),
            *session_admin_urls.patterns(self),
            *staff_action_urls(self),
            *live_urls(self),
            *super().get_urls(),
        ]

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

    def changelist_view(self, request: HttpRequest, extra_context: Any = None) -> Any:
        if can_request_customer_data(request.user):
            extra_context = {
                **(extra_context or {}),
                "customer_data_url": reverse(f"admin:{CUSTOMER_DATA_URL_NAME}"),
            }
        return super().changelist_view(request, extra_context)

    def get_changelist_instance(self, request: HttpRequest) -> Any:
        changelist = super().get_changelist_instance(request)
        if self.masks_personal_data(request):
            changelist.search_help_text = str(_("A text from the conversation (3+ characters)."))
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
        # Fields are never edited here: staff act through the staff actions (use cases with
        # their own permission, support.admin.staff_actions).
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
            now = timezone.now()
            context["transcript"] = session_transcript(session=obj, now=now, masker=masker_of(obj))
            context["staff_actions"] = staff_actions_panel(session=obj, user=request.user, now=now)
            context["template_picker"] = template_picker_for(
                session=obj, user=request.user, now=now
            )
            context["live_url"] = reverse(f"admin:{LIVE_URL_NAME}", args=[obj.pk])
            if can_attend(request.user) and request.user.pk is not None:
                context["note_url"] = reverse(f"admin:{NOTE_URL_NAME}", args=[obj.pk])
                # Opening the conversation is reading its notes: its mentions of the reader
                # are no longer pending.
                note_mentions_seen(session_id=obj.pk, user_id=request.user.pk, now=now)
            # The labels box and the composer's "/" (quick_replies.js): for staff who attend.
            context["labels_panel"] = labels_panel(session=obj, user=request.user)
            if context["labels_panel"] is not None:
                context["quick_replies_url"] = reverse(
                    f"admin:{QUICK_REPLIES_URL_NAME}", args=[obj.pk]
                )
            context["message_log_url"] = (
                reverse("admin:conversations_message_changelist") + f"?session__id__exact={obj.pk}"
            )
            if can_request_customer_data(request.user) and obj.anonymised_at is None:
                context["customer_data_url"] = (
                    reverse(f"admin:{CUSTOMER_DATA_URL_NAME}") + f"?session={obj.pk}"
                )
            context.update(self.workspace_context(request, obj))
        return super().render_change_form(request, context, add, change, form_url, obj)

    def workspace_context(self, request: HttpRequest, obj: Session) -> dict[str, Any]:
        """What the workspace shows beside the transcript (`obj` masked as the page): technical
        details open for superusers and prompt editors, closed for Support; the record's raw
        fields for superusers only."""
        user = request.user
        return {
            "llm_calls_url": (
                reverse("admin:conversations_llmcall_changelist") + f"?session__id__exact={obj.pk}"
            ),
            "show_technical": user.is_superuser or user.has_perm(TECHNICAL_READER_PERMISSION),
            "show_raw_fields": user.is_superuser,
            "can_save_case": can_save_cases(user),
            "customer_panel": {
                "name": obj.customer_name or "—",
                "phone": format_phone(obj.customer_phone) if obj.customer_phone else "—",
                "instance": obj.instance.name,
                "document": self.document(obj),
            },
            "prompt_versions": self.prompts(obj),
        }
