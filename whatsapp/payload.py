"""The WhatsApp Cloud API webhook body, parsed into typed events. Pure module.

One POST carries ``entry[].changes[]``; a change's ``field`` says what its ``value`` holds:

- ``messages``: ``messages[]`` sent by customers (with ``contacts[]`` naming them), ``statuses[]``
  of messages the business sent, and ``errors[]`` about the number itself;
- ``smb_message_echoes``: ``message_echoes[]``, messages staff sent from the WhatsApp Business app
  when the number runs in coexistence mode.

Customers are named by their phone (``wa_id``/``from``) and by their business-scoped user id
(``contacts[].user_id``, ``messages[].from_user_id``); either may be missing, not both.

The parser is tolerant of missing optional fields and of changes it does not handle (they are listed
in ``ignored_changes``). Each message, status and echo is read on its own
(docs/operations.md, Per-item parsing): one whose shape cannot be accepted — a missing message id,
timestamp or sender, a field of the wrong type, an id too long to store, a message WhatsApp itself
could not render (``interactive`` with no body) — never refuses the others. A message whose id and
sender are readable becomes an ``UNREADABLE`` `InboundMessage` carrying the reason (the channel
stores it and answers it like media); anything else unreadable (a status, an echo, a change without
its number) is listed in ``unreadable`` with the reason. Only a body that is not an object raises
`PayloadError`.

Poison values (docs/operations.md, Poison deliveries): `decode_body` replaces lone UTF-16 surrogates
(``"\\ud800"``, which PostgreSQL cannot store in text) with U+FFFD everywhere in the document, keys
included; given the reception time, `parse_payload` replaces a timestamp before the Cloud API
existed (`CLOUD_API_EPOCH`) or more than `MAX_CLOCK_AHEAD` ahead of it by the reception time and
says so on the item (``timestamp_replaced``), so a year-9999 timestamp can neither close a session
nor pin one to the future.
"""

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
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
MAX_CALLBACK_DATA_CHARS = 512
MAX_REPLY_ID_CHARS = 256  # Meta's limit on a reply button's or list row's id
MAX_ERROR_CODE = 2**31 - 1  # a 32-bit integer column
# ASCII digits only: `\d` would also match other scripts' digits.
_PHONE_RE = re.compile(r"^[0-9]{1,20}$")
_PHONE_NUMBER_ID_RE = re.compile(r"^[0-9]{1,32}$")

TEXT_TYPES = frozenset({"text", "interactive", "button"})
MEDIA_TYPES = frozenset({"image", "audio", "video", "document", "sticker", "location", "contacts"})
# Media types whose bytes Meta keeps for download (by id); location and contacts carry only data.
MEDIA_FILE_TYPES = frozenset({"image", "audio", "video", "document", "sticker"})
MAX_MEDIA_ID_CHARS = 128
MAX_MIME_TYPE_CHARS = 255
MAX_SHA256_CHARS = 128
MAX_FILENAME_CHARS = 255
INTERACTIVE_REPLY_TYPES = frozenset({"button_reply", "list_reply"})
# Timestamps outside [CLOUD_API_EPOCH, reception + MAX_CLOCK_AHEAD] are replaced by the reception
# time. The Cloud API was opened to all businesses in May 2022: nothing it sends is older; Meta's
# clock and ours agree within seconds, so a day ahead is a broken or forged value.
CLOUD_API_EPOCH = datetime(2022, 5, 1, tzinfo=UTC)
MAX_CLOCK_AHEAD = timedelta(days=1)
# The message type an unreadable message is stored with.
UNREADABLE_TYPE = "unsupported"
_SURROGATE_RE = re.compile(r"[\ud800-\udfff]")
# A JSON escape of a surrogate (``\ud800``...``\udfff``) or one encoded raw (CESU-style bytes
# that `json.loads` lets through): only bodies holding one need the document walked.
_MAYBE_SURROGATE_RE = re.compile(rb"\\u[dD][89a-fA-F]|\xed[\xa0-\xbf]")


class MalformedBodyError(ValueError):
    """The body is not JSON (or not UTF-8): the webhook answers 400 and stores nothing."""


class PayloadError(ValueError):
    """Valid JSON whose shape cannot be accepted; the message says where and why."""


class InboundKind(StrEnum):
    """What the channel does with a customer's message."""

    TEXT = "text"  # text, interactive reply or template button: becomes part of a turn
    # image, audio, video, document, sticker, location, contacts: kept with their `MediaInfo`
    MEDIA = "media"
    LOG_ONLY = "log_only"  # unsupported and unknown types: logged only
    # An emoji put on (or, empty, taken off) one of the conversation's messages: stored on that
    # message (`InboundMessage.reacted_wamid`); it starts no turn.
    REACTION = "reaction"
    IDENTITY_CHANGE = "identity_change"  # `system`: the customer's phone or user id changed
    # Its id and sender are readable, the rest is not (`InboundMessage.reason` says why): stored
    # and answered with the fixed unsupported-content text.
    UNREADABLE = "unreadable"


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
class MediaInfo:
    """What a media message says about its content: for files, Meta's media id (to download the
    bytes while Meta keeps them) and what they should be; for location and contacts, the data
    itself (`data`). Fields Meta did not send, or sent with the wrong type, read as empty; a media
    id too long to store reads as empty too (the download then fails) rather than truncated."""

    kind: str
    media_id: str = ""
    mime_type: str = ""
    sha256: str = ""
    caption: str = ""
    filename: str = ""
    voice: bool = False
    # location: latitude, longitude, name, address; contacts: a list of {name, phones}.
    data: dict[str, Any] = field(default_factory=dict)


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
    # UNREADABLE: why the message could not be read (the parser's words, Meta's errors first).
    reason: str = ""
    # The timestamp Meta sent, when it was out of range and replaced by the reception time.
    timestamp_replaced: str = ""
    # MEDIA: the media's metadata (MediaInfo).
    media: MediaInfo | None = None
    # An interactive reply: which one ("button_reply" or "list_reply") and the id our message
    # gave the button or row tapped (its title is `text`).
    reply_type: str = ""
    reply_id: str = ""
    # A reaction: the wamid of the message reacted to (`text` is the emoji, empty when removed).
    reacted_wamid: str = ""


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
    timestamp_replaced: str = ""
    # biz_opaque_callback_data: what our send put there, echoed by Meta (statuses.py)
    callback_data: str = ""


@dataclass(frozen=True, slots=True)
class Echo:
    """A message staff sent from the WhatsApp Business app (coexistence)."""

    phone_number_id: str
    wamid: str
    timestamp: datetime
    message_type: str
    customer: Customer
    text: str
    timestamp_replaced: str = ""
    # A reaction staff gave in the app: the wamid of the message reacted to (`text` is the
    # emoji, empty when taken off).
    reacted_wamid: str = ""


@dataclass(frozen=True, slots=True)
class UnreadableItem:
    """A status, an echo, a message without a readable id or sender, or a whole change (no
    phone number id) that could not be read: `where` in the body, and why."""

    where: str
    reason: str


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
    unreadable: tuple[UnreadableItem, ...] = ()

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
        return (
            len(self.messages)
            + len(self.statuses)
            + len(self.echoes)
            + len(self.errors)
            + len(self.unreadable)
        )


def decode_body(raw: bytes) -> Any:
    """The JSON document of a webhook body, lone surrogates replaced with U+FFFD;
    `MalformedBodyError` when it is not JSON."""
    try:
        document = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        # ValueError covers JSONDecodeError, invalid UTF-8 and integers too long to convert.
        raise MalformedBodyError(f"body is not JSON: {exc.__class__.__name__}") from exc
    if _MAYBE_SURROGATE_RE.search(raw):
        document = without_surrogates(document)
    return document


def without_surrogates(document: Any) -> Any:
    """`document` with every lone UTF-16 surrogate (in strings and keys) replaced by U+FFFD.

    `json.loads` turns ``"\\ud800"`` into a lone surrogate, which no UTF-8 text column accepts:
    PostgreSQL's driver refuses to encode it, so one customer's broken emoji would make the
    whole delivery unstorable. Iterative, so a deeply nested document cannot exhaust the stack;
    containers are cleaned in place.
    """
    root = [document]
    stack: list[list[Any] | dict[Any, Any]] = [root]
    while stack:
        container = stack.pop()
        if isinstance(container, list):
            for index, value in enumerate(container):
                if isinstance(value, str):
                    container[index] = _SURROGATE_RE.sub("\ufffd", value)
                elif isinstance(value, list | dict):
                    stack.append(value)
            continue
        for key in list(container):
            value = container[key]
            if isinstance(value, str):
                value = _SURROGATE_RE.sub("\ufffd", value)
            elif isinstance(value, list | dict):
                stack.append(value)
            clean_key = _SURROGATE_RE.sub("\ufffd", key) if isinstance(key, str) else key
            if clean_key != key:
                del container[key]
            container[clean_key] = value
    return root[0]


def parse_webhook_body(raw: bytes, *, received_at: datetime | None = None) -> WebhookPayload:
    return parse_payload(decode_body(raw), received_at=received_at)


def parse_payload(document: Any, *, received_at: datetime | None = None) -> WebhookPayload:
    """Every entry, change, message, status and echo of a decoded webhook body, each read on its
    own; with `received_at`, out-of-range timestamps are replaced by it (module docstring)."""
    if not isinstance(document, dict):
        raise PayloadError("body: expected an object")
    obj = document.get("object", WABA_OBJECT)
    if obj != WABA_OBJECT:
        return WebhookPayload(ignored_changes=(f"object:{_describe(obj)}",))
    builder = _Builder(received_at)
    for e_index, entry in enumerate(builder.items(document, "entry", "body")):
        where = f"entry[{e_index}]"
        if not isinstance(entry, dict):
            builder.refuse(where, f"{where}: expected an object, got {type(entry).__name__}")
            continue
        for c_index, change in enumerate(builder.items(entry, "changes", where)):
            if not isinstance(change, dict):
                c_where = f"{where}.changes[{c_index}]"
                builder.refuse(c_where, f"{c_where}: expected an object, got {_type_of(change)}")
                continue
            builder.add_change(change, where)
    return builder.build()


def _type_of(value: Any) -> str:
    return type(value).__name__


class _Builder:
    def __init__(self, received_at: datetime | None) -> None:
        self.received_at = received_at
        self.messages: list[InboundMessage] = []
        self.statuses: list[StatusUpdate] = []
        self.echoes: list[Echo] = []
        self.errors: list[ChangeErrors] = []
        self.ignored: list[str] = []
        self.unreadable: list[UnreadableItem] = []

    def build(self) -> WebhookPayload:
        return WebhookPayload(
            messages=tuple(self.messages),
            statuses=tuple(self.statuses),
            echoes=tuple(self.echoes),
            errors=tuple(self.errors),
            ignored_changes=tuple(self.ignored),
            unreadable=tuple(self.unreadable),
        )

    def refuse(self, where: str, reason: str) -> None:
        self.unreadable.append(UnreadableItem(where, _relative(reason, where)))

    def items(self, container: dict[str, Any], key: str, where: str) -> list[Any]:
        """`container[key]` as a list; anything else is listed as unreadable and reads as []."""
        try:
            return _list(container, key, where)
        except PayloadError as exc:
            self.refuse(f"{where}.{key}", str(exc))
            return []

    def add_change(self, change: dict[str, Any], entry_where: str) -> None:
        field = change.get("field")
        if field not in (FIELD_MESSAGES, FIELD_ECHOES):
            # history, smb_app_state_sync, account_update...: not this channel's business.
            self.ignored.append(_describe(field))
            return
        where = f"{entry_where}.changes[{field}].value"
        try:
            value = _object(change.get("value"), where)
            phone_number_id = _phone_number_id(value, where)
        except PayloadError as exc:
            # Without its number nothing in the change can be routed.
            self.refuse(where, str(exc))
            return
        try:
            change_errors = _errors(value, where)
        except PayloadError as exc:
            self.refuse(f"{where}.errors", str(exc))
            change_errors = ()
        if field == FIELD_ECHOES:
            for index, echo in enumerate(self.items(value, "message_echoes", where)):
                item_where = f"{where}.message_echoes[{index}]"
                try:
                    self.echoes.append(
                        _echo(_object(echo, item_where), phone_number_id, self.received_at)
                    )
                except PayloadError as exc:
                    self.refuse(item_where, str(exc))
        else:
            # A contact that is not an object names nobody; the messages are read without it.
            contacts = [c for c in self.items(value, "contacts", where) if isinstance(c, dict)]
            for index, message in enumerate(self.items(value, "messages", where)):
                self._add_message(
                    message, phone_number_id, contacts, f"{where}.messages[{index}]", change_errors
                )
            for index, status in enumerate(self.items(value, "statuses", where)):
                item_where = f"{where}.statuses[{index}]"
                try:
                    item = _object(status, item_where)
                    self.statuses.append(
                        _status(item, phone_number_id, item_where, self.received_at)
                    )
                except PayloadError as exc:
                    self.refuse(item_where, str(exc))
        if change_errors:
            self.errors.append(ChangeErrors(phone_number_id, change_errors))

    def _add_message(
        self,
        message: Any,
        phone_number_id: str,
        contacts: list[dict[str, Any]],
        where: str,
        change_errors: tuple[WhatsAppError, ...],
    ) -> None:
        try:
            item = _object(message, where)
            self.messages.append(_message(item, phone_number_id, contacts, where, self.received_at))
        except PayloadError as exc:
            reason = _reason(str(exc), where, change_errors)
            unreadable = _unreadable_message(
                message, phone_number_id, contacts, where, reason, self.received_at
            )
            if unreadable is None:
                self.refuse(where, reason)
            else:
                self.messages.append(unreadable)


def _reason(error: str, where: str, change_errors: tuple[WhatsAppError, ...]) -> str:
    """Why an item could not be read, short enough to keep with it: Meta's own errors about the
    change first (e.g. ``131000 Unsupported webhook payload``), then the parser's, relative to
    the item."""
    relative = _relative(error, where)
    meta = [
        " ".join(
            part
            for part in (str(e.code) if e.code is not None else "", e.details or e.title)
            if part
        )
        for e in change_errors
    ]
    return "; ".join([*(m for m in meta if m), relative])


def _relative(error: str, where: str) -> str:
    """The parser's error without the item's own place, which is kept beside it."""
    return error.removeprefix(where).lstrip(".: ") or error


def _unreadable_message(
    message: Any,
    phone_number_id: str,
    contacts: list[dict[str, Any]],
    where: str,
    reason: str,
    received_at: datetime | None,
) -> InboundMessage | None:
    """An UNREADABLE message when at least its id and sender can be read (so it is stored once
    and answered), else None — also for a broken ``system`` message, which the customer did not
    write and must not be answered. A missing or broken timestamp reads as the reception time."""
    if not isinstance(message, dict) or message.get("type") == "system":
        return None
    try:
        wamid = _wamid(message, where)
        phone = _phone(message, "from", where)
        user_id = _user_id(message, "from_user_id", where)
    except PayloadError:
        return None
    contact = _matching_contact(contacts, phone, user_id)
    if contact is not None:
        try:
            phone = phone or _phone(contact, "wa_id", f"{where}.contact")
            user_id = user_id or _user_id(contact, "user_id", f"{where}.contact")
        except PayloadError:
            pass
    if not phone and not user_id:
        return None
    try:
        timestamp, replaced = _timestamp(message, where, received_at)
    except PayloadError:
        if received_at is None:
            return None
        timestamp, replaced = received_at, _describe_value(message.get("timestamp"))
    return InboundMessage(
        phone_number_id=phone_number_id,
        wamid=wamid,
        timestamp=timestamp,
        message_type=UNREADABLE_TYPE,
        kind=InboundKind.UNREADABLE,
        customer=Customer(
            phone=phone,
            user_id=user_id,
            name=_text(_mapping(contact, "profile") if contact else None, "name"),
        ),
        text="",
        reason=reason,
        timestamp_replaced=replaced,
    )


def _message(
    item: dict[str, Any],
    phone_number_id: str,
    contacts: list[dict[str, Any]],
    where: str,
    received_at: datetime | None,
) -> InboundMessage:
    wamid = _wamid(item, where)
    timestamp, replaced = _timestamp(item, where, received_at)
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
    media = None
    reply_type = reply_id = reacted_wamid = ""
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
        if kind == InboundKind.MEDIA:
            media = _media_info(message_type, item.get(message_type))
        reply_type, reply_id = _interactive_reply(item, message_type)
        reacted_wamid = ""
        if message_type == "reaction":
            reacted_wamid = _text(_mapping(item, "reaction"), "message_id")[:MAX_WAMID_CHARS]
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
        timestamp_replaced=replaced,
        media=media,
        reply_type=reply_type,
        reply_id=reply_id,
        reacted_wamid=reacted_wamid,
    )


def _interactive_reply(item: dict[str, Any], message_type: str) -> tuple[str, str]:
    """An interactive reply's type and the id of the button or row tapped ("", "" otherwise)."""
    if message_type != "interactive":
        return "", ""
    interactive = _mapping(item, "interactive")
    reply_type = _text(interactive, "type")
    if reply_type not in INTERACTIVE_REPLY_TYPES:
        return "", ""
    return reply_type, _text(_mapping(interactive, reply_type), "id")[:MAX_REPLY_ID_CHARS]


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
        return InboundKind.MEDIA, _media_summary(message_type, body)
    if message_type == "reaction":
        return InboundKind.REACTION, _text(body if isinstance(body, dict) else None, "emoji")
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


def _media_info(message_type: str, body: Any) -> MediaInfo:
    """The media's metadata; never refuses the message (a broken field reads as empty)."""
    if message_type == "contacts":
        return MediaInfo(kind=message_type, data={"contacts": _contact_cards(body)})
    data = body if isinstance(body, dict) else None
    if message_type == "location":
        location = {
            "latitude": _number(data, "latitude"),
            "longitude": _number(data, "longitude"),
            "name": _text(data, "name"),
            "address": _text(data, "address"),
        }
        return MediaInfo(kind=message_type, data=location)
    media_id = _text(data, "id")
    return MediaInfo(
        kind=message_type,
        media_id=media_id if len(media_id) <= MAX_MEDIA_ID_CHARS else "",
        mime_type=_text(data, "mime_type")[:MAX_MIME_TYPE_CHARS],
        sha256=_text(data, "sha256")[:MAX_SHA256_CHARS],
        caption=_text(data, "caption"),
        filename=_text(data, "filename")[:MAX_FILENAME_CHARS],
        voice=data is not None and data.get("voice") is True,
    )


def _contact_cards(body: Any) -> list[dict[str, Any]]:
    """Each shared contact card's formatted name and phones (the number as written, and its
    WhatsApp id when Meta knows it)."""
    cards = []
    for contact in body if isinstance(body, list) else []:
        phones = []
        for phone in _items(contact, "phones"):
            number, wa_id = _text(phone, "phone"), _text(phone, "wa_id")
            if number or wa_id:
                phones.append({"phone": number, "wa_id": wa_id})
        name = _text(_mapping(contact, "name"), "formatted_name")
        if name or phones:
            cards.append({"name": name, "phones": phones})
    return cards


def _items(container: Any, key: str) -> list[Mapping[str, Any]]:
    """The objects of an optional list field; anything else reads as empty."""
    value = container.get(key) if isinstance(container, dict) else None
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _status(
    item: dict[str, Any], phone_number_id: str, where: str, received_at: datetime | None
) -> StatusUpdate:
    status = _required_text(item, "status", where)
    if len(status) > MAX_STATUS_CHARS:
        raise PayloadError(f"{where}.status: longer than {MAX_STATUS_CHARS} characters")
    timestamp, replaced = _timestamp(item, where, received_at)
    return StatusUpdate(
        phone_number_id=phone_number_id,
        wamid=_wamid(item, where),
        status=status,
        timestamp=timestamp,
        recipient_phone=_phone(item, "recipient_id", where),
        recipient_user_id=_user_id(item, "recipient_user_id", where),
        errors=_errors(item, where),
        timestamp_replaced=replaced,
        callback_data=_callback_data(item),
    )


def _callback_data(item: Mapping[str, Any]) -> str:
    """``biz_opaque_callback_data`` when it is a plausible one (Meta allows 512 characters);
    anything else is ignored rather than refusing the status."""
    value = item.get("biz_opaque_callback_data")
    if isinstance(value, str) and len(value) <= MAX_CALLBACK_DATA_CHARS and "\x00" not in value:
        return value
    return ""


def _echo(item: dict[str, Any], phone_number_id: str, received_at: datetime | None) -> Echo:
    where = f"message_echoes[{_describe(item.get('id'))}]"
    message_type = _type(item, where)
    phone = _phone(item, "to", where)
    user_id = _user_id(item, "to_user_id", where)
    if not phone and not user_id:
        raise PayloadError(f"{where}: no recipient (neither to nor to_user_id)")
    body = item.get(message_type)
    reacted_wamid = ""
    if message_type == "text":
        text = _text(body if isinstance(body, dict) else None, "body")
    elif message_type == "reaction":
        reaction = body if isinstance(body, dict) else None
        text = _text(reaction, "emoji")
        reacted_wamid = _text(reaction, "message_id")[:MAX_WAMID_CHARS]
    else:
        text = _media_summary(message_type, body)
    timestamp, replaced = _timestamp(item, where, received_at)
    return Echo(
        phone_number_id=phone_number_id,
        wamid=_wamid(item, where),
        timestamp=timestamp,
        message_type=message_type,
        customer=Customer(phone=phone, user_id=user_id),
        text=text,
        timestamp_replaced=replaced,
        reacted_wamid=reacted_wamid,
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


def _timestamp(
    item: dict[str, Any], where: str, received_at: datetime | None
) -> tuple[datetime, str]:
    """Meta's Unix timestamp (a string of digits; an integer is accepted too), and "" — or, with
    `received_at`, when it lies before `CLOUD_API_EPOCH` or more than `MAX_CLOCK_AHEAD` after the
    reception, the reception time and the value Meta sent."""
    raw = item.get("timestamp")
    value = raw
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) < 16:
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise PayloadError(f"{where}.timestamp: expected a Unix timestamp")
    try:
        moment = datetime.fromtimestamp(value, tz=UTC)
    except (OverflowError, OSError, ValueError) as exc:
        if received_at is None:
            raise PayloadError(f"{where}.timestamp: out of range") from exc
        return received_at, _describe_value(raw)
    if received_at is not None and not (CLOUD_API_EPOCH <= moment <= received_at + MAX_CLOCK_AHEAD):
        return received_at, _describe_value(raw)
    return moment, ""


def _describe_value(value: Any) -> str:
    """A short printable rendering of a bad value, for the event that reports it (never the
    repr of a container, which a deeply nested one would turn into a RecursionError)."""
    if isinstance(value, str | int | float) or value is None:
        return repr(value)[:64]
    return type(value).__name__
