"""The staff groups' display names: the Group rows keep their English names (migrations, code
and tests find them by name: `conversations/migrations/0002_staff_groups.py`), staff read them
translated — "Suporte", "Editores de prompt" — wherever the admin lists a group
(`staff_auth.admin`). A group an admin creates by hand shows its own name.
"""

from collections.abc import Mapping
from typing import Any

from django.utils.translation import gettext, gettext_noop

SUPPORT = "Support"
PROMPT_EDITORS = "Prompt editors"
# Approve another editor's release (prompts_admin/migrations/0007_release_permissions.py).
PROMPT_APPROVERS = "Prompt approvers"
# Stored name -> msgid (the same text: the stored name is the msgid).
_DISPLAY_NAMES: Mapping[str, str] = {
    SUPPORT: gettext_noop("Support"),
    PROMPT_EDITORS: gettext_noop("Prompt editors"),
    PROMPT_APPROVERS: gettext_noop("Prompt approvers"),
}


def group_display_name(name: str) -> str:
    """A group's name as staff read it (translated for the project's groups)."""
    msgid = _DISPLAY_NAMES.get(name)
    return gettext(msgid) if msgid is not None else name


def group_label(group: Any) -> str:
    """`group_display_name` of a Group row (a form field's `label_from_instance`)."""
    return group_display_name(group.name)
