from typing import Any

from django.db import models

class HistoryManager(models.Manager[Any]):
    """`Model.history`: the historical records of one object (on an instance) or of them all."""
