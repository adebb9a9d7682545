from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class SupportConfig(AppConfig):
    """What a support person touches: the queue, the conversation page and its staff actions,
    the internal notes, the quick replies and labels, the handoff alerts, the CRM's leads and
    the message templates. The store's models stay in `conversations` (their app label and
    permissions are the store's); what only the team writes (internal notes, quick replies,
    labels) is this app's (`support.models`)."""

    name = "support"
    verbose_name = _("Support")

    def ready(self) -> None:
        # The store announces what it writes; this app reacts after the commit (an alert, the
        # CRM's POST) without the store importing it.
        from conversations.announcements import handoff_committed, lead_created
        from support.tasks import handoff_alert_register, lead_delivery_register

        handoff_committed.subscribe(handoff_alert_register)
        lead_created.subscribe(lead_delivery_register)

        # Erasing a customer and their export reach the notes through this registry
        # (conversations may not import this app).
        from conversations.privacy.data_holders import session_data_holder_register
        from support.personal_data import InternalNotesHolder

        session_data_holder_register(InternalNotesHolder())

        # The note's endpoint lives under the session admin's URLs, beside the staff actions.
        from support.admin.notes import note_urls
        from support.admin.sessions import session_admin_urls

        session_admin_urls.register(note_urls)

        # Under the session admin's URLs, as every page of a conversation.
        from support.admin.labels import label_urls
        from support.admin.quick_replies import quick_reply_urls

        session_admin_urls.register(quick_reply_urls)
        session_admin_urls.register(label_urls)
