"""The history rules: which of a session's messages the model sees, and as which role.

DESIGN.md §6 and seed 001: only the session's own messages (checked here again, whatever the
history source returned); INBOUND → ``user``, OUTBOUND → ``assistant``; SYSTEM events and
drafts stored with ``error="superseded"`` are left out; the newest `limit` are kept, oldest
first; the current message is appended unless it already is the last user entry. A media
message reads as its marker or transcript (`agents.media_markers`); entries with nothing the
model could read are left out. Pure module.

What the team wrote to the customer (a staff reply or template while the session was with a
human) stays in the history once the conversation is given back to the bot, as an
``assistant`` turn marked with `STAFF_MARK`: the customer read it from this number, so the model
must know it was said, and that a person of the team said it, not the model itself.

A customer's quoted reply (WhatsApp's ``context.id``) reads as the text it quotes, then the
reply: `QUOTE_MARK` as a prefix, ``(em resposta a: "Qual é o seu segmento?") Alimentos`` — in
the order the customer saw them, the quote above the reply; the quoted text on one line, cut at
`QUOTE_CHARS` characters with "…". Only a message of the same session is quoted (the history
source looks it up there); a reply quoting one it cannot find, or one with no text, reads as it
was written.
"""

from collections.abc import Sequence
from dataclasses import dataclass

from agents.llm import ChatMessage, Role
from agents.sources import HistoryEntry
from agents.texts import shortened

# The value of conversations.models.SUPERSEDED (agents never imports conversations).
SUPERSEDED = "superseded"
ROLE_FOR_DIRECTION: dict[str, Role] = {"INBOUND": "user", "OUTBOUND": "assistant"}
# Prefix of an assistant turn the team wrote (the model reads Portuguese prompts).
STAFF_MARK = "[Mensagem da equipe humana] "
# A quoted reply's prefix; the quote is cut at QUOTE_CHARS (enough to recognise a question).
QUOTE_MARK = '(em resposta a: "{quoted}") '
QUOTE_CHARS = 200


@dataclass(frozen=True, slots=True)
class HistorySelection:
    messages: tuple[ChatMessage, ...]
    # Entries of another session the source returned anyway (a bug upstream worth logging).
    foreign_dropped: int = 0


def select_history(
    entries: Sequence[HistoryEntry],
    *,
    session_id: int,
    limit: int,
    current_message: str | None = None,
) -> HistorySelection:
    """The messages to send after the system prompt, per the rules in the module docstring."""
    own = [entry for entry in entries if entry.session_id == session_id]
    kept = [
        entry
        for entry in own
        if entry.direction in ROLE_FOR_DIRECTION
        and entry.error != SUPERSEDED
        and entry.text.strip()
    ]
    kept = kept[-limit:] if limit > 0 else []
    messages = [ChatMessage(ROLE_FOR_DIRECTION[e.direction], entry_text(e)) for e in kept]
    if current_message is not None and current_message.strip():
        last = messages[-1] if messages else None
        already_last = (
            last is not None
            and last.role == "user"
            and last.content.strip() == current_message.strip()
        )
        if not already_last:
            messages.append(ChatMessage("user", current_message))
    return HistorySelection(tuple(messages), foreign_dropped=len(entries) - len(own))


def entry_text(entry: HistoryEntry) -> str:
    """The entry as the model reads it: marked when the team wrote it or when it quotes one."""
    if entry.staff:
        return STAFF_MARK + entry.text
    quoted = quoted_text(entry.quoted)
    if quoted:
        return QUOTE_MARK.format(quoted=quoted) + entry.text
    return entry.text


def quoted_text(text: str) -> str:
    """A quoted message's text on one line, at most `QUOTE_CHARS` characters ("…" when cut)."""
    return shortened(text, QUOTE_CHARS)
