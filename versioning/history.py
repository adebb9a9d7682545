"""The two reads of django-simple-history that the apps' selectors and use cases share: a
versioned model's historical model, and the latest version of each row as a subquery."""

from functools import cache
from typing import Any

from django.db.models import Model, OuterRef, Subquery


@cache
def historical_model(model: type[Model]) -> Any:
    """`model`'s historical model: simple-history builds a new manager on every
    `Model.history` access (~1 ms), and the historical model itself never changes."""
    return model.history.model  # type: ignore[attr-defined]


def latest_version(model: type[Model]) -> Subquery:
    """The history id of the outer row's latest version (`.annotate(version=...)` on a
    queryset of `model`)."""
    return Subquery(
        historical_model(model)
        .objects.filter(id=OuterRef("pk"))
        .order_by("-history_id")
        .values("history_id")[:1]
    )
