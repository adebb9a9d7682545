"""Prompts and runtime settings as the agents read them: `DatabasePromptSource` implements
`agents.sources.PromptSource`.

`active_override()` is one query (the override and its latest history id); `runtime()` is two
(the RuntimeConfig row, created with its defaults on first use, and the active strategic
companies).
"""

from collections.abc import Mapping
from functools import cache
from typing import Any

from django.conf import settings
from django.db import connections
from django.db.models import OuterRef, QuerySet, Subquery

from agents.phones import phone_digits as phone_digits_of
from agents.sources import OverrideTemplate, RuntimeSettings, StrategicCompanyInfo
from agents.states import AgentName
from prompts_admin.models import PromptOverride, RuntimeConfig, StrategicCompany


def _override_template(overrides: QuerySet[PromptOverride]) -> OverrideTemplate | None:
    """The first override of `overrides` with its version (one query)."""
    latest = Subquery(
        _historical_override()
        .objects.filter(id=OuterRef("pk"))
        .order_by("-history_id")
        .values("history_id")[:1]
    )
    row = overrides.annotate(version=latest).values_list("pk", "content", "version").first()
    if row is None:
        return None
    pk, content, history_id = row
    return OverrideTemplate(content=content, version=override_version(history_id, pk))


def override_version(history_id: int | None, override_id: int) -> str:
    """The `prompt_version` an LLM call records for an override (fits LLMCall's 32 chars)."""
    if history_id is None:
        return f"override:unversioned-{override_id}"
    return f"override:{history_id}"


def phone_digits(lines: str) -> tuple[str, ...]:
    """E.164 digits (no +) of every valid phone line; Brazil when no country code is given."""
    parsed = (phone_digits_of(line) for line in lines.splitlines() if line.strip())
    return tuple(number for number in parsed if number is not None)


@cache
def _historical_override() -> Any:
    # simple-history builds a new manager on every `PromptOverride.history` access (~1 ms).
    return PromptOverride.history.model


@cache
def _active_override_sql() -> str:
    """The agent's active override with its latest history id, hand-written: every agent call
    reads it, and compiling the ORM's query (with its subquery) cost the worker more CPU than
    running it (bench/worker_cpu.py). The ORM's, which tests/prompts_admin/test_runtime_sql.py
    checks it against: `_override_template(PromptOverride.objects.filter(agent=agent,
    is_active=True))`. Built on first use: the historical model is simple-history's."""
    history = _historical_override()._meta.db_table
    return f"""SELECT o.id, o.content,
            (SELECT h.history_id FROM {history} h WHERE h.id = o.id
                ORDER BY h.history_id DESC LIMIT 1)
        FROM {PromptOverride._meta.db_table} o
        WHERE o.agent = %s AND o.is_active
        ORDER BY o.id LIMIT 1"""


# Every turn reads them: hand-written, as compiling the ORM's query cost the worker more CPU than
# running it (bench/worker_cpu.py). The ORM's, which tests/prompts_admin/test_runtime_sql.py
# checks it against:
# StrategicCompany.objects.filter(is_active=True).order_by("name")
#     .values_list("name", "cnpj", "phone_numbers")
STRATEGIC_COMPANIES_SQL = f"""SELECT name, cnpj, phone_numbers
    FROM {StrategicCompany._meta.db_table} WHERE is_active ORDER BY name"""


class DatabasePromptSource:
    def active_override(self, agent: AgentName) -> OverrideTemplate | None:
        with connections[PromptOverride.objects.db].cursor() as cursor:
            cursor.execute(_active_override_sql(), [agent.value])
            row = cursor.fetchone()
        if row is None:
            return None
        pk, content, history_id = row
        return OverrideTemplate(content=content, version=override_version(history_id, pk))

    def runtime(self) -> RuntimeSettings:
        config = RuntimeConfig.load()
        with connections[StrategicCompany.objects.db].cursor() as cursor:
            cursor.execute(STRATEGIC_COMPANIES_SQL)
            companies = tuple(
                StrategicCompanyInfo(name=name, cnpj=cnpj, phones=phone_digits(phones))
                for name, cnpj, phones in cursor.fetchall()
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
        )


class ChosenOverridesPromptSource(DatabasePromptSource):
    """The simulator's prompts (issue 14 §3): for the agents in `chosen`, that saved override,
    active or a draft; the active one for the others. Built for one simulated turn only, so
    what customers get never changes. A chosen override deleted since is the active one."""

    def __init__(self, chosen: Mapping[AgentName, int]) -> None:
        self._chosen = dict(chosen)

    def active_override(self, agent: AgentName) -> OverrideTemplate | None:
        override_id = self._chosen.get(agent)
        if override_id is not None:
            chosen = _override_template(
                PromptOverride.objects.filter(pk=override_id, agent=agent.value)
            )
            if chosen is not None:
                return chosen
        return super().active_override(agent)
