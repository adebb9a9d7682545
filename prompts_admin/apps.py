from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class PromptsAdminConfig(AppConfig):
    name = "prompts_admin"
    verbose_name = _("Prompts and configuration")
