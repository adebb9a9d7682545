"""Celery's autodiscovery imports this module: each line registers one group of tasks."""

import conversations.inbound.tasks
import conversations.media_tasks
import conversations.message_templates_tasks
import conversations.privacy.retention_tasks
import conversations.turns.tasks  # noqa: F401
from conversations.sending.worker import send_message  # noqa: F401
