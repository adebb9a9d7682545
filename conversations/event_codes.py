"""The SYSTEM events of the message log: one code per event, whoever writes it.

A SYSTEM `Message` row says what happened to the session, for staff: its ``message_type`` is an
`EventCode`, its ``action``, ``code`` and ``json_part`` carry the event's parameters (the state it
moved to, the handoff's reason, the packages loaded…), and its ``content`` is empty — staff read a
pt-BR sentence rendered when the row is shown (`conversations.event_text`), so the wording can
change without touching stored rows. Rows written before the codes carried their parameters keep
their pt-BR ``content``, which is shown as it is.

Pure module (no Django import): the dispatcher, the handoff action, the webhook and the sweeps
import the codes from here; the values are the strings stored in ``message_type`` since the
first migration, and never change.
"""

from enum import StrEnum


class EventCode(StrEnum):
    """`Message.message_type` of a SYSTEM row."""

    # Written by a turn (conversations.dispatcher).
    STATE_CHANGED = "state_changed"  # code, action; json_part {"from", "to"}
    CONTEXT_LOADED = "context_loaded"  # json_part {"packages": [...]}
    DATA_REJECTED = "data_rejected"  # json_part {path: {"error": ...}}
    LEAD_CREATED = "lead_created"
    CONFIRMATION_CHANGED = "confirmation_changed"  # json_part {"changed": [...], ...}
    # A turn (code 8) or the channel (idle: action `CLOSED_IDLE`, json_part {"idle_hours"}).
    SESSION_CLOSED = "session_closed"
    # Any handoff (conversations.handoff.session_handoff): action is the reason; json_part
    # {"reason", "detail", "motive"}; a staff takeover names its user in `staff_user`.
    HANDOFF = "handoff"
    # Written by the channel (conversations.inbound).
    IDENTITY_CHANGED = "identity_changed"  # action: WhatsApp's change; content: Meta's text
    TIMESTAMP_REPLACED = "timestamp_replaced"  # json_part {"value"}
    # Written by the turn's failure handling (conversations.sweeps): json_part {"error",
    # "error_type"}.
    TURN_FAILED = "turn_failed"
    # Written by the staff actions (support.staff_actions), by `staff_user`; a take-over is
    # the handoff's own event.
    STAFF_ASSIGNED = "staff_assigned"  # json_part {"assignee_id", "assignee"}
    STAFF_GIVEN_BACK = "staff_given_back"  # json_part {"state"}
    STAFF_CLOSED = "staff_closed"  # json_part {"from_state"}
    STAFF_SUMMARY_REQUESTED = "staff_summary_requested"  # json_part {"form_token"}
    # json_part {"from", "to": {agent: prompt version}, "overrides": {history id: override id}}
    STAFF_PROMPTS_UPDATED = "staff_prompts_updated"
    # Written by the labels of a conversation (support.labels), by `staff_user`: json_part
    # {"label_id", "label": its name then}.
    STAFF_LABEL_ADDED = "staff_label_added"
    STAFF_LABEL_REMOVED = "staff_label_removed"
    # Written by an erasure request (conversations.privacy.customer_data), by `staff_user` (none
    # from `manage.py erase_customer_data`).
    PERSONAL_DATA_ERASED = "personal_data_erased"
    # Written by the handoff alert (support.alerts): action "<channel>_<outcome>";
    # json_part {"channel", "outcome", ...}.
    HANDOFF_ALERT = "handoff_alert"


# `Message.action` of a session closed by the idle rule (conversations.inbound.session_rules).
CLOSED_IDLE = "idle"
# `Message.action` of the OUTBOUND text answering media the bot cannot read.
ACTION_UNSUPPORTED_MEDIA = "unsupported_media"
# `Message.action` of the OUTBOUND satisfaction question (conversations.satisfaction).
ACTION_SATISFACTION_SURVEY = "satisfaction_survey"
