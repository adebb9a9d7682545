"""The one order of a session's messages: the admin transcript and the operational summary's
input read the conversation through `newest_in_conversation_order`; the model's history reads the
same newest rows with a literal statement (`conversations.agent_sources`) and puts them in
`conversation_order`.

The rule: messages follow the order in which they reached us or were written by us — their
primary key, which the database assigns at insert — except that the customer's messages of one
burst (consecutive INBOUND messages in that order) are ordered among themselves by WhatsApp's
timestamp (then id, a message without one last), because WhatsApp may deliver a burst out of
order. A customer message that arrived after one of ours always comes after it.

Why not WhatsApp's timestamp for everything: it has one-second resolution and comes from Meta's
clock, ours only have our own time, so a reply stamped in the same second as the answer it
replies to — or a few seconds before it, by clock skew — would be placed before that answer and
the model would read its own question after the customer's reply. Why not ``created_at``:
the web process stamps inbound messages and the worker stamps ours, two hosts' clocks. The
primary key is one counter kept by the database.

The SQL half (newest first by id, limited) runs on the ``message_session_order`` index
``(session, id)``; the burst half is a linear pass in Python over the rows already read, so each
reader keeps its single query. A burst cut by the limit is ordered within what was read.
"""

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any, Protocol, TypeVar

from django.db.models import QuerySet

from conversations.models import Direction, Message


class Ordered(Protocol):
    """What the rule reads of a message (a `Message`, possibly loaded with `.only()`)."""

    pk: Any
    direction: str
    wa_timestamp: datetime | None


M = TypeVar("M", bound=Ordered)
# Newest first: the SQL order that the readers limit by; `conversation_order` reverses it.
NEWEST_FIRST = ("-id",)


def _burst_key(message: Ordered) -> tuple[bool, float, Any]:
    stamp = message.wa_timestamp
    return (stamp is None, stamp.timestamp() if stamp is not None else 0.0, message.pk)


def conversation_order(messages: Iterable[M]) -> list[M]:
    """`messages`, given in insertion order (ascending id), in conversation order."""
    ordered: list[M] = []
    burst: list[M] = []
    for message in messages:
        if message.direction == Direction.INBOUND:
            burst.append(message)
            continue
        if burst:
            ordered.extend(sorted(burst, key=_burst_key))
            burst = []
        ordered.append(message)
    ordered.extend(sorted(burst, key=_burst_key))
    return ordered


def newest_in_conversation_order(
    messages: QuerySet[Message], limit: int
) -> tuple[list[Message], bool]:
    """The newest `limit` of `messages` in conversation order, and whether older ones exist.

    One query (`limit` + 1 rows); `messages` is already filtered to one session.
    """
    if limit <= 0:
        return [], messages.exists()
    newest_first: Sequence[Message] = list(messages.order_by(*NEWEST_FIRST)[: limit + 1])
    return conversation_order(reversed(newest_first[:limit])), len(newest_first) > limit
