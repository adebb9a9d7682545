"""LGPD: a customer's requests to see (export) or erase everything held about them.

A customer is chosen by a `CustomerSelector`: their phone (E.164 digits) or their WhatsApp user
id (BSUID), never empty. Their sessions are those with that phone or user id, and with any phone
or user id those sessions carry (a customer who wrote from two numbers under one user id is one
customer; a Brazilian mobile with or without its ninth digit is one phone,
`agents.phones.phone_forms`): `customer_sessions`.

What is held about them, and what each request does with it:

- each session and everything under it (messages, delivery statuses, model calls, summaries,
  lead, admin log entries, and the rows of the apps above: the replay results, the support
  team's internal notes, each under its own key, apart from the messages): exported;
  erasure anonymises it (`conversations.privacy.retention.session_anonymise`);
- the raw webhook bodies that name them (kept up to `WEBHOOK_BODY_RETENTION_DAYS`): found by
  their phone or user id in the body; the export lists their items (contacts, messages,
  statuses, echoes) and erasure removes them — a body left with no one else's item is emptied,
  as the retention does, and what else it says is masked with their known values.

An erasure request writes, per session, a SYSTEM event (`EventCode.PERSONAL_DATA_ERASED`) and,
from the admin, an admin log entry with the staff member who asked; an export from the admin an
admin log entry. The command-line tools log the operator (the OS user).
"""

import json
import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.auth.models import AbstractBaseUser
from django.contrib.contenttypes.models import ContentType
from django.db import models, transaction
from django.db.models import F, Lookup, Q, Value
from django.utils.translation import gettext as _

from agents.masking import KnownValues, Masker
from agents.phones import customer_phone_key, phone_forms
from conversations.event_codes import EventCode
from conversations.models import (
    Direction,
    HandoffSummary,
    Lead,
    LLMCall,
    Message,
    MessageMedia,
    SatisfactionSurvey,
    Session,
    WebhookDelivery,
)
from conversations.privacy.data_holders import session_data_holders
from conversations.privacy.personal_data import session_known_values
from conversations.privacy.retention import session_anonymise

logger = logging.getLogger("conversations.privacy.retention")

ERASE_PERMISSION = "conversations.erase_customer_data"
# The stored columns' limits (Session.customer_phone, .customer_user_id).
_PHONE_RE = re.compile(r"^\d{8,20}$")
_PHONE_PUNCTUATION = re.compile(r"[\s().+-]")
MAX_USER_ID_CHARS = 128
# A customer's sessions reach further ones through the phones and user ids they carry; a few
# rounds cover a customer who changed number, and bound a chain of shared numbers.
MAX_SELECTION_ROUNDS = 4
# Where a webhook body names a customer: their phone or user id under these keys of an item.
_IDENTITY_KEYS = frozenset(
    {
        "wa_id",
        "from",
        "to",
        "recipient_id",
        "user_id",
        "from_user_id",
        "to_user_id",
        "recipient_user_id",
        "previous_user_id",
    }
)
# The lists of a change's value that hold one customer's items each.
_ITEM_LISTS = ("contacts", "messages", "statuses", "message_echoes")
DELIVERIES_BATCH = 200


class InvalidSelector(ValueError):
    """The phone or user id cannot name a customer; `message` is for staff (pt-BR)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True, slots=True)
class CustomerSelector:
    """Exactly one of them is set."""

    phone: str = ""
    user_id: str = ""


def customer_selector(*, phone: str = "", user_id: str = "") -> CustomerSelector:
    """The selector of a phone (punctuation and a leading + allowed) or of a user id; an empty,
    malformed or doubled one raises `InvalidSelector`."""
    phone, user_id = phone.strip(), user_id.strip()
    if phone and user_id:
        raise InvalidSelector(_("Give the phone or the WhatsApp user id, not both."))
    if phone:
        digits = _PHONE_PUNCTUATION.sub("", phone)
        if not _PHONE_RE.match(digits):
            raise InvalidSelector(
                _("Use the phone with its country code, digits only (8 to 20 digits).")
            )
        return CustomerSelector(phone=digits)
    if user_id:
        if len(user_id) > MAX_USER_ID_CHARS or any(
            c.isspace() or not c.isprintable() for c in user_id
        ):
            raise InvalidSelector(
                _("A WhatsApp user id has up to %(limit)d characters and no spaces.")
                % {"limit": MAX_USER_ID_CHARS}
            )
        return CustomerSelector(user_id=user_id)
    raise InvalidSelector(_("Give the customer's phone or WhatsApp user id."))


def customer_sessions(selector: CustomerSelector) -> list[Session]:
    """The customer's sessions, oldest first (see the module docstring)."""
    phones = {selector.phone} - {""}
    user_ids = {selector.user_id} - {""}
    sessions: list[Session] = []
    for _round in range(MAX_SELECTION_ROUNDS):
        sessions = list(
            Session.objects.filter(
                Q(customer_phone_key__in={customer_phone_key(p) for p in phones})
                | Q(customer_user_id__in=user_ids)
            )
            .select_related("instance")
            .order_by("created_at", "id")
        )
        more_phones = phones | {s.customer_phone for s in sessions} - {""}
        more_user_ids = user_ids | {s.customer_user_id for s in sessions} - {""}
        if (more_phones, more_user_ids) == (phones, user_ids):
            break
        phones, user_ids = more_phones, more_user_ids
    return sessions


def _identifiers(selector: CustomerSelector, sessions: Iterable[Session]) -> frozenset[str]:
    """Every id the customer is known by: user ids, and each phone in every form WhatsApp may
    have sent it in (a webhook body names the form of its day)."""
    found = {selector.phone, selector.user_id}
    for session in sessions:
        found |= {session.customer_phone, session.customer_user_id}
    phones = [value for value in found if value.isdigit()]
    for phone in phones:
        found |= phone_forms(phone)
    return frozenset(found - {""})


def customer_masker(sessions: Iterable[Session], identifiers: Iterable[str]) -> Masker:
    """The known values of all the customer's sessions, without the patterns: for texts that
    also hold other people's data (a webhook body naming several customers)."""
    names: list[str] = []
    numbers: list[str] = []
    emails: list[str] = []
    ids: list[str] = list(identifiers)
    for session in sessions:
        known = session_known_values(session)
        names += known.names
        numbers += known.numbers
        emails += known.emails
        ids += known.identifiers
    numbers += [i for i in ids if i.isdigit()]
    return Masker(
        KnownValues(
            names=tuple(dict.fromkeys(names)),
            numbers=tuple(dict.fromkeys(numbers)),
            emails=tuple(dict.fromkeys(emails)),
            identifiers=tuple(dict.fromkeys(i for i in ids if not i.isdigit())),
        ),
        patterns=False,
    )


# --- Webhook bodies ---------------------------------------------------------------------------


class BytesContains(Lookup[bytes]):
    """Whether a binary column holds a byte string: PostgreSQL's `position`, SQLite's `instr`.

    The ORM has no correct spelling: its ``contains`` on a BinaryField casts the column to text
    and compares it with the needle's Python repr (``LIKE %b'5511'%``), finding nothing. Reading
    the bodies to search them in Python is the only other way; measured over 30,000 bodies of
    2 KB on PostgreSQL (one identifier): 62 ms with this lookup, 312 ms for the scan, which also
    moves every body (60 MB) over the wire on each request of the admin page.
    """

    lookup_name = "bytes_contains"

    def as_sql(self, compiler: Any, connection: Any) -> tuple[str, tuple[Any, ...]]:
        lhs, lhs_params = self.process_lhs(compiler, connection)
        rhs, rhs_params = self.process_rhs(compiler, connection)
        return f"instr({lhs}, {rhs}) > 0", (*lhs_params, *rhs_params)

    def as_postgresql(self, compiler: Any, connection: Any) -> tuple[str, tuple[Any, ...]]:
        lhs, lhs_params = self.process_lhs(compiler, connection)
        rhs, rhs_params = self.process_rhs(compiler, connection)
        return f"position({rhs} in {lhs}) > 0", (*rhs_params, *lhs_params)


@dataclass(frozen=True, slots=True)
class CustomerFound:
    """What a request would cover: the customer's sessions and the webhook bodies naming them."""

    selector: CustomerSelector
    sessions: list[Session]
    webhook_deliveries: int


def customer_find(selector: CustomerSelector) -> CustomerFound:
    sessions = customer_sessions(selector)
    deliveries = _deliveries_naming(_identifiers(selector, sessions))
    return CustomerFound(selector=selector, sessions=sessions, webhook_deliveries=len(deliveries))


def _deliveries_naming(identifiers: Iterable[str]) -> list[int]:
    """The ids of the deliveries whose body holds one of `identifiers`, oldest first."""
    found: set[int] = set()
    for identifier in identifiers:
        needle = Value(identifier.encode(), output_field=models.BinaryField())
        found |= set(
            WebhookDelivery.objects.filter(BytesContains(F("raw_body"), needle)).values_list(
                "pk", flat=True
            )
        )
    return sorted(found)


def _names_customer(node: Any, identifiers: frozenset[str]) -> bool:
    if isinstance(node, Mapping):
        return any(
            (key in _IDENTITY_KEYS and isinstance(value, str) and value in identifiers)
            or _names_customer(value, identifiers)
            for key, value in node.items()
        )
    if isinstance(node, list):
        return any(_names_customer(item, identifiers) for item in node)
    return False


def _changes_values(document: Any) -> list[dict[str, Any]]:
    """The `entry[].changes[].value` objects of a body (none when it has another shape)."""
    values = []
    entries = document.get("entry") if isinstance(document, dict) else None
    for entry in entries if isinstance(entries, list) else []:
        changes = entry.get("changes") if isinstance(entry, dict) else None
        for change in changes if isinstance(changes, list) else []:
            value = change.get("value") if isinstance(change, dict) else None
            if isinstance(value, dict):
                values.append(value)
    return values


@dataclass(frozen=True, slots=True)
class BodySplit:
    """A webhook body's items about the customer, and the body without them."""

    items: list[Any]
    rest: Any  # the document without the items; None when the body cannot be split
    others: int  # how many items of other customers the rest holds


def body_split(raw_body: bytes | memoryview, identifiers: frozenset[str]) -> BodySplit:
    """Split a body by whose items they are. Pure; a body that is not a WhatsApp document is
    the customer's as a whole (`rest` None)."""
    try:
        document = json.loads(bytes(raw_body).decode("utf-8", errors="replace"))
    except ValueError:
        return BodySplit(items=[], rest=None, others=0)
    values = _changes_values(document)
    if not values:
        return BodySplit(items=[], rest=None, others=0)
    items: list[Any] = []
    others = 0
    for value in values:
        for key in _ITEM_LISTS:
            listed = value.get(key)
            if not isinstance(listed, list):
                continue
            theirs = [item for item in listed if _names_customer(item, identifiers)]
            kept = [item for item in listed if not _names_customer(item, identifiers)]
            items += theirs
            others += len(kept)
            value[key] = kept
    return BodySplit(items=items, rest=document, others=others)


def _strings_mask(node: Any, masker: Masker) -> Any:
    if isinstance(node, dict):
        return {key: _strings_mask(value, masker) for key, value in node.items()}
    if isinstance(node, list):
        return [_strings_mask(item, masker) for item in node]
    if isinstance(node, str):
        return masker.text(node)
    return node


def webhook_bodies_erase(*, identifiers: frozenset[str], masker: Masker) -> int:
    """Remove the customer's items from every stored body naming them; the number changed."""
    changed = 0
    ids = _deliveries_naming(identifiers)
    for start in range(0, len(ids), DELIVERIES_BATCH):
        batch = ids[start : start + DELIVERIES_BATCH]
        with transaction.atomic():
            rows = WebhookDelivery.objects.select_for_update().filter(pk__in=batch)
            for delivery in rows.only("id", "raw_body", "headers", "error"):
                split = body_split(delivery.raw_body, identifiers)
                error = masker.text(delivery.error)
                if split.rest is None or (split.items and split.others == 0):
                    delivery.raw_body = b""
                    delivery.headers = {}
                else:
                    rest = _strings_mask(split.rest, masker)
                    if not split.items and rest == split.rest and error == delivery.error:
                        continue  # found by a part of a longer number: nothing of theirs
                    delivery.raw_body = json.dumps(rest, ensure_ascii=False).encode()
                delivery.error = error
                delivery.save(update_fields=["raw_body", "headers", "error"])
                changed += 1
    return changed


def _deliveries_export(identifiers: frozenset[str]) -> list[dict[str, Any]]:
    exported = []
    for delivery in WebhookDelivery.objects.filter(pk__in=_deliveries_naming(identifiers)).order_by(
        "received_at", "id"
    ):
        split = body_split(delivery.raw_body, identifiers)
        row: dict[str, Any] = {
            "id": delivery.pk,
            "received_at": delivery.received_at.isoformat(),
            "outcome": delivery.outcome,
            "items": split.items,
        }
        if split.rest is None:  # not a WhatsApp document: as received
            row["body"] = bytes(delivery.raw_body).decode("utf-8", errors="replace")
        exported.append(row)
    return exported


# --- Export -----------------------------------------------------------------------------------


def customer_data_export(
    selector: CustomerSelector, *, user: AbstractBaseUser | None = None
) -> dict[str, Any]:
    """Everything held about the customer, JSON-ready; from the admin, logged with `user`."""
    sessions = customer_sessions(selector)
    export = {
        "phone": selector.phone,
        "user_id": selector.user_id,
        "sessions": [_session_export(session) for session in sessions],
        "webhook_deliveries": _deliveries_export(_identifiers(selector, sessions)),
    }
    if user is not None:
        _admin_log(user, sessions, _("Exported the customer's personal data."))
        logger.info(
            "customer_data_exported",
            extra={"user_id": user.pk, "session_ids": [s.pk for s in sessions]},
        )
    return export


def _survey_export(survey: SatisfactionSurvey) -> dict[str, Any]:
    def moment(value: datetime | None) -> str | None:
        return value.isoformat() if value else None

    return {
        "asked_at": moment(survey.asked_at),
        "not_sent": survey.not_sent,
        "score": survey.score,
        "answered_at": moment(survey.answered_at),
    }


def _session_export(session: Session) -> dict[str, Any]:
    lead = Lead.objects.filter(session=session).first()
    survey = SatisfactionSurvey.objects.filter(session=session).first()
    exported: dict[str, Any] = {
        "id": session.pk,
        "instance": session.instance.phone_number_id,
        "created_at": session.created_at.isoformat(),
        "closed_at": session.closed_at.isoformat() if session.closed_at else None,
        "state": session.state,
        "customer_phone": session.customer_phone,
        "customer_name": session.customer_name,
        "customer_user_id": session.customer_user_id,
        "customer_document": session.customer_document,
        "segment": session.segment,
        "service": session.service,
        "technical_data": session.technical_data,
        "registration_data": session.registration_data,
        "confirmation_data": session.confirmation_data,
        "messages": [
            {
                "direction": m.direction,
                "content": m.content,
                "created_at": m.created_at.isoformat(),
                "media": _media_export(m),
            }
            for m in session.messages.exclude(direction=Direction.SYSTEM)
            .select_related("media")
            .order_by("id")
        ],
        "summaries": [
            {"summary_text": s.summary_text, "created_at": s.created_at.isoformat()}
            for s in HandoffSummary.objects.filter(session=session).order_by("id")
        ],
        "lead": None
        if lead is None
        else {"data": lead.data, "created_at": lead.created_at.isoformat()},
        "satisfaction": None if survey is None else _survey_export(survey),
        "model_calls": [
            {
                "id": c.pk,
                "created_at": c.created_at.isoformat(),
                "agent": c.agent,
                "purpose": c.purpose,
                "model": c.model,
                "outcome": c.outcome,
                "context_snapshot": c.context_snapshot,
                "raw_response": c.raw_response,
                "error": c.error,
            }
            for c in LLMCall.objects.filter(session=session).order_by("id")
        ],
        "admin_log": [
            {
                "action_time": e.action_time.isoformat(),
                "object": e.object_repr,
                "change_message": e.get_change_message(),
            }
            for e in LogEntry.objects.filter(
                content_type=ContentType.objects.get_for_model(Session),
                object_id=str(session.pk),
            ).order_by("action_time", "id")
        ],
    }
    for holder in session_data_holders():
        exported[holder.section] = holder.export(session_id=session.pk)
    return exported


def _media_export(message: Message) -> dict[str, Any] | None:
    """A message's media as the export lists it: what the file is (not its bytes, which staff
    hand over from the admin's media view), what it said, and what the bot read in it."""
    try:
        media = message.media
    except MessageMedia.DoesNotExist:
        return None
    return {
        "kind": media.kind,
        "file_name": media.filename,
        "mime_type": media.mime_type,
        "size": media.file_size,
        "sha256": media.sha256,
        "status": media.status,
        "caption": media.caption,
        "data": media.data,
        "transcript": media.transcript,
        "description": media.description,
    }


# --- Erasure ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ErasureReport:
    sessions: int  # anonymised now (a session anonymised before is not counted)
    webhook_deliveries: int  # bodies that named the customer, cleaned


def customer_data_erase(
    selector: CustomerSelector,
    *,
    now: datetime,
    operator: str,
    user: AbstractBaseUser | None = None,
) -> ErasureReport:
    """Anonymise every session of the customer and clean the webhook bodies naming them.

    `user` is the staff member who asked from the admin (recorded on each session's event and
    admin log entry); `operator` names who asked in the log line (the OS user of a command).
    """
    sessions = customer_sessions(selector)
    identifiers = _identifiers(selector, sessions)
    # Built before the sessions lose their known values.
    masker = customer_masker(sessions, identifiers)
    erased: list[Session] = []
    for session in sessions:
        with transaction.atomic():
            if not session_anonymise(session.pk, now=now):
                continue
            Message.objects.create(
                session=session,
                direction=Direction.SYSTEM,
                message_type=EventCode.PERSONAL_DATA_ERASED.value,
                staff_user_id=user.pk if user is not None else None,
                created_at=now,
            )
            erased.append(session)
    if user is not None:
        _admin_log(user, erased, _("Erased the customer's personal data."))
    deliveries = webhook_bodies_erase(identifiers=identifiers, masker=masker)
    logger.info(
        "customer_data_erased",
        extra={
            "sessions": len(erased),
            "webhook_deliveries": deliveries,
            "operator": operator,
            "user_id": user.pk if user is not None else None,
            "session_ids": [s.pk for s in sessions],
        },
    )
    return ErasureReport(sessions=len(erased), webhook_deliveries=deliveries)


def _admin_log(user: AbstractBaseUser, sessions: list[Session], text: str) -> None:
    if sessions:
        LogEntry.objects.log_actions(
            user_id=user.pk, queryset=sessions, action_flag=CHANGE, change_message=text
        )


def can_request_customer_data(user: Any) -> bool:
    """Superusers, or staff granted `conversations.erase_customer_data`."""
    return bool(user.is_active and user.is_staff and user.has_perm(ERASE_PERMISSION))
