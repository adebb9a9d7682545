from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class KnowledgeBaseConfig(AppConfig):
    name = "knowledge_base"
    verbose_name = _("Knowledge base")
