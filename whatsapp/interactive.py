"""Interactive messages (reply buttons and lists): Meta's limits and the Graph API's
``interactive`` object, built from plain options. Pure module.

Meta's limits (Cloud API, interactive messages): a body of at most 1,024 characters; at most 3
reply buttons, each title at most 20 characters and id at most 256; a list of at most 10 rows,
each title at most 24 characters, its button label at most 20, its section title at most 24.
An option that does not fit is not cut: the caller sends plain text instead (`fits_buttons`,
`fits_list`), because a truncated option could say something else.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

# Message.message_type of an OUTBOUND interactive message (its object in Message.interactive).
INTERACTIVE_MESSAGE_TYPE = "interactive"
MAX_BODY_CHARS = 1_024
MAX_BUTTONS = 3
MAX_BUTTON_TITLE_CHARS = 20
MAX_LIST_ROWS = 10
MAX_ROW_TITLE_CHARS = 24
MAX_LIST_BUTTON_CHARS = 20
MAX_SECTION_TITLE_CHARS = 24
MAX_ID_CHARS = 256


@dataclass(frozen=True, slots=True)
class Option:
    """One button or list row: the id the reply brings back, and the title the customer sees."""

    id: str
    title: str


def _fits(options: Sequence[Option], *, most: int, title_chars: int) -> bool:
    ids = [option.id for option in options]
    return (
        0 < len(options) <= most
        and len(set(ids)) == len(ids)
        and all(0 < len(option.id) <= MAX_ID_CHARS for option in options)
        and all(0 < len(option.title.strip()) <= title_chars for option in options)
    )


def fits_buttons(body: str, options: Sequence[Option]) -> bool:
    """Whether `options` can go out as reply buttons under `body`."""
    return 0 < len(body) <= MAX_BODY_CHARS and _fits(
        options, most=MAX_BUTTONS, title_chars=MAX_BUTTON_TITLE_CHARS
    )


def fits_list(body: str, options: Sequence[Option]) -> bool:
    """Whether `options` can go out as the rows of a list message under `body`."""
    return 0 < len(body) <= MAX_BODY_CHARS and _fits(
        options, most=MAX_LIST_ROWS, title_chars=MAX_ROW_TITLE_CHARS
    )


def reply_buttons(body: str, options: Sequence[Option]) -> dict[str, Any]:
    """The ``interactive`` object of a reply-button message (check `fits_buttons` first)."""
    if not fits_buttons(body, options):
        raise ValueError("the options do not fit reply buttons")
    return {
        "type": "button",
        "body": {"text": body},
        "action": {
            "buttons": [
                {"type": "reply", "reply": {"id": option.id, "title": option.title}}
                for option in options
            ]
        },
    }


def list_message(
    body: str, options: Sequence[Option], *, button: str, section: str = ""
) -> dict[str, Any]:
    """The ``interactive`` object of a list message with one section (check `fits_list`)."""
    if not fits_list(body, options):
        raise ValueError("the options do not fit a list message")
    if not 0 < len(button) <= MAX_LIST_BUTTON_CHARS or len(section) > MAX_SECTION_TITLE_CHARS:
        raise ValueError("the list's button or section title is too long")
    rows_section: dict[str, Any] = {
        "rows": [{"id": option.id, "title": option.title} for option in options]
    }
    if section:
        rows_section["title"] = section
    return {
        "type": "list",
        "body": {"text": body},
        "action": {"button": button, "sections": [rows_section]},
    }


def options_of(interactive: dict[str, Any] | None) -> list[Option]:
    """The buttons or rows of a stored ``interactive`` object (what staff see under the text)."""
    if not interactive:
        return []
    action = interactive.get("action") or {}
    if interactive.get("type") == "button":
        return [
            Option(str(b["reply"].get("id", "")), str(b["reply"].get("title", "")))
            for b in action.get("buttons", ())
            if isinstance(b, dict) and isinstance(b.get("reply"), dict)
        ]
    return [
        Option(str(row.get("id", "")), str(row.get("title", "")))
        for section in action.get("sections", ())
        if isinstance(section, dict)
        for row in section.get("rows", ())
        if isinstance(row, dict)
    ]
