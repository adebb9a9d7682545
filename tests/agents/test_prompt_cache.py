"""The request layout for the provider's prompt cache, and the cacheable share of a text."""

from dataclasses import replace
from datetime import datetime

import pytest

from agents.business_hours import BUSINESS_TZ
from agents.invoker import cache_key_for
from agents.prompts import builtin_template
from agents.prompts.cache import common_prefix_length, instructions_cache_share
from agents.prompts.variables import per_call_names, prompt_variables
from agents.sources import HistoryEntry, OverrideTemplate
from agents.states import PROMPT_AGENTS, AgentName, SessionState
from agents.templating import variables_used
from tests.helpers.fake_collaborators import (
    FakeHistorySource,
    FakeLLM,
    FakePromptSource,
    make_inputs,
    make_invoker,
    make_session,
    other_session,
)


@pytest.mark.parametrize(
    ("first", "second", "expected"),
    [
        ("", "", 0),
        ("abc", "", 0),
        ("abc", "abc", 3),
        ("abc", "abd", 2),
        ("abc", "abcd", 3),
        ("xbc", "abc", 0),
        ("a" * 1000 + "b", "a" * 1000 + "c", 1000),
        ("a" * 999 + "bc", "a" * 1000 + "c", 999),
    ],
)
def test_common_prefix_length(first: str, second: str, expected: int) -> None:
    assert common_prefix_length(first, second) == expected
    assert common_prefix_length(second, first) == expected


def test_the_per_call_variables_are_exactly_those_that_name_the_session_or_the_clock() -> None:
    assert sorted(per_call_names(AgentName.TRIAGEM)) == [
        "brand_context",
        "business_hours",
        "customer_name",
        "instance_name",
        "is_open",
        "loaded_packages",
        "now",
    ]
    assert sorted(per_call_names(AgentName.COLETA)) == [
        "brand_context",
        "business_hours",
        "customer_name",
        "customer_phone",
        "instance_name",
        "intent",
        "is_open",
        "loaded_packages",
        "now",
        "registration_data",
        "segment",
        "service",
        "technical_data",
    ]


@pytest.mark.parametrize("agent", PROMPT_AGENTS)
def test_no_built_in_prompt_uses_a_per_call_variable(agent: AgentName) -> None:
    assert set(variables_used(builtin_template(agent))) == {"agent_name", "company_name"}


@pytest.mark.parametrize("agent", PROMPT_AGENTS)
def test_two_sessions_of_one_agent_get_byte_identical_instructions(agent: AgentName) -> None:
    llm = FakeLLM()
    clock = iter(
        [
            datetime(2026, 3, 10, 10, 0, tzinfo=BUSINESS_TZ),
            datetime(2026, 12, 25, 23, 59, tzinfo=BUSINESS_TZ),
        ]
    )
    invoker = make_invoker(llm=llm, clock=lambda: next(clock))
    one, other = make_session(agent), other_session(agent, session_id=8)

    invoker.invoke(session=one, agent=agent)
    invoker.invoke(session=other, agent=agent)

    first, second = llm.calls
    assert first["instructions"] == second["instructions"]
    assert first["messages"][-1].content != second["messages"][-1].content
    assert [first["cache_key"], second["cache_key"]] == [f"{agent.value}-builtin"] * 2


def test_coleta_s_instructions_are_the_same_in_both_of_its_stages() -> None:
    llm = FakeLLM()
    invoker = make_invoker(llm=llm)

    for state in (SessionState.DATA_COLLECT, SessionState.CONFIRM):
        invoker.invoke(session=make_session(AgentName.COLETA, state=state), agent=AgentName.COLETA)

    assert llm.calls[0]["instructions"] == llm.calls[1]["instructions"]


def test_a_session_s_next_call_starts_with_everything_its_previous_call_sent_but_the_context() -> (
    None
):
    history = FakeHistorySource([HistoryEntry(7, "INBOUND", "Oi")])
    llm = FakeLLM()
    invoker = make_invoker(llm=llm, history=history)
    session = make_session()

    invoker.invoke(session=session, agent=AgentName.TRIAGEM)
    history.entries.extend(
        [HistoryEntry(7, "OUTBOUND", "Olá! Como posso ajudar?"), HistoryEntry(7, "INBOUND", "Água")]
    )
    invoker.invoke(session=replace(session, customer_name="Marina Souza"), agent=AgentName.TRIAGEM)

    first, second = llm.calls
    assert first["instructions"] == second["instructions"]
    assert [(m.role, m.content) for m in second["messages"][:-1]] == [
        ("user", "Oi"),
        ("assistant", "Olá! Como posso ajudar?"),
        ("user", "Água"),
    ]
    assert second["messages"][: len(first["messages"]) - 1] == first["messages"][:-1]
    assert [m.role for m in (first["messages"][-1], second["messages"][-1])] == [
        "developer",
        "developer",
    ]


def test_the_cache_key_is_the_agent_and_the_prompt_version_and_nothing_personal() -> None:
    assert cache_key_for(AgentName.TRIAGEM, "builtin") == "triagem-builtin"
    assert cache_key_for(AgentName.COLETA, "override:12") == "coleta-override:12"


def test_a_call_s_cache_key_follows_the_prompt_version_it_used() -> None:
    llm = FakeLLM()
    prompts = FakePromptSource(
        overrides={AgentName.TRIAGEM: OverrideTemplate("Oi de {{ agent_name }}.", "override:9")}
    )

    make_invoker(llm=llm, prompts=prompts).invoke(session=make_session(), agent=AgentName.TRIAGEM)
    make_invoker(llm=llm).invoke(session=make_session(), agent=AgentName.TRIAGEM)

    assert [call["cache_key"] for call in llm.calls] == ["triagem-override:9", "triagem-builtin"]


# --- the cacheable share of a text ------------------------------------------------------------


def share_of(
    template: str, agent: AgentName = AgentName.TRIAGEM
) -> tuple[int, int, tuple[str, ...]]:
    inputs = make_inputs(agent)
    share = instructions_cache_share(template, prompt_variables(inputs), inputs)
    return share.stable_chars, share.total_chars, share.breakers


def test_a_text_with_only_stable_variables_is_all_cacheable() -> None:
    stable, total, breakers = share_of("Sou {{ agent_name }}, da {{ company_name }}.")

    assert (stable == total, breakers) == (True, ())


def test_a_per_call_variable_cuts_the_cacheable_share_where_its_value_starts() -> None:
    stable, total, breakers = share_of("Sou {{ agent_name }}. Agora: {{ now }}. Fim.")

    assert stable == len("Sou Lia. Agora: ")
    assert breakers == ("now",)
    assert total > 1_000


def test_a_condition_on_a_per_call_variable_breaks_where_the_branch_starts() -> None:
    stable, _, breakers = share_of("Olá.{% if is_open %} Aberto.{% else %} Fechado.{% endif %}")

    # " Aberto." and " Fechado." part after their space.
    assert (stable, breakers) == (len("Olá. "), ("is_open",))


def test_breakers_are_named_in_order_of_first_use_once_each() -> None:
    _, _, breakers = share_of(
        "{{ customer_name }} {{ agent_name }} {{ now }} {{ customer_name }}",
    )

    assert breakers == ("customer_name", "now")


def test_an_empty_per_call_value_still_counts_as_breaking() -> None:
    # In triage the segment is not a variable; in coleta an empty one still varies per call.
    inputs = make_inputs(AgentName.COLETA, session=make_session(AgentName.COLETA, customer_name=""))
    share = instructions_cache_share(
        "Cliente: {{ customer_name }}.", prompt_variables(inputs), inputs
    )

    assert (share.stable_chars, share.breakers) == (len("Cliente: "), ("customer_name",))


@pytest.mark.parametrize(
    ("stable", "total", "percent"), [(0, 10, 0), (9, 10, 90), (999, 1000, 99), (10, 10, 100)]
)
def test_the_percent_rounds_down(stable: int, total: int, percent: int) -> None:
    from agents.prompts.cache import InstructionsCacheShare

    assert InstructionsCacheShare(stable, total).percent == percent


def test_the_preview_measures_the_share_of_the_text_it_sends() -> None:
    prompts = FakePromptSource(
        overrides={AgentName.TRIAGEM: OverrideTemplate("Agora: {{ now }}.", "override:5")}
    )
    prepared = make_invoker(prompts=prompts).prepare(
        session=make_session(), agent=AgentName.TRIAGEM, measure_cache=True
    )

    assert prepared.cache_share is not None
    assert prepared.cache_share.stable_chars == len("Agora: ")
    assert prepared.cache_share.total_chars == len(prepared.instructions)
    assert prepared.cache_share.breakers == ("now",)
    assert make_invoker().prepare(session=make_session(), agent=AgentName.TRIAGEM).cache_share is (
        None
    )
