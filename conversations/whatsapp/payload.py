"""The WhatsApp Cloud API webhook body, parsed into typed events. Pure module.

One POST carries ``entry[].changes[]``; a change's ``field`` says what its ``value`` holds:

- ``messages``: ``messages[]`` sent by customers (with ``contacts[]`` naming them), ``statuses[]``
  of messages the business sent, and ``errors[]`` about the number itself;
- ``smb_message_echoes``: ``message_echoes[]``, messages staff sent from the WhatsApp Business app
  when the number runs in coexistence mode.

Customers are named by their phone (``wa_id``/``from``) and by their business-scoped user id
(``contacts[].user_id``, ``messages[].from_user_id``); either may be missing, not both.

The parser is tolerant of missing optional fields and of changes it does not handle (they are
listed in ``ignored_changes``), and refuses with `PayloadError` a shape it cannot accept: a missing
message id, timestamp or sender, a field of the wrong type, an id too long to store. Nothing is
half-parsed: either the whole body becomes a `WebhookPayload` or the call raises.
"""

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from agents.redaction import redact

WABA_OBJECT = "whatsapp_business_account"
FIELD_MESSAGES = "messages"
FIELD_ECHOES = "smb_message_echoes"

# Longest values the message log stores; anything longer is refused, not truncated, because a
# truncated id would deduplicate two different messages.
MAX_WAMID_CHARS = 128
MAX_USER_ID_CHARS = 128
MAX_TYPE_CHARS = 32
MAX_STATUS_CHARS = 16
MAX_ERROR_CODE = 2**31 - 1  # a 32-bit integer column
# ASCII digits only: `\d` would also match other scripts' digits.
_PHONE_RE = re.compile(r"^[0-9]{1,20}$")
_PHONE_NUMBER_ID_RE = re.compile(r"^[0-9]{1,32}$")

TEXT_TYPES = frozenset({"text", "interactive", "button"})
MEDIA_TYPES = frozenset({"image", "audio", "video", "document", "sticker", "location", "contacts"})
INTERACTIVE_REPLY_TYPES = frozenset({"button_reply", "list_reply"})


class MalformedBodyError(ValueError):
    """The body is not JSON (or not UTF-8): the webhook answers 400 and stores nothing."""


class PayloadError(ValueError):
    """Valid JSON whose shape cannot be accepted; the message says where and why."""


class InboundKind(StrEnum):
    """What the channel does with a customer's message."""

    TEXT = "text"  # text, interactive reply or template button: becomes part of a turn
    UNSUPPORTED_MEDIA = "unsupported_media"  # logged and answered with the fixed text
    LOG_ONLY = "log_only"  # reaction, unsupported and unknown types: logged only
    IDENTITY_CHANGE = "identity_change"  # `system`: the customer's phone or user id changed


@dataclass(frozen=True, slots=True)
class Customer:
    """Who the customer is; `phone` (digits) or `user_id` may be empty, never both."""

    phone: str
    user_id: str
    name: str = ""


@dataclass(frozen=True, slots=True)
class IdentityChange:
    """A `system` message: `change` is Meta's ``system.type`` (e.g. ``user_changed_number``)."""

    change: str
    new_phone: str
    new_user_id: str
    previous_user_id: str


@dataclass(frozen=True, slots=True)
class InboundMessage:
    phone_number_id: str
    wamid: str
    timestamp: datetime
    message_type: str
    kind: InboundKind
    customer: Customer
    # The turn's text for TEXT; a caption, place, contact name or emoji for the others (so staff
    # see something in the transcript); the change description for IDENTITY_CHANGE.
    text: str
    context_wamid: str = ""
    identity_change: IdentityChange | None = None


@dataclass(frozen=True, slots=True)
class WhatsAppError:
    code: int | None
    title: str
    details: str = ""


@dataclass(frozen=True, slots=True)
class StatusUpdate:
    phone_number_id: str
    wamid: str
    status: str
    timestamp: datetime
    recipient_phone: str
    recipient_user_id: str
    errors: tuple[WhatsAppError, ...] = ()


@dataclass(frozen=True, slots=True)
class Echo:
    """A message staff sent from the WhatsApp Business app (coexistence)."""

    phone_number_id: str
    wamid: str
    timestamp: datetime
    message_type: str
    customer: Customer
    text: str


@dataclass(frozen=True, slots=True)
class ChangeErrors:
    """``value.errors[]``: a problem Meta reports about the number, not about one message."""

    phone_number_id: str
    errors: tuple[WhatsAppError, ...]


@dataclass(frozen=True, slots=True)
class WebhookPayload:
    messages: tuple[InboundMessage, ...] = ()
    statuses: tuple[StatusUpdate, ...] = ()
    echoes: tuple[Echo, ...] = ()
    errors: tuple[ChangeErrors, ...] = ()
    ignored_changes: tuple[str, ...] = ()

    @property
    def phone_number_ids(self) -> frozenset[str]:
        events: tuple[InboundMessage | StatusUpdate | Echo | ChangeErrors, ...] = (
            *self.messages,
            *self.statuses,
            *self.echoes,
            *self.errors,
        )
        return frozenset(event.phone_number_id for event in events)

    @property
    def event_count(self) -> int:
        return len(self.messages) + len(self.statuses) + len(self.echoes) + len(self.errors)


def decode_body(raw: bytes) -> Any:
    """The JSON document of a webhook body; `MalformedBodyError` when it is not JSON."""
    try:
        return json.loads(raw)
    except (ValueError, RecursionError) as exc:
        # ValueError covers JSONDecodeError, invalid UTF-8 and integers too long to convert.
        raise MalformedBodyError(f"body is not JSON: {exc.__class__.__name__}") from exc


def parse_webhook_body(raw: bytes) -> WebhookPayload:
    return parse_payload(decode_body(raw))


def parse_payload(document: Any) -> WebhookPayload:
    """Every entry, change, message, status and echo of a decoded webhook body."""
    if not isinstance(document, dict):
        raise PayloadError("body: expected an object")
    obj = document.get("object", WABA_OBJECT)
    if obj != WABA_OBJECT:
        return WebhookPayload(ignored_changes=(f"object:{_describe(obj)}",))
    builder = _Builder()
    for e_index, entry in enumerate(_list(document, "entry", "body")):
        where = f"entry[{e_index}]"
        entry = _object(entry, where)
        for c_index, change in enumerate(_list(entry, "changes", where)):
            builder.add_change(_object(change, f"{where}.changes[{c_index}]"), where)
    return builder.build()


class _Builder:
    def __init__(self) -> None:
        self.messages: list[InboundMessage] = []
        self.statuses: list[StatusUpdate] = []
        self.echoes: list[Echo] = []
        self.errors: list[ChangeErrors] = []
        self.ignored: list[str] = []

    def build(self) -> WebhookPayload:
        return WebhookPayload(
            messages=tuple(self.messages),
            statuses=tuple(self.statuses),
            echoes=tuple(self.echoes),
            errors=tuple(self.errors),
            ignored_changes=tuple(self.ignored),
        )

    def add_change(self, change: dict[str, Any], entry_where: str) -> None:
        field = change.get("field")
        if field not in (FIELD_MESSAGES, FIELD_ECHOES):
            # history, smb_app_state_sync, account_update...: not this channel's business.
            self.ignored.append(_describe(field))
            return
        where = f"{entry_where}.changes[{field}].value"
        value = _object(change.get("value"), where)
        phone_number_id = _phone_number_id(value, where)
        if field == FIELD_ECHOES:
            for index, echo in enumerate(_list(value, "message_echoes", where)):
                self.echoes.append(
                    _echo(_object(echo, f"{where}.message_echoes[{index}]"), phone_number_id)
                )
            return
        contacts = [
            _object(contact, f"{where}.contacts[{index}]")
            for index, contact in enumerate(_list(value, "contacts", where))
        ]
        for index, message in enumerate(_list(value, "messages", where)):
            item = _object(message, f"{where}.messages[{index}]")
            self.messages.append(
                _message(item, phone_number_id, contacts, f"{where}.messages[{index}]")
            )
        for index, status in enumerate(_list(value, "statuses", where)):
            item = _object(status, f"{where}.statuses[{index}]")
            self.statuses.append(_status(item, phone_number_id, f"{where}.statuses[{index}]"))
        change_errors = _errors(value, where)
        if change_errors:
            self.errors.append(ChangeErrors(phone_number_id, change_errors))


def _message(
    item: dict[str, Any], phone_number_id: str, contacts: list[dict[str, Any]], where: str
) -> InboundMessage:
    wamid = _wamid(item, where)
    timestamp = _timestamp(item, where)
    message_type = _type(item, where)
    phone = _phone(item, "from", where)
    user_id = _user_id(item, "from_user_id", where)
    contact = _matching_contact(contacts, phone, user_id)
    if contact is not None:
        phone = phone or _phone(contact, "wa_id", f"{where}.contact")
        user_id = user_id or _user_id(contact, "user_id", f"{where}.contact")
    name = _text(_mapping(contact, "profile") if contact else None, "name")
    context_wamid = _text(_mapping(item, "context"), "id")

    identity_change = None
    if message_type == "system":
        kind = InboundKind.IDENTITY_CHANGE
        system = _object(item.get("system"), f"{where}.system")
        identity_change = IdentityChange(
            change=_text(system, "type"),
            new_phone=_phone(system, "wa_id", f"{where}.system"),
            new_user_id=_user_id(system, "user_id", f"{where}.system"),
            previous_user_id=_user_id(system, "previous_user_id", f"{where}.system"),
        )
        # A user id change may come without any phone: the previous id names the customer.
        user_id = user_id or identity_change.previous_user_id
        text = _text(system, "body")
    else:
        kind, text = _content(item, message_type, where)
    if not phone and not user_id:
        raise PayloadError(f"{where}: no sender (neither from/wa_id nor from_user_id/user_id)")
    return InboundMessage(
        phone_number_id=phone_number_id,
        wamid=wamid,
        timestamp=timestamp,
        message_type=message_type,
        kind=kind,
        customer=Customer(phone=phone, user_id=user_id, name=name),
        text=text,
        context_wamid=context_wamid,
        identity_change=identity_change,
    )


def _content(item: dict[str, Any], message_type: str, where: str) -> tuple[InboundKind, str]:
    body = item.get(message_type)
    if message_type == "text":
        return InboundKind.TEXT, _required_text(_object(body, f"{where}.text"), "body", where)
    if message_type == "button":  # a template's quick-reply button
        return InboundKind.TEXT, _required_text(_object(body, f"{where}.button"), "text", where)
    if message_type == "interactive":
        interactive = _object(body, f"{where}.interactive")
        reply_type = interactive.get("type")
        if reply_type in INTERACTIVE_REPLY_TYPES:
            reply = _object(interactive.get(reply_type), f"{where}.interactive.{reply_type}")
            return InboundKind.TEXT, _required_text(reply, "title", where)
        # Flow replies, product enquiries...: nothing the agents can read as text.
        return InboundKind.LOG_ONLY, ""
    if message_type in MEDIA_TYPES:
        return InboundKind.UNSUPPORTED_MEDIA, _media_summary(message_type, body)
    if message_type == "reaction":
        return InboundKind.LOG_ONLY, _text(body if isinstance(body, dict) else None, "emoji")
    if message_type == "unsupported":
        return InboundKind.LOG_ONLY, _text(body if isinstance(body, dict) else None, "type")
    return InboundKind.LOG_ONLY, ""


def _media_summary(message_type: str, body: Any) -> str:
    """A short description for the transcript: caption, file name, place or contact names."""
    if message_type == "contacts":
        names = []
        for contact in body if isinstance(body, list) else []:
            name = _text(_mapping(contact, "name"), "formatted_name")
            if name:
                names.append(name)
        return ", ".join(names)
    data = body if isinstance(body, dict) else None
    if message_type == "location":
        place = " - ".join(part for part in (_text(data, "name"), _text(data, "address")) if part)
        latitude, longitude = _number(data, "latitude"), _number(data, "longitude")
        if latitude is not None and longitude is not None:
            coordinates = f"({latitude}, {longitude})"
            return f"{place} {coordinates}" if place else coordinates
        return place
    return _text(data, "caption") or _text(data, "filename")


def _status(item: dict[str, Any], phone_number_id: str, where: str) -> StatusUpdate:
    status = _required_text(item, "status", where)
    if len(status) > MAX_STATUS_CHARS:
        raise PayloadError(f"{where}.status: longer than {MAX_STATUS_CHARS} characters")
    return StatusUpdate(
        phone_number_id=phone_number_id,
        wamid=_wamid(item, where),
        status=status,
        timestamp=_timestamp(item, where),
        recipient_phone=_phone(item, "recipient_id", where),
        recipient_user_id=_user_id(item, "recipient_user_id", where),
        errors=_errors(item, where),
    )


def _echo(item: dict[str, Any], phone_number_id: str) -> Echo:
    where = f"message_echoes[{_describe(item.get('id'))}]"
    message_type = _type(item, where)
    phone = _phone(item, "to", where)
    user_id = _user_id(item, "to_user_id", where)
    if not phone and not user_id:
        raise PayloadError(f"{where}: no recipient (neither to nor to_user_id)")
    body = item.get(message_type)
    if message_type == "text":
        text = _text(body if isinstance(body, dict) else None, "body")
    else:
        text = _media_summary(message_type, body)
    return Echo(
        phone_number_id=phone_number_id,
        wamid=_wamid(item, where),
        timestamp=_timestamp(item, where),
        message_type=message_type,
        customer=Customer(phone=phone, user_id=user_id),
        text=text,
    )


def _errors(item: dict[str, Any], where: str) -> tuple[WhatsAppError, ...]:
    errors = []
    for index, error in enumerate(_list(item, "errors", where)):
        error = _object(error, f"{where}.errors[{index}]")
        code = error.get("code")
        if isinstance(code, str) and code.isascii() and code.isdigit() and len(code) < 16:
            code = int(code)
        if isinstance(code, bool) or not isinstance(code, int) or not 0 <= code <= MAX_ERROR_CODE:
            code = None
        # Meta's text is stored on the message and logged: masked like the client's errors.
        title = redact(_text(error, "title") or _text(error, "message"))
        details = redact(_text(_mapping(error, "error_data"), "details"))
        errors.append(WhatsAppError(code, title, details))
    return tuple(errors)


def _matching_contact(
    contacts: list[dict[str, Any]], phone: str, user_id: str
) -> dict[str, Any] | None:
    for contact in contacts:
        if (phone and contact.get("wa_id") == phone) or (
            user_id and contact.get("user_id") == user_id
        ):
            return contact
    # One message from one customer: Meta names them once, even when ids do not line up.
    return contacts[0] if len(contacts) == 1 else None


# --- field readers ---------------------------------------------------------------------------


def _describe(value: Any) -> str:
    return value if isinstance(value, str) else type(value).__name__


def _object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise PayloadError(f"{where}: expected an object, got {type(value).__name__}")
    return value


def _list(container: dict[str, Any], key: str, where: str) -> list[Any]:
    value = container.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise PayloadError(f"{where}.{key}: expected a list, got {type(value).__name__}")
    return value


def _mapping(container: Any, key: str) -> Mapping[str, Any] | None:
    if not isinstance(container, dict):
        return None
    value = container.get(key)
    return value if isinstance(value, dict) else None


def _clean(text: str) -> str:
    # PostgreSQL text cannot hold NUL; WhatsApp text never carries it.
    return text.replace("\x00", "").strip()


def _text(container: Mapping[str, Any] | None, key: str) -> str:
    """An optional string field; anything else (absent, null, a number) reads as empty."""
    if container is None:
        return ""
    value = container.get(key)
    return _clean(value) if isinstance(value, str) else ""


def _required_text(container: dict[str, Any], key: str, where: str) -> str:
    value = container.get(key)
    if not isinstance(value, str):
        raise PayloadError(f"{where}.{key}: expected a string, got {type(value).__name__}")
    return _clean(value)


def _number(container: Mapping[str, Any] | None, key: str) -> float | int | None:
    value = container.get(key) if container is not None else None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value


def _wamid(item: dict[str, Any], where: str) -> str:
    wamid = _required_text(item, "id", where)
    if not wamid or len(wamid) > MAX_WAMID_CHARS:
        raise PayloadError(f"{where}.id: expected 1 to {MAX_WAMID_CHARS} characters")
    return wamid


def _type(item: dict[str, Any], where: str) -> str:
    message_type = _required_text(item, "type", where)
    if not message_type or len(message_type) > MAX_TYPE_CHARS:
        raise PayloadError(f"{where}.type: expected 1 to {MAX_TYPE_CHARS} characters")
    return message_type


def _phone(item: Mapping[str, Any], key: str, where: str) -> str:
    value = item.get(key)
    if value is None or value == "":
        return ""
    if not isinstance(value, str) or not _PHONE_RE.match(value):
        raise PayloadError(f"{where}.{key}: expected a phone number of up to 20 digits")
    return value


def _user_id(item: Mapping[str, Any], key: str, where: str) -> str:
    value = item.get(key)
    if value is None or value == "":
        return ""
    if not isinstance(value, str) or len(value) > MAX_USER_ID_CHARS or "\x00" in value:
        raise PayloadError(f"{where}.{key}: expected a user id of up to {MAX_USER_ID_CHARS} chars")
    return value


def _phone_number_id(value: dict[str, Any], where: str) -> str:
    metadata = _object(value.get("metadata"), f"{where}.metadata")
    phone_number_id = metadata.get("phone_number_id")
    if not isinstance(phone_number_id, str) or not _PHONE_NUMBER_ID_RE.match(phone_number_id):
        raise PayloadError(f"{where}.metadata.phone_number_id: expected digits")
    return phone_number_id


def _timestamp(item: dict[str, Any], where: str) -> datetime:
    """Meta's Unix timestamp (a string of digits; an integer is accepted too)."""
    value = item.get("timestamp")
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) < 16:
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise PayloadError(f"{where}.timestamp: expected a Unix timestamp")
    try:
        return datetime.fromtimestamp(value, tz=UTC)
    except (OverflowError, OSError, ValueError) as exc:
        raise PayloadError(f"{where}.timestamp: out of range") from exc
