from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class SupportConfig(AppConfig):
    """What a support person touches: the queue, the conversation page and its staff actions,
    the handoff alerts, the CRM's leads and the message templates. The store's models stay in
    `conversations` (their app label and permissions are the store's); the team's own tools,
    quick replies and labels, are this app's (support.models)."""

    name = "support"
    verbose_name = _("Support")

    def ready(self) -> None:
        # The store announces what it writes; this app reacts after the commit (an alert, the
        # CRM's POST) without the store importing it.
        from conversations.announcements import handoff_committed, lead_created
        from support.tasks import handoff_alert_register, lead_delivery_register

        handoff_committed.subscribe(handoff_alert_register)
        lead_created.subscribe(lead_delivery_register)

        # Under the session admin's URLs, as every page of a conversation.
        from support.admin.labels import label_urls
        from support.admin.quick_replies import quick_reply_urls
        from support.admin.sessions import session_admin_urls

        session_admin_urls.register(quick_reply_urls)
        session_admin_urls.register(label_urls)
