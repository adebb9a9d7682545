from typing import Any

from django.db import models
from django.utils.safestring import SafeString
from simple_history.models import ModelChange

class HistoricalRecordContextHelper:
    model: type[models.Model]
    record: Any
    def __init__(self, model: type[models.Model], historical_record: Any) -> None: ...
    def prepare_delta_change_value(self, change: ModelChange, value: Any) -> Any: ...
    def stringify_delta_change_values(
        self, change: ModelChange, old: Any, new: Any
    ) -> tuple[SafeString, SafeString]: ...
