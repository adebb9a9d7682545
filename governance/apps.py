from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class GovernanceConfig(AppConfig):
    name = "governance"
    verbose_name = _("Prompt governance")

    def ready(self) -> None:
        # The activation gate (prompts_admin) reads replays through this app, which it may not
        # import; imported here because models are not loaded when this module is.
        from governance.activation import DatabaseReplayEvidence
        from prompts_admin.activation import replay_evidence_register

        replay_evidence_register(DatabaseReplayEvidence())
