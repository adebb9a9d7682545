"""Prompts and runtime settings as the agents read them: `DatabasePromptSource` implements
`agents.sources.PromptSource`.

`active_override()` is one query (the override and its latest history id), and so is
`active_overrides()` (every prompt agent's), `rollout_candidates()` (the agents released
gradually, with their candidate and share; a paused candidate is none), `override_at()` (one
history row: an override's text as of a version), `live_release()` (the published release's id)
and `override_ids_of()`; `runtime()` is two
(the RuntimeConfig row, created with its defaults on first use, and the active strategic
companies).
"""

import re
from collections.abc import Iterable, Mapping

from django.conf import settings
from django.db.models import QuerySet

from agents.phones import phone_digits as phone_digits_of
from agents.sources import (
    OverrideTemplate,
    RolloutCandidate,
    RuntimeSettings,
    StrategicCompanyInfo,
)
from agents.states import PROMPT_AGENTS, AgentName
from prompts_admin.models import (
    PromptOverride,
    Release,
    ReleaseStatus,
    RuntimeConfig,
    StrategicCompany,
)
from versioning.history import historical_model, latest_version


def _override_template(overrides: QuerySet[PromptOverride]) -> OverrideTemplate | None:
    """The first override of `overrides` with its version (one query)."""
    row = (
        overrides.annotate(version=latest_version(PromptOverride))
        .values_list("pk", "content", "version")
        .first()
    )
    if row is None:
        return None
    pk, content, history_id = row
    return OverrideTemplate(content=content, version=override_version(history_id, pk))


def override_version(history_id: int | None, override_id: int) -> str:
    """The `prompt_version` an LLM call records for an override (fits LLMCall's 32 chars)."""
    if history_id is None:
        return f"override:unversioned-{override_id}"
    return f"override:{history_id}"


_VERSIONED = re.compile(r"override:(\d+)")
_UNVERSIONED = re.compile(r"override:unversioned-(\d+)")


def version_history_id(version: str) -> int | None:
    """The history id of an "override:<history_id>" version; None for any other version."""
    match = _VERSIONED.fullmatch(version)
    return int(match.group(1)) if match else None


def unversioned_override_id(version: str) -> int | None:
    """The override id of an "override:unversioned-<id>" version; None for any other."""
    match = _UNVERSIONED.fullmatch(version)
    return int(match.group(1)) if match else None


def override_ids_of(versions: Iterable[str]) -> dict[int, int]:
    """{history id: override id} of the "override:<history_id>" among `versions` (one query,
    none when there is no such version); a history row that is gone is absent."""
    history_ids = {h for h in map(version_history_id, versions) if h is not None}
    if not history_ids:
        return {}
    return dict(
        historical_model(PromptOverride)
        .objects.filter(history_id__in=history_ids)
        .values_list("history_id", "id")
    )


def phone_digits(lines: str) -> tuple[str, ...]:
    """E.164 digits (no +) of every valid phone line; Brazil when no country code is given."""
    parsed = (phone_digits_of(line) for line in lines.splitlines() if line.strip())
    return tuple(number for number in parsed if number is not None)


class DatabasePromptSource:
    def active_override(self, agent: AgentName) -> OverrideTemplate | None:
        return _override_template(PromptOverride.objects.filter(agent=agent.value, is_active=True))

    def active_overrides(self) -> dict[AgentName, OverrideTemplate | None]:
        rows = (
            PromptOverride.objects.filter(
                is_active=True, agent__in=[agent.value for agent in PROMPT_AGENTS]
            )
            .annotate(version=latest_version(PromptOverride))
            .values_list("agent", "pk", "content", "version")
        )
        found = {
            agent: OverrideTemplate(content=content, version=override_version(history_id, pk))
            for agent, pk, content, history_id in rows
        }
        return {agent: found.get(agent.value) for agent in PROMPT_AGENTS}

    def rollout_candidates(self) -> dict[AgentName, RolloutCandidate]:
        rows = (
            PromptOverride.objects.filter(
                rollout_percent__isnull=False,
                rollout_paused_at__isnull=True,  # a paused candidate is pinned by no one
                agent__in=[agent.value for agent in PROMPT_AGENTS],
            )
            .annotate(version=latest_version(PromptOverride))
            .values_list("agent", "pk", "content", "version", "rollout_percent")
        )
        return {
            AgentName(agent): RolloutCandidate(
                override=OverrideTemplate(
                    content=content, version=override_version(history_id, pk)
                ),
                percent=percent,
            )
            for agent, pk, content, history_id, percent in rows
            if percent is not None  # the filter's; typed as nullable
        }

    def override_at(self, agent: AgentName, version: str) -> OverrideTemplate | None:
        history_id = version_history_id(version)
        if history_id is None:
            # "builtin" is not an override; an unversioned override has no text to go back to.
            return None
        content = (
            historical_model(PromptOverride)
            .objects.filter(history_id=history_id, agent=agent.value)
            .values_list("content", flat=True)
            .first()
        )
        return OverrideTemplate(content=content, version=version) if content is not None else None

    def chosen_override(self, agent: AgentName) -> OverrideTemplate | None:
        return None

    def live_release(self) -> int | None:
        # At most one is published (a unique constraint): no ordering to pay for.
        found = Release.objects.filter(status=ReleaseStatus.PUBLISHED).order_by()
        return next(iter(found.values_list("pk", flat=True)[:1]), None)

    def runtime(self) -> RuntimeSettings:
        config = RuntimeConfig.load()
        companies = tuple(
            StrategicCompanyInfo(name=name, cnpj=cnpj, phones=phone_digits(phones))
            for name, cnpj, phones in StrategicCompany.objects.filter(is_active=True)
            .order_by("name")
            .values_list("name", "cnpj", "phone_numbers")
        )
        return RuntimeSettings(
            agent_name=config.agent_name or settings.AGENT_NAME,
            company_name=config.company_name,
            business_hours=config.business_hours,
            strategic_companies=companies,
            handoff_message_open=config.handoff_message_open,
            handoff_message_closed=config.handoff_message_closed,
            unsupported_media_message=config.unsupported_media_message,
            invalid_format_message=config.invalid_format_message,
            satisfaction_after_lead=config.satisfaction_after_lead,
            satisfaction_question=config.satisfaction_question,
            satisfaction_style=config.satisfaction_style,
        )


class ChosenOverridesPromptSource(DatabasePromptSource):
    """The simulator's prompts (docs/operations.md, Try it without WhatsApp): for the agents in
    `chosen`, that saved override, active or a draft, over the simulated session's pinned version
    (`chosen_override`); the session's own prompt for the others. Built for one simulated turn only,
    so what customers get never changes. A chosen override deleted since is not chosen: the
    session's prompt serves (the active one for `active_override`)."""

    def __init__(self, chosen: Mapping[AgentName, int]) -> None:
        self._chosen = dict(chosen)

    def chosen_override(self, agent: AgentName) -> OverrideTemplate | None:
        override_id = self._chosen.get(agent)
        if override_id is None:
            return None
        return _override_template(PromptOverride.objects.filter(pk=override_id, agent=agent.value))

    def active_override(self, agent: AgentName) -> OverrideTemplate | None:
        chosen = self.chosen_override(agent)
        return chosen if chosen is not None else super().active_override(agent)
