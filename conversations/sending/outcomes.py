"""What a send can come to, and the error that asks for a retry."""

from enum import StrEnum

from whatsapp.client import GraphAPIError


class SendOutcome(StrEnum):
    SENT = "sent"
    ALREADY_SENT = "already_sent"  # it has a wamid: never sent again
    IN_FLIGHT = "in_flight"  # another worker holds the claim of this part or an earlier one
    FAILED = "failed"  # refused for good; code and title stored on the message
    # The retries of this task are over but the Graph API may still accept it: left unsent for
    # the unsent-messages sweep's next round (conversations.sweeps), until the 24-hour window.
    DEFERRED = "deferred"
    SKIPPED = "skipped"  # no such OUTBOUND message, or a superseded draft


class RetryableSendError(Exception):
    """The Graph API may accept the message later (timeout, 5xx, 130429, 131056)."""

    def __init__(self, *, message_id: int, error: GraphAPIError) -> None:
        super().__init__(f"message {message_id}: {error}")
        self.message_id = message_id
        self.error = error
