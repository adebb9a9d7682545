"""The leads' admin: who asked for what, the confirmed data as a table, export and resend.

- **List**: name, company, service, segment, created, CRM status. The catalog's names (services,
  segments, intentions) are read once per request, whatever the number of rows.
- **Page**: the confirmed data as labelled tables — the registration with the admin's labels, the
  request with the catalog's names, the technical data with the service schema's labels, yes/no
  for booleans, CPF/CNPJ formatted — a link to the conversation and the CRM delivery's state. No
  raw JSON.
- **Actions**, for staff with `conversations.export_lead` (Support; not prompt editors, who do
  not see them, and whose crafted POST is refused with 403): ``export_csv`` — UTF-8 with a BOM,
  ``;`` between fields, pt-BR headers, so it opens right in a pt-BR spreadsheet, every cell
  that a spreadsheet would run as a formula written as text (`spreadsheet_text`) — and
  ``resend_to_crm`` (`support.crm.leads_resend`).

Staff without `conversations.view_personal_data` read the list, the page and the export masked
(names, e-mails, documents, phones: `conversations.admin.masking`); Support has both permissions,
so its export carries the data the CRM needs. A simulated conversation's lead is not listed,
exported or resent.
"""

import csv
import io
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import dateformat, timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext

from agents.masking import Masker
from agents.parameters import ParameterSchemaError, parse_parameter_schema
from conversations.admin.logs import ReadOnlyAdmin
from conversations.labels import moment_text
from conversations.models import Lead
from conversations.privacy.personal_data import can_view_personal_data, masked_row
from knowledge_base.models import Intent, Segment, Service
from support.admin.transcript import REGISTRATION_LABELS
from support.crm import leads_resend
from support.tasks import enqueue_lead_delivery

EXPORT_LEAD = "conversations.export_lead"
# Where a listed row keeps the catalog's names of its request (`LeadAdmin.get_changelist_instance`).
_NAMES = "_catalog_names"
_REGISTRATION_ORDER = ("nome", "email", "documento", "empresa", "cidade", "uf", "telefone")


# --- Reading a lead's data ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CatalogNames:
    """The catalog's display names by code, and each service's parameter labels."""

    segments: dict[str, str]
    intents: dict[str, str]
    services: dict[str, str]
    parameters: dict[str, dict[str, str]]

    @classmethod
    def load(cls) -> "CatalogNames":
        parameters: dict[str, dict[str, str]] = {}
        services: dict[str, str] = {}
        for code, label, schema in Service.objects.values_list("code", "label", "parameter_schema"):
            services[code] = label
            try:
                parameters[code] = {s.name: s.label for s in parse_parameter_schema(schema)}
            except ParameterSchemaError:
                parameters[code] = {}
        return cls(
            segments=dict(Segment.objects.values_list("code", "label")),
            intents=dict(Intent.objects.values_list("code", "label")),
            services=services,
            parameters=parameters,
        )


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def registration(lead: Lead) -> dict[str, Any]:
    return _dict(_dict(lead.data).get("cadastro"))


def customer_name(lead: Lead) -> str:
    data = _dict(lead.data)
    return _text(registration(lead).get("nome")) or _text(data.get("nome_cliente"))


def format_document(value: str) -> str:
    """A CPF or a CNPJ with its punctuation; anything else (a masked value) as it is."""
    if value.isdigit() and len(value) == 11:
        return f"{value[:3]}.{value[3:6]}.{value[6:9]}-{value[9:]}"
    if value.isdigit() and len(value) == 14:
        return f"{value[:2]}.{value[2:5]}.{value[5:8]}/{value[8:12]}-{value[12:]}"
    return value


def display_value(value: Any) -> str:
    """A collected value as staff read it: sim/não, lists joined, nothing as a dash."""
    if value is None or value == "":
        return "—"
    if isinstance(value, bool):
        return _("yes") if value else _("no")
    if isinstance(value, list):
        return ", ".join(display_value(v) for v in value)
    if isinstance(value, dict):
        return "; ".join(f"{k}: {display_value(v)}" for k, v in value.items())
    return str(value)


def registration_rows(lead: Lead) -> list[tuple[str, str]]:
    data = registration(lead)
    keys = [k for k in _REGISTRATION_ORDER if k in data] + sorted(
        k for k in data if k not in _REGISTRATION_ORDER
    )
    return [
        (
            str(REGISTRATION_LABELS.get(key, key)),
            format_document(_text(data[key])) if key == "documento" else display_value(data[key]),
        )
        for key in keys
    ]


def request_rows(lead: Lead, names: CatalogNames) -> list[tuple[str, str]]:
    data = _dict(lead.data)

    def named(table: dict[str, str], code: Any) -> str:
        code = _text(code)
        return f"{table[code]} ({code})" if code in table else display_value(code)

    return [
        (_("WhatsApp phone"), display_value(data.get("telefone"))),
        (_("Segment"), named(names.segments, data.get("segmento"))),
        (_("Intention"), named(names.intents, data.get("intencao"))),
        (_("Service"), named(names.services, data.get("servico"))),
    ]


def technical_rows(lead: Lead, names: CatalogNames) -> list[tuple[str, str]]:
    data = _dict(lead.data)
    labels = names.parameters.get(_text(data.get("servico")), {})
    values = _dict(data.get("qualification_data"))
    # The schema's order (PostgreSQL's jsonb keeps keys in its own order), then the rest.
    keys = [k for k in labels if k in values] + sorted(k for k in values if k not in labels)
    return [(labels.get(key, key), display_value(values[key])) for key in keys]


# --- CSV export -------------------------------------------------------------------------------


def csv_headers() -> list[str]:
    return [
        _("Lead"),
        _("Conversation"),
        _("Created at"),
        *(str(REGISTRATION_LABELS[key]) for key in _REGISTRATION_ORDER),
        _("WhatsApp phone"),
        _("Segment"),
        _("Intention"),
        _("Service"),
        _("Technical data"),
        _("Status in the CRM"),
        _("Delivery attempts"),
    ]


def csv_row(lead: Lead, names: CatalogNames) -> list[str]:
    data = _dict(lead.data)
    registered = registration(lead)
    cells = []
    for key in _REGISTRATION_ORDER:
        value = _text(registered.get(key)) if key != "nome" else customer_name(lead)
        cells.append(format_document(value) if key == "documento" else value)
    return [
        str(lead.pk),
        str(lead.session_id),
        moment_text(lead.created_at),
        *cells,
        _text(data.get("telefone")),
        names.segments.get(_text(data.get("segmento")), _text(data.get("segmento"))),
        names.intents.get(_text(data.get("intencao")), _text(data.get("intencao"))),
        names.services.get(_text(data.get("servico")), _text(data.get("servico"))),
        " | ".join(f"{label}: {value}" for label, value in technical_rows(lead, names)),
        str(lead.get_crm_status_display()),
        str(lead.crm_attempts),
    ]


# What a spreadsheet reads as the start of a formula (OWASP's CSV injection): a customer's name,
# company or city is theirs to write, and an e-mail such as ``-2+3@example.com`` is valid.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_text(cell: str) -> str:
    """`cell` as a spreadsheet shows it without running it: a leading ``'`` makes it text."""
    return "'" + cell if cell.startswith(FORMULA_STARTS) else cell


def leads_csv(leads: list[Lead], names: CatalogNames) -> bytes:
    """The export's bytes: a UTF-8 BOM, then ``;``-separated rows with CRLF line ends, no cell
    a formula (`spreadsheet_text`)."""
    out = io.StringIO()
    writer = csv.writer(out, delimiter=";", lineterminator="\r\n")
    writer.writerow(csv_headers())
    for lead in leads:
        writer.writerow([spreadsheet_text(cell) for cell in csv_row(lead, names)])
    return b"\xef\xbb\xbf" + out.getvalue().encode()


# --- The admin --------------------------------------------------------------------------------


def _names(request: HttpRequest) -> CatalogNames:
    """The catalog's names, read once per request (the list's columns all use them)."""
    names = getattr(request, "_lead_catalog_names", None)
    if names is None:
        names = CatalogNames.load()
        request._lead_catalog_names = names  # type: ignore[attr-defined]
    return names


@admin.register(Lead)
class LeadAdmin(ReadOnlyAdmin[Lead]):
    list_display = (
        "customer",
        "company",
        "service_name",
        "segment_name",
        "created_at",
        "crm_status",
    )
    list_filter = ("crm_status",)
    list_select_related = ("session",)
    show_full_result_count = False
    actions = ["export_csv", "resend_to_crm"]
    fields = (
        "conversation",
        "confirmed_data",
        "crm_status",
        "crm_attempts",
        "crm_sent_at",
        "crm_error",
        "created_at",
    )
    readonly_fields = fields

    def get_queryset(self, request: HttpRequest) -> QuerySet[Lead]:
        # A simulated conversation's lead is no real request: not listed, exported or resent.
        return super().get_queryset(request).filter(session__is_simulated=False)

    def has_export_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.has_perm(EXPORT_LEAD))

    def changelist_view(self, request: HttpRequest, extra_context: Any = None) -> Any:
        # Django ignores an action the user may not run; a crafted POST is refused outright.
        if (
            request.method == "POST"
            and request.POST.get("action") in self.actions
            and not self.has_export_permission(request)
        ):
            raise PermissionDenied
        return super().changelist_view(request, extra_context)

    # --- list columns ---

    @admin.display(description=gettext_lazy("Name"))
    def customer(self, obj: Lead) -> str:
        return customer_name(obj) or "—"

    @admin.display(description=gettext_lazy("Company"))
    def company(self, obj: Lead) -> str:
        return _text(registration(obj).get("empresa")) or "—"

    @admin.display(description=gettext_lazy("Service"))
    def service_name(self, obj: Lead) -> str:
        code = _text(_dict(obj.data).get("servico"))
        return obj.__dict__[_NAMES].services.get(code, code) or "—"

    @admin.display(description=gettext_lazy("Segment"))
    def segment_name(self, obj: Lead) -> str:
        code = _text(_dict(obj.data).get("segmento"))
        return obj.__dict__[_NAMES].segments.get(code, code) or "—"

    def get_changelist_instance(self, request: HttpRequest) -> Any:
        # The columns have no request: each row carries the catalog's names, read once.
        changelist = super().get_changelist_instance(request)
        names = _names(request)
        for row in changelist.result_list:
            row.__dict__[_NAMES] = names
        return changelist

    # --- page ---

    @admin.display(description=gettext_lazy("conversation"))
    def conversation(self, obj: Lead) -> str:
        url = reverse("admin:conversations_session_change", args=[obj.session_id])
        return format_html(
            '<a href="{}">{}</a>', url, _("Open conversation #%(id)s") % {"id": obj.session_id}
        )

    @admin.display(description=gettext_lazy("confirmed data"))
    def confirmed_data(self, obj: Lead) -> str:
        names = CatalogNames.load()
        sections = [
            (_("Customer"), registration_rows(obj)),
            (_("Request"), request_rows(obj, names)),
            (_("Technical data"), technical_rows(obj, names)),
        ]
        return format_html_join(
            "",
            '<h4>{}</h4><table class="data-table">{}</table>',
            (
                (
                    title,
                    format_html_join("", '<tr><th scope="row">{}</th><td>{}</td></tr>', rows)
                    or mark_safe("<tr><td>—</td></tr>"),
                )
                for title, rows in sections
            ),
        )

    # --- actions ---

    @admin.action(description=gettext_lazy("Export to CSV (spreadsheet)"), permissions=["export"])
    def export_csv(self, request: HttpRequest, queryset: QuerySet[Lead]) -> HttpResponse:
        leads = list(queryset.select_related("session").order_by("created_at", "id"))
        if not can_view_personal_data(request.user):
            maskers: dict[int, Masker] = {}
            leads = [masked_row(lead, maskers=maskers) for lead in leads]
        stamp = dateformat.format(timezone.localtime(), "Y-m-d_Hi")
        response = HttpResponse(
            leads_csv(leads, _names(request)), content_type="text/csv; charset=utf-8"
        )
        response["Content-Disposition"] = f'attachment; filename="leads_{stamp}.csv"'
        return response

    @admin.action(description=gettext_lazy("Resend to the CRM"), permissions=["export"])
    def resend_to_crm(
        self, request: HttpRequest, queryset: QuerySet[Lead]
    ) -> TemplateResponse | None:
        if not settings.CRM_WEBHOOK_URL:
            self.message_user(
                request,
                _("CRM_WEBHOOK_URL is not set: nothing was sent."),
                level=messages.ERROR,
            )
            return None
        ids = leads_resend(
            lead_ids=queryset.values_list("pk", flat=True), deliver=enqueue_lead_delivery
        )
        self.message_user(
            request,
            ngettext(
                "%(count)d lead queued for the CRM (leads already sent are skipped).",
                "%(count)d leads queued for the CRM (leads already sent are skipped).",
                len(ids),
            )
            % {"count": len(ids)},
            level=messages.SUCCESS,
        )
        return None
