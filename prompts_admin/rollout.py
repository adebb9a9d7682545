"""Gradual release of a prompt override (docs/decisions/0057), as the admin writes it.

The candidate is an inactive override with a `rollout_percent` (1 to 99): new conversations
whose bucket is below it pin it (agents.rollout). Raising it to 100 makes it the agent's active
override through the activation gate (`PromptOverrideForm`); the override active before is
deactivated in the same save, with history saying why.
"""

from django.conf import settings
from django.utils import translation
from django.utils.translation import gettext

from prompts_admin.models import PromptOverride

ROLLOUT_PROMOTE_PERCENT = 100


def rollout_previous_deactivate(*, override: PromptOverride) -> None:
    """Deactivates the agent's active override other than `override` (each saved, with its
    history), so `override` can become the active one: a candidate released to 100%."""
    previous = (
        PromptOverride.objects.select_for_update()
        .filter(agent=override.agent, is_active=True)
        .exclude(pk=override.pk)
    )
    for row in previous:
        row.is_active = False
        with translation.override(settings.LANGUAGE_CODE):
            row._change_reason = gettext(
                "Replaced by #%(id)s, released to every new conversation"
            ) % {"id": override.pk}
        row.save()


def rollout_change_reason(*, before: int | None, after: int | None, reason: str) -> str:
    """The history's change reason for a save that starts, changes or stops a gradual release
    (in the site's language, as the gate's), then the editor's `reason`; the editor's reason
    alone when the share did not change."""
    with translation.override(settings.LANGUAGE_CODE):
        if before == after:
            return reason
        if before is None:
            what = gettext("Gradual release started at %(percent)s%% of new conversations") % {
                "percent": after
            }
        elif after is None:
            what = gettext("Gradual release stopped at %(percent)s%%") % {"percent": before}
        else:
            what = gettext("Gradual release changed from %(before)s%% to %(after)s%%") % {
                "before": before,
                "after": after,
            }
    return f"{what}: {reason}" if reason else what
