from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class ConversationsConfig(AppConfig):
    name = "conversations"
    verbose_name = _("Conversations")

    def ready(self) -> None:
        # The prompt preview (prompts_admin) reads sessions through this app, which it may not
        # import; imported here because models are not loaded when this module is.
        from conversations.prompt_preview import DatabasePreviewSessionSource
        from prompts_admin.preview import preview_session_source_register

        preview_session_source_register(DatabasePreviewSessionSource())
