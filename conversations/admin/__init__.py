"""Admin of the conversation store: instances, sessions (read as a chat) and the read-only logs.

Session fields are never edited here; staff act on a conversation through the staff actions
(`staff_actions`: take over, assign, reply, send a template, give back, close, regenerate the
summary), and superusers keep the approved templates (`message_templates`). The message log,
model calls, webhook deliveries, status events, summaries and leads are read-only for everyone,
superusers included.

One module per responsibility: `instances` (the Instance admin and its write-only token form),
`sessions` (the Session admin, its filters and search), `transcript` (the session page read as a
chat), `queue` (the customers waiting for a person, and the header's count) and `logs` (the
read-only admins). Importing them here registers the admins when Django
autodiscovers `conversations.admin`; the names are re-exported so `conversations.admin.X` keeps
working.
"""

from conversations.admin.circuit import ProviderCircuitAdmin
from conversations.admin.instances import InstanceAdmin, InstanceForm
from conversations.admin.leads import LeadAdmin
from conversations.admin.logs import (
    DeliveryStatusEventAdmin,
    HandoffSummaryAdmin,
    LLMCallAdmin,
    MessageAdmin,
    ReadOnlyAdmin,
    WebhookDeliveryAdmin,
)
from conversations.admin.message_templates import MessageTemplateAdmin
from conversations.admin.sessions import (
    MAX_SEARCH_CHARS,
    MIN_MESSAGE_SEARCH_CHARS,
    SegmentFilter,
    SessionAdmin,
    sessions_search,
)
from conversations.admin.transcript import (
    MAX_TRANSCRIPT_MESSAGES,
    REGISTRATION_LABELS,
    DataRow,
    LLMCost,
    ServiceWindow,
    SessionTranscript,
    TranscriptEntry,
    session_transcript,
)
from whatsapp import CUSTOMER_SERVICE_WINDOW

__all__ = [
    "CUSTOMER_SERVICE_WINDOW",
    "MAX_SEARCH_CHARS",
    "MAX_TRANSCRIPT_MESSAGES",
    "MIN_MESSAGE_SEARCH_CHARS",
    "REGISTRATION_LABELS",
    "DataRow",
    "DeliveryStatusEventAdmin",
    "HandoffSummaryAdmin",
    "InstanceAdmin",
    "InstanceForm",
    "LLMCallAdmin",
    "LLMCost",
    "LeadAdmin",
    "MessageAdmin",
    "MessageTemplateAdmin",
    "ProviderCircuitAdmin",
    "ReadOnlyAdmin",
    "SegmentFilter",
    "ServiceWindow",
    "SessionAdmin",
    "SessionTranscript",
    "TranscriptEntry",
    "WebhookDeliveryAdmin",
    "session_transcript",
    "sessions_search",
]
