"""The approved WhatsApp message templates, read from Meta (docs/operations.md, Message
templates): `message_templates_sync`, called by ``manage.py sync_message_templates``, the admin's
"Sincronizar com o WhatsApp" button and a daily Celery beat task.

Templates are written and approved in Meta's WhatsApp Manager, never here. For each WhatsApp
Business Account (`Instance.waba_id`; instances sharing one are read once) the sync lists its
templates (`GraphClient.list_message_templates`) and, in one transaction:

- an APPROVED template this app can send is created, or updated when Meta changed it (a row
  registered by hand with the same name and language, no `waba_id`, is adopted);
- a row of that account that Meta no longer lists as APPROVED, or that became one this app
  cannot send, is deactivated, never deleted: the messages sent with it keep their history;
- an account Meta does not answer for (401, 5xx, a timeout) changes nothing: a failed read
  is not "every template gone".

What this app can send: a text (or no) header without parameters, a body with positional
parameters ({{1}}…{{n}}, one text each), a footer, and buttons that need no parameter (quick
replies, a phone number, a fixed URL). Media headers, named parameters and buttons with a
variable need values staff cannot give in the picker; such templates are counted as not
supported and not offered.
"""

import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from conversations.models import Instance, MessageTemplate, TemplateCategory
from whatsapp.client import GraphAPIError, GraphClient

logger = logging.getLogger(__name__)

APPROVED = "APPROVED"
_POSITIONAL = re.compile(r"\{\{(\d+)\}\}")
_ANY_PARAMETER = re.compile(r"\{\{\s*([^{}]*?)\s*\}\}")
_SUPPORTED_COMPONENTS = frozenset({"HEADER", "BODY", "FOOTER", "BUTTONS"})
_BUTTONS_WITHOUT_PARAMETERS = frozenset({"QUICK_REPLY", "PHONE_NUMBER", "URL"})


class TemplateSyncRefused(Exception):
    """Nothing to sync as asked (e.g. no active instance of that name); `message` is pt-BR."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(slots=True)
class AccountSync:
    """What the sync did to one WhatsApp Business Account's templates."""

    waba_id: str
    instances: tuple[str, ...]
    created: int = 0
    updated: int = 0
    deactivated: int = 0
    unsupported: int = 0
    error: str = ""


@dataclass(slots=True)
class SyncReport:
    accounts: list[AccountSync] = field(default_factory=list)
    # Active instances with no `waba_id`: nothing could be read for them.
    skipped: list[str] = field(default_factory=list)

    @property
    def created(self) -> int:
        return sum(account.created for account in self.accounts)

    @property
    def updated(self) -> int:
        return sum(account.updated for account in self.accounts)

    @property
    def deactivated(self) -> int:
        return sum(account.deactivated for account in self.accounts)

    @property
    def unsupported(self) -> int:
        return sum(account.unsupported for account in self.accounts)

    @property
    def failed(self) -> list[AccountSync]:
        return [account for account in self.accounts if account.error]

    def messages(self) -> list["SyncMessage"]:
        """The outcome for staff (pt-BR): the totals, then each problem, with its level."""
        messages: list[SyncMessage] = []
        if any(not account.error for account in self.accounts):
            messages.append(SyncMessage("success", self._totals()))
        if self.unsupported:
            messages.append(
                SyncMessage(
                    "warning",
                    ngettext(
                        "%(n)d approved template is not offered: it needs a media header, "
                        "named parameters or a button with a variable, which cannot be filled "
                        "in here.",
                        "%(n)d approved templates are not offered: they need a media header, "
                        "named parameters or a button with a variable, which cannot be filled "
                        "in here.",
                        self.unsupported,
                    )
                    % {"n": self.unsupported},
                )
            )
        for account in self.failed:
            text = _(
                "The WhatsApp Business Account %(waba_id)s (%(instances)s) could not be read: "
                "%(error)s. Nothing was changed in its WhatsApp message templates."
            ) % {
                "waba_id": account.waba_id,
                "instances": ", ".join(account.instances),
                "error": account.error,
            }
            messages.append(SyncMessage("error", text))
        for name in self.skipped:
            text = _(
                "The instance %(name)s has no WhatsApp Business Account ID: nothing was synced "
                "for it. Fill it in on the instance."
            ) % {"name": name}
            messages.append(SyncMessage("warning", text))
        if not messages:
            messages.append(SyncMessage("warning", _("No active instance: nothing to sync.")))
        return messages

    def _totals(self) -> str:
        created = _count("%(n)d new", "%(n)d new", self.created)
        updated = _count("%(n)d updated", "%(n)d updated", self.updated)
        deactivated = _count("%(n)d deactivated", "%(n)d deactivated", self.deactivated)
        return _(
            "WhatsApp message templates synced: %(created)s, %(updated)s, %(deactivated)s."
        ) % {"created": created, "updated": updated, "deactivated": deactivated}


def _count(singular: str, plural: str, n: int) -> str:
    # pt_BR's gettext rule (n > 1) takes 0 as singular; "0 novos" is what staff read.
    return ngettext(singular, plural, 1 if n == 1 else 2) % {"n": n}


@dataclass(frozen=True, slots=True)
class SyncMessage:
    level: str  # "success", "warning" or "error" (the admin's message levels)
    text: str


@dataclass(frozen=True, slots=True)
class _Approved:
    """An APPROVED template of Meta's answer that this app can send."""

    name: str
    language: str
    category: str
    components: list[Any]
    body: str
    parameter_count: int
    meta_template_id: str

    @property
    def key(self) -> tuple[str, str]:
        return (self.name, self.language)


def message_templates_sync(
    *, now: datetime, instance_name: str = "", client: GraphClient | None = None
) -> SyncReport:
    """Sync the templates of every active instance's account (or of the instance named
    `instance_name`); see the module docstring. `client` defaults to one on
    ``WHATSAPP_API_BASE_URL``, closed afterwards."""
    instances = Instance.objects.filter(is_active=True).order_by("name")
    if instance_name:
        instances = instances.filter(name=instance_name)
        if not instances.exists():
            raise TemplateSyncRefused(
                _("There is no active instance named %(name)s.") % {"name": instance_name}
            )
    report = SyncReport()
    accounts: dict[str, list[Instance]] = {}
    for instance in instances:
        if instance.waba_id:
            accounts.setdefault(instance.waba_id, []).append(instance)
        else:
            report.skipped.append(instance.name)
    if not accounts:
        return report
    own_client = client is None
    graph = client or GraphClient(base_url=settings.WHATSAPP_API_BASE_URL)
    try:
        for waba_id, members in accounts.items():
            report.accounts.append(_account_sync(graph, waba_id, members, now=now))
    finally:
        if own_client:
            graph.close()
    return report


def _account_sync(
    graph: GraphClient, waba_id: str, members: Sequence[Instance], *, now: datetime
) -> AccountSync:
    account = AccountSync(waba_id=waba_id, instances=tuple(i.name for i in members))
    token = next((i.access_token for i in members if i.access_token), "")
    token = token or settings.WHATSAPP_ACCESS_TOKEN
    if not token:
        account.error = _("no access token (neither the instance's nor WHATSAPP_ACCESS_TOKEN)")
        return account
    try:
        listed = graph.list_message_templates(waba_id=waba_id, access_token=token)
    except GraphAPIError as exc:
        account.error = _graph_error_text(exc)
        logger.warning(
            "message_templates_sync_failed",
            extra={"waba_id": waba_id, "code": exc.code, "http_status": exc.http_status},
        )
        return account
    approved: dict[tuple[str, str], _Approved] = {}
    for item in listed:
        if item.get("status") != APPROVED:
            continue
        template = _sendable(item)
        if template is None:
            account.unsupported += 1
        else:
            approved[template.key] = template
    try:
        with transaction.atomic():
            _store(account, approved, now=now)
    except IntegrityError:
        # Another sync (the daily task, a colleague's click) created the same row first.
        account.created = account.updated = account.deactivated = 0
        account.error = _("another sync of this account ran at the same time; try again")
        return account
    logger.info(
        "message_templates_synced",
        extra={
            "waba_id": waba_id,
            # "created" is a LogRecord attribute of its own.
            "templates_created": account.created,
            "templates_updated": account.updated,
            "templates_deactivated": account.deactivated,
            "templates_unsupported": account.unsupported,
        },
    )
    return account


def _store(
    account: AccountSync, approved: Mapping[tuple[str, str], _Approved], *, now: datetime
) -> None:
    rows = {
        (row.name, row.language): row
        for row in MessageTemplate.objects.select_for_update().filter(waba_id=account.waba_id)
    }
    # Registered by hand before the account was synced: the same template, adopted.
    by_hand = {
        (row.name, row.language): row
        for row in MessageTemplate.objects.select_for_update().filter(
            waba_id="", name__in=[name for name, _language in approved]
        )
    }
    for key, template in approved.items():
        row = rows.get(key) or by_hand.get(key)
        if row is None:
            MessageTemplate.objects.create(
                waba_id=account.waba_id,
                **_fields_of(template),
                parameters=_labels(template.parameter_count),
                is_active=True,
                synced_at=now,
                created_at=now,
            )
            account.created += 1
            continue
        fields = {**_fields_of(template), "waba_id": account.waba_id, "is_active": True}
        if row.parameter_count != template.parameter_count or len(row.parameters or []) != (
            template.parameter_count
        ):
            # Labels typed by hand are kept while they still fit the body.
            fields["parameters"] = _labels(template.parameter_count)
        if any(getattr(row, name) != value for name, value in fields.items()):
            account.updated += 1
        MessageTemplate.objects.filter(pk=row.pk).update(**fields, synced_at=now)
    gone = [row.pk for key, row in rows.items() if key not in approved and row.is_active]
    account.deactivated = MessageTemplate.objects.filter(pk__in=gone).update(
        is_active=False, synced_at=now
    )


def _fields_of(template: _Approved) -> dict[str, Any]:
    return {
        "name": template.name,
        "language": template.language,
        "category": template.category,
        "components": template.components,
        "body": template.body,
        "parameter_count": template.parameter_count,
        "meta_template_id": template.meta_template_id,
        "meta_status": APPROVED,
    }


def _labels(count: int) -> list[str]:
    # Language-neutral: the picker shows them with Meta's example values.
    return [f"{{{{{n}}}}}" for n in range(1, count + 1)]


def _sendable(item: Mapping[str, Any]) -> _Approved | None:
    """The template as stored, or None when this app cannot send it (module docstring)."""
    name, language = item.get("name"), item.get("language")
    components = item.get("components")
    if not isinstance(name, str) or not name or not isinstance(language, str) or not language:
        return None
    if not isinstance(components, list) or not all(isinstance(c, dict) for c in components):
        return None
    body = ""
    for component in components:
        kind = str(component.get("type", "")).upper()
        if kind not in _SUPPORTED_COMPONENTS:
            return None
        text = component.get("text")
        text = text if isinstance(text, str) else ""
        if kind == "HEADER" and (
            str(component.get("format", "TEXT")).upper() != "TEXT" or _ANY_PARAMETER.search(text)
        ):
            return None
        if kind == "BODY":
            body = text
        if kind == "BUTTONS" and not _buttons_without_parameters(component.get("buttons")):
            return None
    positional = [int(n) for n in _POSITIONAL.findall(body)]
    if len(_ANY_PARAMETER.findall(body)) != len(positional):
        return None  # named parameters ({{first_name}})
    category = str(item.get("category", "")).upper()
    return _Approved(
        name=name,
        language=language,
        category=category if category in TemplateCategory.values else "",
        components=components,
        body=body,
        parameter_count=max(positional, default=0),
        meta_template_id=str(item.get("id", "")),
    )


def _buttons_without_parameters(buttons: Any) -> bool:
    if not isinstance(buttons, list):
        return False
    return all(
        isinstance(button, dict)
        and str(button.get("type", "")).upper() in _BUTTONS_WITHOUT_PARAMETERS
        and not _ANY_PARAMETER.search(str(button.get("url", "")))
        for button in buttons
    )


def _graph_error_text(exc: GraphAPIError) -> str:
    """Meta's refusal in words staff can act on (the title is redacted by the client)."""
    if exc.http_status == 401 or exc.code == 190:
        return _("the access token was refused (expired or revoked): %(title)s") % {
            "title": exc.title
        }
    if exc.code in (100, 200) or exc.http_status == 403:
        return _(
            "Meta refused the request (a wrong WABA ID, or a token without the "
            "whatsapp_business_management permission): %(title)s"
        ) % {"title": exc.title}
    return exc.title


def template_examples(components: Iterable[Any]) -> list[str]:
    """Meta's example value of each body parameter, in order (empty when none was given)."""
    for component in components:
        if isinstance(component, dict) and str(component.get("type", "")).upper() == "BODY":
            example = component.get("example")
            rows = example.get("body_text") if isinstance(example, dict) else None
            if isinstance(rows, list) and rows and isinstance(rows[0], list):
                return [str(value) for value in rows[0]]
    return []
