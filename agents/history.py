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
"""

from collections.abc import Sequence
from dataclasses import dataclass

from agents.llm import ChatMessage, Role
from agents.sources import HistoryEntry

# The value of conversations.models.SUPERSEDED (agents never imports conversations).
SUPERSEDED = "superseded"
ROLE_FOR_DIRECTION: dict[str, Role] = {"INBOUND": "user", "OUTBOUND": "assistant"}
# Prefix of an assistant turn the team wrote (the model reads Portuguese prompts).
STAFF_MARK = "[Mensagem da equipe humana] "


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
    messages = [
        ChatMessage(ROLE_FOR_DIRECTION[e.direction], STAFF_MARK + e.text if e.staff else e.text)
        for e in kept
    ]
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
