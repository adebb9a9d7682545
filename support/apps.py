from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class SupportConfig(AppConfig):
    """What a support person touches: the queue, the conversation page and its staff actions,
    the handoff alerts, the CRM's leads and the message templates. The models stay in the
    `conversations` store (their app label and permissions are the store's)."""

    name = "support"
    verbose_name = _("Support")

    def ready(self) -> None:
        # The store announces what it writes; this app reacts after the commit (an alert, the
        # CRM's POST) without the store importing it.
        from conversations.announcements import handoff_committed, lead_created
        from support.tasks import handoff_alert_register, lead_delivery_register

        handoff_committed.subscribe(handoff_alert_register)
        lead_created.subscribe(lead_delivery_register)
