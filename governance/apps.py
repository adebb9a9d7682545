from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class GovernanceConfig(AppConfig):
    name = "governance"
    verbose_name = _("Prompt governance")

    def ready(self) -> None:
        # The activation gate (prompts_admin) reads replays through this app, which it may not
        # import; imported here because models are not loaded when this module is.
        from governance.activation import DatabaseCasesEvidence, DatabaseReplayEvidence
        from prompts_admin.activation import cases_evidence_register, replay_evidence_register

        replay_evidence_register(DatabaseReplayEvidence())
        cases_evidence_register(DatabaseCasesEvidence())

        # Anonymising a conversation and a customer's export reach the replay results and the
        # prompt test cases through this registry (conversations may not import this app).
        from conversations.privacy.data_holders import session_data_holder_register
        from governance.personal_data import PromptTestCasesHolder, ReplayResultsHolder

        session_data_holder_register(ReplayResultsHolder())
        session_data_holder_register(PromptTestCasesHolder())
