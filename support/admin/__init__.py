"""The support staff's admin: the session page read as a chat with its staff actions
(`sessions`, `transcript`, `staff_actions`), the queue of customers waiting for a person
(`queue`), the leads (`leads`), the approved message templates (`message_templates`), the
quick replies (`quick_replies`), the labels of conversations (`labels`) and the CSAT page
(`satisfaction`).
Importing them here registers the admins when Django autodiscovers `support.admin`.
"""

from support.admin.labels import LabelAdmin
from support.admin.leads import LeadAdmin
from support.admin.message_templates import MessageTemplateAdmin
from support.admin.quick_replies import QuickReplyAdmin
from support.admin.satisfaction import SatisfactionSurveyAdmin
from support.admin.sessions import SessionAdmin

__all__ = [
    "LabelAdmin",
    "LeadAdmin",
    "MessageTemplateAdmin",
    "QuickReplyAdmin",
    "SatisfactionSurveyAdmin",
    "SessionAdmin",
]
