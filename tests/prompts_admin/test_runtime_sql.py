"""The prompt source's hand-written reads (prompts_admin/selectors.py): the strategic companies and
the agent's active override with its version, against the ORM queries they replace, quoted in
their comments."""

from typing import Any

import pytest
from model_bakery import baker

from agents.sources import OverrideTemplate, StrategicCompanyInfo
from agents.states import PROMPT_AGENTS, AgentName
from prompts_admin.models import PromptOverride, RuntimeConfig, StrategicCompany
from prompts_admin.selectors import (
    DatabasePromptSource,
    _latest_history_id,
    _override_template,
    override_version,
    phone_digits,
)

pytestmark = pytest.mark.django_db


def test_the_strategic_companies_are_the_orm_s_active_ones_by_name() -> None:
    baker.make(StrategicCompany, name="Zeta Alimentos", cnpj="", phone_numbers="+55 11 91234-5678")
    baker.make(
        StrategicCompany,
        name="Alfa Águas Claras",
        cnpj="12.345.678/0001-90",
        phone_numbers="(11) 3333-4444\n+1 415 555 0100",
    )
    baker.make(StrategicCompany, name="Inativa", phone_numbers="11 95555-0000", is_active=False)
    orm = tuple(
        StrategicCompanyInfo(name=name, cnpj=cnpj, phones=phone_digits(phones))
        for name, cnpj, phones in StrategicCompany.objects.filter(is_active=True)
        .order_by("name")
        .values_list("name", "cnpj", "phone_numbers")
    )

    companies = DatabasePromptSource().runtime().strategic_companies

    assert companies == orm
    assert [(c.name, c.cnpj, c.phones) for c in companies] == [
        ("Alfa Águas Claras", "12.345.678/0001-90", ("551133334444", "14155550100")),
        ("Zeta Alimentos", "", ("5511912345678",)),
    ]


def orm_active_override(agent: AgentName) -> OverrideTemplate | None:
    return _override_template(PromptOverride.objects.filter(agent=agent.value, is_active=True))


def test_the_active_override_and_its_version_are_the_orm_s() -> None:
    source = DatabasePromptSource()
    assert source.active_override(AgentName.TRIAGEM) is None
    draft = PromptOverride.objects.create(agent="triagem", content="rascunho", is_active=False)
    active = PromptOverride.objects.create(agent="triagem", content="v1", is_active=True)
    active.content = "v2"
    active.save()
    PromptOverride.objects.create(agent="coleta", content="outro agente", is_active=True)
    unversioned = PromptOverride.objects.create(agent="qualificacao", content="q", is_active=True)
    unversioned.history.all().delete()
    latest = active.history.order_by("-history_id").values_list("history_id", flat=True)[0]

    for agent in AgentName:
        assert source.active_override(agent) == orm_active_override(agent), agent
    assert source.active_override(AgentName.TRIAGEM) == OverrideTemplate(
        content="v2", version=f"override:{latest}"
    )
    assert source.active_override(AgentName.QUALIFICACAO) == OverrideTemplate(
        content="q", version=f"override:unversioned-{unversioned.pk}"
    )
    assert draft.pk != active.pk


def orm_active_overrides() -> dict[AgentName, OverrideTemplate | None]:
    rows = (
        PromptOverride.objects.filter(
            is_active=True, agent__in=[agent.value for agent in PROMPT_AGENTS]
        )
        .annotate(version=_latest_history_id())
        .values_list("agent", "pk", "content", "version")
    )
    found = {
        agent: OverrideTemplate(content=content, version=override_version(history_id, pk))
        for agent, pk, content, history_id in rows
    }
    return {agent: found.get(agent.value) for agent in PROMPT_AGENTS}


def test_every_agent_s_active_override_and_its_version_are_the_orm_s() -> None:
    source = DatabasePromptSource()
    assert source.active_overrides() == {agent: None for agent in PROMPT_AGENTS}
    PromptOverride.objects.create(agent="triagem", content="rascunho", is_active=False)
    active = PromptOverride.objects.create(agent="triagem", content="v1", is_active=True)
    active.content = "v2"
    active.save()
    unversioned = PromptOverride.objects.create(agent="qualificacao", content="q", is_active=True)
    unversioned.history.all().delete()
    latest = active.history.order_by("-history_id").values_list("history_id", flat=True)[0]

    overrides = source.active_overrides()

    assert overrides == orm_active_overrides()
    assert overrides == {
        agent: {
            AgentName.TRIAGEM: OverrideTemplate(content="v2", version=f"override:{latest}"),
            AgentName.QUALIFICACAO: OverrideTemplate(
                content="q", version=f"override:unversioned-{unversioned.pk}"
            ),
        }.get(agent)
        for agent in PROMPT_AGENTS
    }


def config_values(config: RuntimeConfig) -> dict[str, object]:
    return {f.attname: getattr(config, f.attname) for f in RuntimeConfig._meta.concrete_fields}


def test_loading_the_runtime_configuration_is_the_orm_s_get_or_create(
    django_assert_num_queries: Any,
) -> None:
    RuntimeConfig.objects.all().delete()
    # Missing: created with the defaults, in a savepoint, with its history row.
    with django_assert_num_queries(5):
        created = RuntimeConfig.load()
    orm, was_created = RuntimeConfig.objects.get_or_create(pk=RuntimeConfig.SINGLETON_PK)
    assert was_created is False
    assert config_values(created) == config_values(orm)
    assert created.history.count() == 1
    orm.agent_name = "Lia"
    orm.business_hours = {"mon": [["08:00", "18:00"]]}
    orm.save()

    with django_assert_num_queries(1):
        loaded = RuntimeConfig.load()

    assert config_values(loaded) == config_values(
        RuntimeConfig.objects.get_or_create(pk=RuntimeConfig.SINGLETON_PK)[0]
    )
    assert loaded.agent_name == "Lia"
    assert loaded._state.adding is False
