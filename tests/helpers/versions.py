"""The latest simple-history version of a row, as a release names it, and a release of one."""

from typing import Any

from django.db.models import Model

from prompts_admin.models import PromptOverride, Release
from versioning.history import historical_model


def latest_version(model: type[Model], pk: int) -> int:
    """The history id of the latest version of `model` row `pk`."""
    history_id: int = (
        historical_model(model).objects.filter(id=pk).order_by("-history_id")[0].history_id
    )
    return history_id


def triage_release(override: PromptOverride, name: str = "Março", **fields: Any) -> Release:
    """A release naming `override`'s latest version for Triagem (the other agents unnamed) and
    no package unless `packages` is given."""
    release: Release = Release.objects.create(
        name=name,
        prompts={"triagem": latest_version(PromptOverride, override.pk)},
        **{"packages": {}, **fields},
    )
    return release
