from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class StaffAuthConfig(AppConfig):
    """Staff sign-in around the admin: login events in the log, the lockout page, the client
    address django-axes locks by. No models: axes keeps the attempts."""

    name = "staff_auth"
    verbose_name = _("Staff sign-in")

    def ready(self) -> None:
        from staff_auth import login_events

        login_events.connect()
