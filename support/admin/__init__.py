"""The support staff's admin: the session page read as a chat with its staff actions
(`sessions`, `transcript`, `staff_actions`), the queue of customers waiting for a person
(`queue`), the leads (`leads`) and the approved message templates (`message_templates`).
Importing them here registers the admins when Django autodiscovers `support.admin`.
"""

from support.admin.leads import LeadAdmin
from support.admin.message_templates import MessageTemplateAdmin
from support.admin.sessions import SessionAdmin

__all__ = ["LeadAdmin", "MessageTemplateAdmin", "SessionAdmin"]
