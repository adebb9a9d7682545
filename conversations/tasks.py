"""Celery's autodiscovery imports this module: each line registers one group of tasks."""

import conversations.delivery_tasks
import conversations.inbound.tasks
import conversations.retention_tasks
import conversations.simulator_tasks
import conversations.turns.tasks  # noqa: F401
from conversations.whatsapp.tasks import send_message  # noqa: F401
