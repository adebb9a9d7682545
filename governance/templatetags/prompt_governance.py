"""The admin index's "Governança dos prompts" block (templates/admin/index.html) links the
governance app's pages (the tests of a draft on recorded conversations, the prompt test cases and
their runs) beside the custom prompts and the metrics per prompt version; the index's app list
leaves that app out, so the editor does not read two sections of the same name; above it, the
notice of the gradual releases that paused themselves (`paused_rollouts`)."""

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django import template
from django.urls import reverse

from prompts_admin.models import AGENT_CHOICES, PromptOverride

register = template.Library()

GOVERNANCE_APP_LABEL = "governance"


@register.filter
def without_governance(app_list: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The admin's app list without the governance app (the block links its pages)."""
    return [app for app in app_list if app.get("app_label") != GOVERNANCE_APP_LABEL]


@dataclass(frozen=True, slots=True)
class PausedRollout:
    override_id: int
    agent_label: str
    paused_at: datetime
    reason: str
    url: str


@register.simple_tag
def paused_rollouts() -> list[PausedRollout]:
    """The gradual releases paused automatically (`governance.rollout_pause`), oldest pause
    first: the index's notice for those who may read prompt overrides. One query."""
    labels = dict(AGENT_CHOICES)
    rows = (
        PromptOverride.objects.filter(rollout_paused_at__isnull=False)
        .order_by("rollout_paused_at", "pk")
        .values_list("pk", "agent", "rollout_paused_at", "rollout_pause_reason")
    )
    return [
        PausedRollout(
            override_id=pk,
            agent_label=str(labels.get(agent, agent)),
            paused_at=paused_at,
            reason=reason,
            url=reverse("admin:prompts_admin_promptoverride_change", args=[pk]),
        )
        for pk, agent, paused_at, reason in rows
        if paused_at is not None  # the filter's; typed as nullable
    ]
