"""The session page read as a chat: the transcript and the data panels beside it.

Presentation logic of the session change view (`SessionAdmin.render_change_form`); it reads the
session's messages, internal notes, model calls and latest summary in a fixed number of queries.
The notes (`support.models.InternalNote`) are placed among the messages by time: each before the
first message written after it, the messages keeping their conversation order. Given a masker
(staff without `conversations.view_personal_data`), every text it returns is masked.
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count, Sum
from django.urls import reverse
from django.utils import timezone
from django.utils.formats import date_format, number_format
from django.utils.html import escape, format_html
from django.utils.safestring import SafeString
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from agents.masking import Masker
from agents.parameters import ParameterSchemaError, parse_parameter_schema
from agents.texts import shortened
from conversations.admin.display import format_data_value, whatsapp_html
from conversations.event_codes import EventCode
from conversations.labels import (
    agent_label,
    delivery_error_text,
    delivery_label,
    event_text,
    handoff_explanation,
    handoff_label,
    message_origin,
    moment_text,
    summary_closing_reason_text,
    summary_error_text,
)
from conversations.message_order import newest_in_conversation_order
from conversations.models import (
    SUPERSEDED,
    DeliveryStatus,
    Direction,
    HandoffSummary,
    LLMCall,
    Message,
    Session,
)
from conversations.privacy.personal_data import masked_copy
from knowledge_base.models import Service
from staff_auth.names import staff_name
from support.admin.media_block import KIND_LABELS, MediaBlock, media_block, message_media
from support.models import InternalNote
from whatsapp import CUSTOMER_SERVICE_WINDOW
from whatsapp.interactive import INTERACTIVE_MESSAGE_TYPE, options_of

# The transcript shows the newest messages of a session; older ones are in the message log.
MAX_TRANSCRIPT_MESSAGES = 500
# And the newest notes: a conversation has a few; this bounds the page all the same.
MAX_TRANSCRIPT_NOTES = 200

# A quoted message is shown to about this many characters above the reply.
QUOTE_CHARS = 120
# An INBOUND tap's marker, by the reply's type (Message.interactive["type"]).
REPLY_KINDS = {"button_reply": _("button"), "list_reply": _("list")}

# The handoffs and summaries the history panel lists, newest first.
MAX_HANDOFFS = 20
# A plain dict: Model.get_FOO_display() rebuilds its lookup on every call, 300 times a page.

_DATA_FIELDS = ("technical_data", "technical_extras", "registration_data", "registration_extras")
REGISTRATION_LABELS = {
    "nome": _("Name"),
    "email": _("E-mail"),
    "documento": _("Document (CPF/CNPJ)"),
    "empresa": _("Company"),
    "cidade": _("City"),
    "uf": _("State (UF)"),
    "telefone": _("Alternative phone"),
}


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
    text: str  # the message's content, masked for staff who may not read personal data
    html: SafeString  # `text` escaped, WhatsApp's *bold* in bold (`whatsapp_html`)
    side: str  # "customer", "bot", "staff" or "system"
    superseded: bool
    turn_cost: str  # on the last message of a turn that called the model; else ""
    who: str
    meta: str  # time and WhatsApp type
    delivery: str  # outbound only: the delivery status, its time, and any error
    delivery_failed: bool
    # Where an outbound text came from ("código 1", "texto fixo da transferência"): behind
    # "Detalhes técnicos" for Support.
    technical: str = ""
    retryable: bool = False  # a failed team reply not sent again yet: "Tentar de novo"
    media: MediaBlock | None = None  # a media message's file, place or card (media.html)
    # A quoted reply: the quoted message's text ("" when the message quotes none; "mensagem não
    # encontrada" when it is not in this conversation).
    quote: str = ""
    reaction: str = ""  # the customer's emoji on this message
    options: list[str] = field(default_factory=list)  # an interactive message's buttons or rows
    reply_kind: str = ""  # an INBOUND tap: "botão" or "lista"


@dataclass(frozen=True, slots=True)
class NoteEntry:
    """An internal note in the chat: staff only, in its own colour (``bubble note``)."""

    note: InternalNote
    text: str  # masked for staff who may not read personal data
    html: SafeString  # `text` escaped, *bold* in bold
    who: str  # "Nota interna · bruno"
    meta: str  # its time, as the messages' ("20/11 10:00:01")
    side: str = "note"
    turn_cost: str = ""  # the template reads every entry's


# Who may freeze a bot's answer as a prompt test case (governance's test cases, named here by
# their permission: the two apps are siblings and import nothing from each other).
SAVE_CASE_PERMISSION = "governance.add_prompttestcase"


def can_save_cases(user: Any) -> bool:
    """Whether a bot's bubble links to "Guardar como caso de teste" for `user`: the page it
    opens shows the call's reply, so its reader must also be one who may read model calls."""
    return bool(user.has_perm(SAVE_CASE_PERMISSION) and user.has_perm("conversations.view_llmcall"))


def save_case_url(entry: "TranscriptEntry") -> str:
    """The "Guardar como caso de teste" page of a bot's bubble written by a turn; "" for any
    other bubble."""
    if entry.side != "bot" or not entry.message.turn_id:
        return ""
    return reverse("admin:governance_prompttestcase_from_message", args=[entry.message.pk])


def note_author(note: InternalNote) -> str:
    """ "Nota interna · bruno"; "Nota interna" once the author's account is gone. `note` is
    loaded with its author."""
    label = str(_("Internal note"))
    return f"{label} · {staff_name(note.author)}" if note.author is not None else label


def note_entry(note: InternalNote, *, masker: Masker | None) -> NoteEntry:
    text = masker.text(note.text) if masker is not None else note.text
    return NoteEntry(
        note=note,
        text=text,
        html=whatsapp_html(text),
        who=note_author(note),
        meta=moment_text(note.created_at),
    )


def with_notes(
    entries: list[TranscriptEntry], notes: list[NoteEntry]
) -> list[TranscriptEntry | NoteEntry]:
    """`entries` in their order, each note (oldest first) before the first message created
    after it; notes newer than every message last."""
    merged: list[TranscriptEntry | NoteEntry] = []
    pending = iter(notes)
    note = next(pending, None)
    for entry in entries:
        while note is not None and note.note.created_at < entry.message.created_at:
            merged.append(note)
            note = next(pending, None)
        merged.append(entry)
    while note is not None:
        merged.append(note)
        note = next(pending, None)
    return merged


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
class HandoffRecord:
    """One handoff of the conversation, with the summary written for it (if any): the
    history keeps them after a give back clears the session's handoff fields."""

    at: datetime
    text: str  # the handoff event's sentence ("Transferida para uma pessoa: …")
    summary: HandoffSummary | None


@dataclass(frozen=True, slots=True)
class SessionTranscript:
    entries: list[TranscriptEntry]  # the messages shown, in conversation order
    thread: list[TranscriptEntry | NoteEntry]  # `entries` with the internal notes, by time
    omitted: bool  # older messages exist beyond MAX_TRANSCRIPT_MESSAGES
    total_cost: LLMCost
    window: ServiceWindow
    summary: HandoffSummary | None
    technical: list[DataRow]
    technical_extras: list[DataRow]
    registration: list[DataRow]
    registration_extras: list[DataRow]
    summary_data: list[DataRow]  # the summary's collected data, with the same labels
    summary_error: str  # the summary's error as a pt-BR sentence
    summary_closing_reason: str  # the minimal summary's machine reason as a pt-BR sentence
    handoff_label: str  # why the session went to a human ("cliente pediu um atendente")
    handoff_explanation: str  # the handoff's detail as a pt-BR sentence
    handoffs: list[HandoffRecord]  # newest first, at most MAX_HANDOFFS


def _data_rows(data: Any, labels: dict[str, Any]) -> list[DataRow]:
    if not isinstance(data, dict):
        return [DataRow("", "", format_data_value(data))] if data else []
    return [
        DataRow(str(key), str(labels.get(key, key)), format_data_value(value, str(key)))
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


def message_delivery(
    message: Message, *, session: Session, masker: Masker | None
) -> tuple[str, bool]:
    """An outbound message's delivery line (status, its time, any error) and whether it
    failed; ("", False) for other messages and discarded drafts."""
    if message.error == SUPERSEDED:
        return "", False
    mask = masker.text if masker is not None else str
    delivery: list[str] = []
    failed = False
    if message.direction == Direction.OUTBOUND:
        status = delivery_label(message, simulated_session=session.is_simulated)
        if message.delivery_status_at:
            status += " " + date_format(
                timezone.localtime(message.delivery_status_at), "TIME_FORMAT"
            )
        delivery.append(status)
        if message.delivery_error_code or message.delivery_error_title:
            delivery.append(
                delivery_error_text(message.delivery_error_code, mask(message.delivery_error_title))
            )
        failed = message.delivery_status == DeliveryStatus.FAILED
    if message.error:
        delivery.append(mask(message.error))
        failed = True
    return " · ".join(delivery), failed


def event_html(text: str, code: int | None) -> SafeString:
    """An event's sentence, escaped, with its model code (" (código 2)") as a technical detail
    (`<span class="tech">`) that the workspace hides from Support."""
    if code is not None:
        mark = " (" + message_origin(code, "") + ")"
        before, found, after = text.partition(mark)
        if found:
            return format_html('{}<span class="tech">{}</span>{}', before, mark, after)
    return escape(text)


def quote_text(message: Message, *, masker: Masker | None) -> str:
    """A quoted message as the reply's quote block shows it: its text (a media message without
    one: its kind), masked, cut to about `QUOTE_CHARS`."""
    text = masker.text(message.content) if masker is not None else message.content
    if not text.strip():
        text = str(KIND_LABELS.get(message.message_type, message.message_type))
    return shortened(text, QUOTE_CHARS)


def quotes_find(
    messages: Iterable[Message], *, session: Session, masker: Masker | None
) -> dict[str, str]:
    """The quote text of every message that `messages` reply to, by wamid: those among
    `messages` at no cost, the others of the session in one query (none when every quoted
    message is at hand)."""
    messages = list(messages)
    wanted = {m.reply_to_wamid for m in messages if m.reply_to_wamid}
    if not wanted:
        return {}
    at_hand = {m.wa_message_id: m for m in messages if m.wa_message_id in wanted}
    missing = wanted - at_hand.keys()
    if missing:
        at_hand |= {
            m.wa_message_id: m
            for m in session.messages.filter(wa_message_id__in=missing).only(
                "id", "session_id", "wa_message_id", "content", "message_type"
            )
            if m.wa_message_id is not None
        }
    return {wamid: quote_text(m, masker=masker) for wamid, m in at_hand.items()}


def transcript_entry(
    message: Message,
    *,
    session: Session,
    turn_cost: LLMCost | None,
    masker: Masker | None,
    retried: bool = False,
    quotes: Mapping[str, str] | None = None,
) -> TranscriptEntry:
    """One bubble; `message` is loaded with its media (`select_related("media")`) and
    `quotes` holds the text of the message it replies to (`quotes_find`)."""
    side = _side(message)
    superseded = message.error == SUPERSEDED
    mask = masker.text if masker is not None else str
    if side == "customer":
        name = session.customer_name
        if masker is not None:
            name = masker.field("customer_name", name)
        who = name or str(_("Customer"))
    elif side == "staff":
        assert message.staff_user is not None  # `_side` says "staff" only with a staff user
        who = str(_("Staff")) + f" · {staff_name(message.staff_user)}"
    else:
        who = str(_("Bot")) + (f" · {agent_label(message.agent)}" if message.agent else "")
    when = moment_text(message.created_at)
    meta = [when]
    if side == "system":
        # The event's sentence says what the codes say ("Mudou para Qualificação (código 2)").
        text = mask(event_text(message))
        return TranscriptEntry(
            message=message,
            text=text,
            html=event_html(text, message.code),
            side=side,
            superseded=False,
            turn_cost=turn_cost.turn_text() if turn_cost else "",
            who="",
            meta=when,
            delivery="",
            delivery_failed=False,
        )
    found = message_media(message)
    media = media_block(found, masker=masker) if found is not None else None
    # A media block names its kind itself.
    if message.message_type != "text" and media is None:
        meta.append(message.message_type)
    origin = message_origin(message.code, message.action)
    delivery, failed = message_delivery(message, session=session, masker=masker)
    text = mask(message.content)
    quote = ""
    if message.reply_to_wamid:
        quote = (quotes or {}).get(message.reply_to_wamid) or str(_("message not found"))
    interactive = message.interactive if isinstance(message.interactive, dict) else None
    options: list[str] = []
    reply_kind = ""
    if message.direction == Direction.OUTBOUND and message.message_type == INTERACTIVE_MESSAGE_TYPE:
        options = [mask(option.title) for option in options_of(interactive)]
    elif message.direction == Direction.INBOUND and interactive is not None:
        reply_kind = str(REPLY_KINDS.get(str(interactive.get("type")), _("button")))
    retryable = (
        side == "staff"
        and failed
        and not superseded
        and not retried
        and message.message_type == "text"
    )
    return TranscriptEntry(
        message=message,
        text=text,
        # A media message's text is its caption, place or contact names: the block shows them.
        html=whatsapp_html(text) if media is None else SafeString(""),
        side=side,
        superseded=superseded,
        turn_cost=turn_cost.turn_text() if turn_cost else "",
        who=who,
        meta=" · ".join(meta),
        delivery=delivery,
        delivery_failed=failed,
        technical=origin,
        retryable=retryable,
        media=media,
        quote=quote,
        reaction=message.reaction,
        options=options,
        reply_kind=reply_kind,
    )


def session_transcript(
    *, session: Session, now: datetime, masker: Masker | None = None
) -> SessionTranscript:
    """Everything the session page shows, in a fixed number of queries whatever its length
    (the messages come with their media; one more when a reply quotes a message older than
    the page); with `masker`, its personal data masked (no extra query)."""
    messages, omitted = newest_in_conversation_order(
        session.messages.without_reaction_events()
        .select_related("staff_user", "media")
        .defer("raw_response"),
        MAX_TRANSCRIPT_MESSAGES,
    )
    quotes = quotes_find(messages, session=session, masker=masker)

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
    retried = {m.json_part.get("retry_of") for m in messages if isinstance(m.json_part, dict)} - {
        None
    }
    entries = [
        transcript_entry(
            m,
            session=session,
            turn_cost=(
                costs.get(m.turn_id)
                if m.turn_id is not None and last_of_turn.get(m.turn_id) == m.pk
                else None
            ),
            masker=masker,
            retried=m.pk in retried,
            quotes=quotes,
        )
        for m in messages
    ]
    newest_notes = list(
        InternalNote.objects.filter(session=session)
        .select_related("author")
        .order_by("-created_at", "-id")[:MAX_TRANSCRIPT_NOTES]
    )
    notes = [note_entry(n, masker=masker) for n in reversed(newest_notes)]

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

    summaries = list(session.summaries.order_by("-created_at", "-id")[:MAX_HANDOFFS])
    handoff_events = list(
        session.messages.filter(direction=Direction.SYSTEM, message_type=EventCode.HANDOFF.value)
        .select_related("staff_user")
        .defer("raw_response")
        .order_by("-created_at", "-id")[:MAX_HANDOFFS]
    )
    parameter_labels = _parameter_labels(session.service)
    data = {name: getattr(session, name) for name in _DATA_FIELDS}
    if masker is not None:
        data = {name: masker.value(value) for name, value in data.items()}
        summaries = [masked_copy(s, masker) for s in summaries]
    summary = summaries[0] if summaries else None
    return SessionTranscript(
        entries=entries,
        thread=with_notes(entries, notes),
        omitted=omitted,
        total_cost=total_cost,
        window=window,
        summary=summary,
        technical=_data_rows(data["technical_data"], parameter_labels),
        technical_extras=_data_rows(data["technical_extras"], {}),
        registration=_data_rows(data["registration_data"], REGISTRATION_LABELS),
        registration_extras=_data_rows(data["registration_extras"], {}),
        summary_data=_data_rows(
            summary.collected_data if summary is not None else {},
            {**REGISTRATION_LABELS, **parameter_labels},
        ),
        summary_error=summary_error_text(summary.error) if summary is not None else "",
        summary_closing_reason=(
            summary_closing_reason_text(summary.closing_reason) if summary is not None else ""
        ),
        handoff_label=handoff_label(session.handoff_reason, session.handoff_detail),
        handoff_explanation=handoff_explanation(session.handoff_reason, session.handoff_detail),
        handoffs=_handoff_records(handoff_events, summaries, masker),
    )


def _handoff_records(
    events: list[Message], summaries: list[HandoffSummary], masker: Masker | None
) -> list[HandoffRecord]:
    """Each handoff (newest first) with the newest summary written after it and before the
    next one; a summary without a handoff event (older rows) is listed at its own time."""
    mask = masker.text if masker is not None else str
    records: list[HandoffRecord] = []
    later: datetime | None = None  # the start of the handoff after this one
    unclaimed = list(summaries)
    for event in events:
        mine = [
            s
            for s in unclaimed
            if s.created_at >= event.created_at and (later is None or s.created_at < later)
        ]
        for s in mine:
            unclaimed.remove(s)
        records.append(
            HandoffRecord(event.created_at, mask(event_text(event)), next(iter(mine), None))
        )
        later = event.created_at
    records.extend(HandoffRecord(s.created_at, "", s) for s in unclaimed)
    records.sort(key=lambda r: r.at, reverse=True)
    return records[:MAX_HANDOFFS]
