"""The order of an outbound message's delivery statuses. Pure module.

A status only moves forward: ``pending < sent < failed < delivered < read < played``. Meta may
deliver callbacks out of order (``read`` before ``delivered``) or twice; a late ``delivered`` never
hides a ``read``. ``failed`` ranks above ``sent`` (a message accepted by the API can still fail
on the way) and below ``delivered`` (a message that reached the phone did not fail).
"""

STATUS_ORDER: tuple[str, ...] = ("", "pending", "sent", "failed", "delivered", "read", "played")
KNOWN_STATUSES = frozenset(STATUS_ORDER[2:])
FAILED = "failed"


def statuses_before(status: str) -> tuple[str, ...]:
    """The stored statuses from which a message may move to `status` (empty when unknown)."""
    if status not in KNOWN_STATUSES:
        return ()
    return STATUS_ORDER[: STATUS_ORDER.index(status)]
