"""The admin index's "Governança dos prompts" block (templates/admin/index.html) links the
governance app's pages (the tests of a draft on recorded conversations, the prompt test cases and
their runs) beside the custom prompts and the metrics per prompt version; the index's app list
leaves that app out, so the editor does not read two sections of the same name."""

from collections.abc import Iterable
from typing import Any

from django import template

register = template.Library()

GOVERNANCE_APP_LABEL = "governance"


@register.filter
def without_governance(app_list: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The admin's app list without the governance app (the block links its pages)."""
    return [app for app in app_list if app.get("app_label") != GOVERNANCE_APP_LABEL]
