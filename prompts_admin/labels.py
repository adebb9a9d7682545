"""A prompt version as staff read it, on the editor's pages and the support pages alike:
"prompt padrão", "prompt personalizado #12 (versão 345)" (gettext, rendered when shown)."""

from collections.abc import Mapping

from django.utils.translation import gettext

from agents.sources import BUILTIN_PROMPT_VERSION
from prompts_admin.selectors import unversioned_override_id, version_history_id


def prompt_version_label(version: str, override_ids: Mapping[int, int]) -> str:
    """A prompt version for staff; `override_ids` maps history ids to override ids
    (`prompts_admin.selectors.override_ids_of`). An unknown version is shown as it is."""
    if not version:
        return gettext("not pinned yet")
    if version == BUILTIN_PROMPT_VERSION:
        return gettext("built-in")
    history_id = version_history_id(version)
    if history_id is not None:
        override_id = override_ids.get(history_id)
        if override_id is None:
            return gettext("version %(version)s (no longer recorded)") % {"version": history_id}
        return gettext("override #%(override)s (version %(version)s)") % {
            "override": override_id,
            "version": history_id,
        }
    unversioned = unversioned_override_id(version)
    if unversioned is not None:
        return gettext("override #%(override)s (unversioned)") % {"override": unversioned}
    return version
