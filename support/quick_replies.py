"""The quick replies a staff member may insert, as the composer lists them after "/".

A staff member uses their own personal replies and the shared ones. A query matches a reply
whose shortcut starts with it, then one whose title contains it (case-insensitively); shortcut
matches come first, then by shortcut, a personal reply before a shared one with the same
shortcut; at most `MAX_MATCHES`, in one query.

The texts come with their placeholders filled: `CUSTOMER_FIRST_NAME` ("{{primeiro_nome}}") by
the customer's first name, `STAFF_FIRST_NAME` ("{{atendente}}") by the staff member's. An
unknown customer name leaves its placeholder in the text, for staff to complete before sending.
"""

from dataclasses import dataclass
from typing import Any

from django.db.models import Case, Q, Value, When
from django.db.models.expressions import Combinable

from support.models import QuickReply

MAX_MATCHES = 10
CUSTOMER_FIRST_NAME = "{{primeiro_nome}}"
STAFF_FIRST_NAME = "{{atendente}}"


@dataclass(frozen=True, slots=True)
class QuickReplyMatch:
    shortcut: str
    title: str
    text: str
    shared: bool

    def as_json(self) -> dict[str, Any]:
        return {
            "shortcut": self.shortcut,
            "title": self.title,
            "text": self.text,
            "shared": self.shared,
        }


def first_name(name: str) -> str:
    """The first word of a name ("" for none)."""
    words = name.split()
    return words[0] if words else ""


def staff_first_name(user: Any) -> str:
    """How a staff member signs a quick reply: their first name, else their username."""
    return first_name(user.first_name or "") or user.get_username()


def fill_placeholders(text: str, *, customer_first_name: str, staff_name: str) -> str:
    if customer_first_name:
        text = text.replace(CUSTOMER_FIRST_NAME, customer_first_name)
    return text.replace(STAFF_FIRST_NAME, staff_name)


def quick_reply_matches(
    *, user: Any, query: str, customer_first_name: str
) -> list[QuickReplyMatch]:
    """The user's personal and the shared replies matching `query` (every one for "")."""
    replies = QuickReply.objects.filter(Q(owner=user) | Q(owner__isnull=True))
    by_shortcut: Combinable
    if query:
        replies = replies.filter(Q(shortcut__istartswith=query) | Q(title__icontains=query))
        by_shortcut = Case(When(shortcut__istartswith=query, then=Value(0)), default=Value(1))
    else:
        by_shortcut = Value(0)
    personal_first = Case(When(owner__isnull=True, then=Value(1)), default=Value(0))
    rows = (
        replies.annotate(by_shortcut=by_shortcut, personal_first=personal_first)
        .order_by("by_shortcut", "shortcut", "personal_first", "id")
        .values_list("shortcut", "title", "text", "owner_id")[:MAX_MATCHES]
    )
    staff_name = staff_first_name(user)
    return [
        QuickReplyMatch(
            shortcut=shortcut,
            title=title,
            text=fill_placeholders(
                text, customer_first_name=customer_first_name, staff_name=staff_name
            ),
            shared=owner_id is None,
        )
        for shortcut, title, text, owner_id in rows
    ]
