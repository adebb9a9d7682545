from typing import Any

from django.db import models
from simple_history.models import ModelChange

class HistoricalRecordContextHelper:
    model: type[models.Model]
    record: Any
    def __init__(self, model: type[models.Model], historical_record: Any) -> None: ...
    def prepare_delta_change_value(self, change: ModelChange, value: Any) -> Any: ...
