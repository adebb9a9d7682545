"""Admin of the conversation store: instances, the provider circuit and the read-only logs.

The message log, model calls, webhook deliveries, status events and summaries are read-only for
everyone, superusers included. The session page (read as a chat, with the staff actions), the
queue, the leads and the message templates are the support app's admin (`support.admin`).

One module per responsibility: `instances` (the Instance admin and its write-only token form),
`circuit` (the provider circuit), `logs` (the read-only admins), `customer_data` (the customer
data requests' page), `masking` (personal data shown masked) and `display` (shared rendering).
Importing them here registers the admins when Django autodiscovers `conversations.admin`.
"""

from conversations.admin.circuit import ProviderCircuitAdmin
from conversations.admin.instances import InstanceAdmin, InstanceForm
from conversations.admin.logs import (
    DeliveryStatusEventAdmin,
    HandoffSummaryAdmin,
    LLMCallAdmin,
    MessageAdmin,
    ReadOnlyAdmin,
    WebhookDeliveryAdmin,
)

__all__ = [
    "DeliveryStatusEventAdmin",
    "HandoffSummaryAdmin",
    "InstanceAdmin",
    "InstanceForm",
    "LLMCallAdmin",
    "MessageAdmin",
    "ProviderCircuitAdmin",
    "ReadOnlyAdmin",
    "WebhookDeliveryAdmin",
]
