"""Receive a WhatsApp webhook delivery: keep its raw body and apply its events, in ONE transaction.

The use case of the WhatsApp webhook, by responsibility:

- `deliveries`: receive, store and reprocess a delivery, and the transaction around it;
- `events`: apply a parsed payload (messages, echoes, ``system`` messages, statuses);
- `sessions`: find, open and close a customer's session (the idle rule);
- `one_statement`: the commonest delivery (a known customer's text) in one statement (PostgreSQL);
- `hot_path`: the compiled and prepared statements of the common case.
"""

from conversations.inbound.deliveries import (
    DeliveryNotStored,
    DeliveryReceipt,
    stored_headers,
    webhook_delivery_receive,
    webhook_delivery_reprocess,
)
from conversations.inbound.events import (
    EnqueueFn,
    _Applier,
)

__all__ = [
    "DeliveryNotStored",
    "DeliveryReceipt",
    "EnqueueFn",
    "_Applier",
    "stored_headers",
    "webhook_delivery_receive",
    "webhook_delivery_reprocess",
]
