from typing import Any

from django.db import models
from simple_history.manager import HistoryManager

class HistoricalRecords:
    # `contribute_to_class` replaces the field by a descriptor that builds a HistoryManager on
    # every access; declared here as that descriptor.
    def __init__(self, *args: Any, **kwargs: Any) -> None: ...
    def __get__(
        self, instance: models.Model | None, owner: type[models.Model]
    ) -> HistoryManager: ...

class DeletedObject:
    model: type[models.Model]
    pk: Any

class ModelChange:
    field: str
    old: Any
    new: Any
