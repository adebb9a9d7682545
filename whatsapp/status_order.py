"""The order of an outbound message's delivery statuses. Pure module.

A status only moves forward: ``pending < sent < failed < delivered < read < played``. Meta may
deliver callbacks out of order (``read`` before ``delivered``) or twice; a late ``delivered`` never
hides a ``read``. ``failed`` ranks above ``sent`` (a message accepted by the API can still fail
on the way) and below ``delivered`` (a message that reached the phone did not fail).

Every send carries our message id as ``biz_opaque_callback_data``, which Meta echoes in the
message's status callbacks. A worker killed after the Graph API accepted a message but before it
stored the wamid leaves the message unsent in our books; the first status callback then tells
which message that wamid is, so the retry finds it sent instead of sending it twice.
"""

import re

STATUS_ORDER: tuple[str, ...] = ("", "pending", "sent", "failed", "delivered", "read", "played")
KNOWN_STATUSES = frozenset(STATUS_ORDER[2:])
FAILED = "failed"


def statuses_before(status: str) -> tuple[str, ...]:
    """The stored statuses from which a message may move to `status` (empty when unknown)."""
    if status not in KNOWN_STATUSES:
        return ()
    return STATUS_ORDER[: STATUS_ORDER.index(status)]


_CALLBACK_PREFIX = "message:"
_CALLBACK = re.compile(r"message:([1-9][0-9]{0,18})")


def send_callback_data(message_id: int) -> str:
    """The ``biz_opaque_callback_data`` a send of OUTBOUND message `message_id` carries."""
    return f"{_CALLBACK_PREFIX}{message_id}"


def message_id_from_callback(data: str) -> int | None:
    """The OUTBOUND message id a status callback's ``biz_opaque_callback_data`` names, if any."""
    match = _CALLBACK.fullmatch(data)
    return int(match.group(1)) if match else None
