from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class SimulatorConfig(AppConfig):
    """The playground: the simulator page, the demo conversations and a developer's first
    run (`bootstrap_dev`). It runs the real bot and the real staff actions; nothing below it
    imports it."""

    name = "simulator"
    verbose_name = _("Simulator")

    def ready(self) -> None:
        # The simulator page lives under the session admin's URLs (/admin/conversations/
        # session/simulator/), which the support app owns and cannot import this app.
        from simulator.admin import simulator_urls
        from support.admin.sessions import session_admin_urls

        session_admin_urls.register(simulator_urls)
