"""The latest simple-history version of a row, as a release names it."""

from django.db.models import Model

from versioning.history import historical_model


def latest_version(model: type[Model], pk: int) -> int:
    """The history id of the latest version of `model` row `pk`."""
    history_id: int = (
        historical_model(model).objects.filter(id=pk).order_by("-history_id")[0].history_id
    )
    return history_id
