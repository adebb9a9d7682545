from collections.abc import Iterable
from datetime import datetime
from typing import Any, TypeVar

from django.db.models import Model

_ModelT = TypeVar("_ModelT", bound=Model)

def bulk_create_with_history(
    objs: Iterable[_ModelT],
    model: type[_ModelT],
    batch_size: int | None = None,
    ignore_conflicts: bool = False,
    default_user: Any = None,
    default_change_reason: str | None = None,
    default_date: datetime | None = None,
    custom_historical_attrs: dict[str, Any] | None = None,
) -> list[_ModelT]: ...
