"""What the store announces as it writes (`commit_hooks.Announcement`); the support app
subscribes and registers its work for after the commit (the handoff alert, the CRM's POST)."""

from dataclasses import dataclass

from agents.states import HandoffReason
from conversations.commit_hooks import Announcement


@dataclass(frozen=True, slots=True)
class HandoffCommitted:
    session_id: int
    reason: HandoffReason


# A session was handed to a person (`conversations.handoff.session_handoff`), announced after
# the summary's hook is registered, so an alert that waits for the summary finds it queued.
handoff_committed: Announcement[HandoffCommitted] = Announcement("handoff_committed")

# A lead waits for the CRM (``crm_status`` ``pending``; `conversations.leads.lead_create`):
# the value is its id.
lead_created: Announcement[int] = Announcement("lead_created")
