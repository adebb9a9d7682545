"""The production invoker (database sources, LLMCall recorder) end to end, against the fake
/v1/responses server: request per agent, LLMCall rows on success and failure, bounded queries."""

import logging
import time
from dataclasses import replace
from datetime import timedelta

import pytest
from django.utils import timezone
from model_bakery import baker
from pytest_django import DjangoAssertNumQueries, Settings
from simple_history.utils import bulk_create_with_history

from agents.context import InstanceInfo, SessionContext
from agents.llm import LLMProviderError, OpenAIClient
from agents.states import AgentName, SessionState
from conversations.agent_sources import build_agent_invoker
from conversations.models import Direction, LLMCall, Message, Session
from knowledge_base.models import Intent, KBPackage, Segment, Service
from prompts_admin.forms import override_problems
from prompts_admin.models import PromptOverride, RuntimeConfig
from tests import baker_recipes as recipes
from tests.fakes.openai_server import FakeOpenAIServer, prompt_text
from tests.helpers.fake_collaborators import TEMPLATE_ATTACKS, FakeLLM

pytestmark = pytest.mark.django_db

STATE_OF = {
    AgentName.TRIAGEM: SessionState.TRIAGE,
    AgentName.QUALIFICACAO: SessionState.QUALIFYING,
    AgentName.COLETA: SessionState.DATA_COLLECT,
}


@pytest.fixture
def models_per_agent(settings: Settings) -> dict[AgentName, str]:
    settings.OPENAI_MODEL_TRIAGE = "gpt-triage-test"
    settings.OPENAI_MODEL_QUALIFICATION = "gpt-qualification-test"
    settings.OPENAI_MODEL_COLLECTION = "gpt-collection-test"
    settings.MAX_HISTORY_MESSAGES = 50
    return {
        AgentName.TRIAGEM: "gpt-triage-test",
        AgentName.QUALIFICACAO: "gpt-qualification-test",
        AgentName.COLETA: "gpt-collection-test",
    }


def make_world(*, messages: int = 4, packages: int = 3, loaded: int = 2) -> Session:
    RuntimeConfig.load()
    segment = Segment.objects.create(code="AMBIENTAL", label="Ambiental")
    Intent.objects.create(code="ORCAMENTO", label="Orçamento")
    Service.objects.create(code="AGUA", label="Análise de água", segment=segment)
    bulk_create_with_history(
        [
            KBPackage(
                package_id=f"PACOTE_{i:03d}",
                title=f"Pacote {i}",
                description=f"Descrição curta {i}",
                content=f"Conteúdo completo do pacote {i}.",
            )
            for i in range(packages)
        ],
        KBPackage,
    )
    KBPackage.objects.create(
        package_id="INATIVO", title="x", description="pacote inativo", content="x", is_active=False
    )
    instance = recipes.instance.make(name="Lab Campinas")
    session = baker.make(
        Session,
        instance=instance,
        state=SessionState.TRIAGE,
        customer_phone="5519987654321",
        loaded_packages=[f"PACOTE_{i:03d}" for i in range(loaded)],
    )
    start = timezone.now() - timedelta(hours=1)
    Message.objects.bulk_create(
        Message(
            session=session,
            direction=Direction.INBOUND if i % 2 == 0 else Direction.OUTBOUND,
            content=f"mensagem {i}",
            created_at=start + timedelta(seconds=i),
        )
        for i in range(messages)
    )
    return session


def session_context(session: Session) -> SessionContext:
    """The fields these tests vary (the pipeline owns the full conversion)."""
    return SessionContext(
        session_id=session.pk,
        state=SessionState(session.state),
        instance=InstanceInfo(name=session.instance.name),
        customer_phone=session.customer_phone,
        segment=session.segment,
        intent=session.intent,
        loaded_packages=tuple(session.loaded_packages),
    )


def client_for(fake: FakeOpenAIServer) -> OpenAIClient:
    return OpenAIClient(api_key="sk-test", base_url=fake.base_url, timeout=2.0, retry_max=1)


@pytest.mark.parametrize("agent", [AgentName.TRIAGEM, AgentName.QUALIFICACAO, AgentName.COLETA])
def test_request_per_agent_and_an_llmcall_row_on_success(
    fake_openai: FakeOpenAIServer, models_per_agent: dict[AgentName, str], agent: AgentName
) -> None:
    session = make_world(messages=3, loaded=1)
    Session.objects.filter(pk=session.pk).update(
        state=STATE_OF[agent], segment="AMBIENTAL", intent="ORCAMENTO"
    )
    session.refresh_from_db()
    fake_openai.queue_text('{"s":1}Certo!', input_tokens=1500, output_tokens=20)

    call = build_agent_invoker(llm=client_for(fake_openai)).invoke(
        session=session_context(session), agent=agent, current_message="mensagem 2"
    )

    request = fake_openai.requests[0]
    assert request["model"] == models_per_agent[agent]
    assert request["instructions"] == call.instructions
    assert request["input"] == [
        {"role": "developer", "content": call.reference},
        {"role": "user", "content": "mensagem 0"},
        {"role": "assistant", "content": "mensagem 1"},
        {"role": "user", "content": "mensagem 2"},
        {"role": "developer", "content": call.context},
    ]
    assert request["prompt_cache_key"] == f"{agent.value}-builtin"
    assert "- PACOTE_000: Descrição curta 0" in call.instructions
    assert "- PACOTE_002: Descrição curta 2" in call.instructions
    assert "pacote inativo" not in call.instructions + call.context
    # A loaded package's content is in the item before the history.
    assert "Conteúdo completo do pacote 0." in call.reference
    assert "Conteúdo completo do pacote" not in call.instructions + call.context
    assert "Conteúdo completo do pacote 1." not in call.reference
    row = LLMCall.objects.get()
    assert (row.session_id, row.agent, row.purpose, row.outcome) == (
        session.pk,
        agent.value,
        "agent",
        "ok",
    )
    assert (row.model, row.tokens_input, row.tokens_output, row.attempts) == (
        models_per_agent[agent],
        1500,
        20,
        1,
    )
    assert row.prompt_version == "builtin"
    assert row.raw_response == '{"s":1}Certo!'
    package_version = KBPackage.history.filter(package_id="PACOTE_000").get().history_id
    snapshot = row.context_snapshot
    assert snapshot is not None
    assert snapshot["loaded_packages"] == [{"package_id": "PACOTE_000", "version": package_version}]
    assert snapshot["state"] == STATE_OF[agent].value


def test_the_cached_input_tokens_the_model_reports_are_recorded_and_logged(
    fake_openai: FakeOpenAIServer,
    models_per_agent: dict[AgentName, str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    session = make_world()
    fake_openai.queue_text('{"s":1}Certo!', input_tokens=1500, cached_tokens=1280)

    with caplog.at_level(logging.INFO, logger="agents.invoker"):
        build_agent_invoker(llm=client_for(fake_openai)).invoke(
            session=session_context(session), agent=AgentName.TRIAGEM
        )

    row = LLMCall.objects.get()
    assert (row.tokens_input, row.cached_tokens, row.tokens_output) == (1500, 1280, 5)
    [logged] = [r for r in caplog.records if r.getMessage() == "agent_invoked"]
    assert (vars(logged)["usage_input"], vars(logged)["usage_cached"]) == (1500, 1280)


def test_the_same_call_again_reads_its_prompt_from_the_fakes_cache(
    fake_openai: FakeOpenAIServer, models_per_agent: dict[AgentName, str]
) -> None:
    """Counted by the fake (tests/fakes/openai_server.py): a request identical to an earlier
    one has its whole prompt, floored to 128 tokens, read from the cache."""
    session = make_world()
    # Long enough to pass the cache's 1,024-token threshold whatever follows it.
    PromptOverride.objects.create(agent="triagem", content="Regras fixas. " * 330, is_active=True)
    fixed = timezone.now()
    invoker = build_agent_invoker(llm=client_for(fake_openai), clock=lambda: fixed)
    for _ in range(2):
        fake_openai.queue_text('{"s":1}Certo!', input_tokens=None)
        invoker.invoke(session=session_context(session), agent=AgentName.TRIAGEM)

    first, second = LLMCall.objects.order_by("id").values_list("tokens_input", "cached_tokens")
    assert fake_openai.requests[0] == fake_openai.requests[1]
    chars = len(prompt_text(fake_openai.requests[1]))
    # Input: the characters ÷ 4 rounded up; the cached prefix (all of it) ÷ 4 rounded down,
    # floored to a multiple of 128.
    assert [first, second] == [(-(-chars // 4), 0), (-(-chars // 4), chars // 4 // 128 * 128)]
    assert second[1] >= 1152


def test_an_active_override_is_used_and_its_history_id_recorded(
    fake_openai: FakeOpenAIServer, models_per_agent: dict[AgentName, str]
) -> None:
    session = make_world()
    override = PromptOverride.objects.create(
        agent="triagem", content="Override de {{ agent_name }}.", is_active=True
    )
    history_id = override.history.get().history_id
    fake_openai.queue_text('{"s":1}Oi!')

    call = build_agent_invoker(llm=client_for(fake_openai)).invoke(
        session=session_context(session), agent=AgentName.TRIAGEM
    )

    assert fake_openai.requests[0]["instructions"].startswith("Override de Lia.")
    assert call.prompt_version == f"override:{history_id}"
    assert LLMCall.objects.get().prompt_version == f"override:{history_id}"


def test_a_failed_call_is_recorded_with_its_prompt_version_then_raised(
    fake_openai: FakeOpenAIServer, models_per_agent: dict[AgentName, str]
) -> None:
    session = make_world()
    override = PromptOverride.objects.create(agent="triagem", content="Oi", is_active=True)
    fake_openai.queue_error(500)
    fake_openai.queue_error(503)

    with pytest.raises(LLMProviderError, match="HTTP 503"):
        build_agent_invoker(llm=client_for(fake_openai)).invoke(
            session=session_context(session), agent=AgentName.TRIAGEM
        )

    row = LLMCall.objects.get()
    assert (row.outcome, row.attempts, row.model) == ("provider_error", 2, "gpt-triage-test")
    assert row.error.startswith("HTTP 503")
    assert row.prompt_version == f"override:{override.history.get().history_id}"
    assert (row.raw_response, row.tokens_input) == ("", 0)
    assert row.context_snapshot is not None
    assert row.context_snapshot["session_id"] == session.pk
    assert fake_openai.request_count == 2


@pytest.mark.parametrize("attack", TEMPLATE_ATTACKS)
def test_an_attack_stored_around_the_form_falls_back_to_the_builtin_quickly(
    models_per_agent: dict[AgentName, str], caplog: pytest.LogCaptureFixture, attack: str
) -> None:
    session = make_world()
    content, (kind, name, line) = TEMPLATE_ATTACKS[attack]
    # objects.create runs no validation: as a row written by a script or before this check.
    override = PromptOverride.objects.create(agent="triagem", content=content, is_active=True)
    llm = FakeLLM()

    started = time.perf_counter()
    with caplog.at_level(logging.ERROR, logger="agents.invoker"):
        call = build_agent_invoker(llm=llm).invoke(
            session=session_context(session), agent=AgentName.TRIAGEM
        )
    elapsed = time.perf_counter() - started

    assert call.prompt_version == "builtin"
    assert call.instructions.startswith("Você é Lia, assistente virtual")
    assert LLMCall.objects.get().prompt_version == "builtin"
    assert [(r.getMessage(), vars(r)["error"]) for r in caplog.records] == [
        ("prompt_override_render_failed", f"{kind}: {name} (line {line})")
    ]
    assert (
        vars(caplog.records[0])["prompt_version"] == f"override:{override.history.get().history_id}"
    )
    assert len(llm.calls[0]["instructions"]) < 100_000
    assert elapsed < 0.5


def test_an_override_rendering_past_the_cap_with_real_values_falls_back(
    models_per_agent: dict[AgentName, str], caplog: pytest.LogCaptureFixture
) -> None:
    session = make_world(loaded=1)
    KBPackage.objects.filter(package_id="PACOTE_000").update(content="Conteúdo grande. " * 2_000)
    content = "Pacotes:\n" + "{{ loaded_packages }}\n" * 100  # valid: the samples are short
    assert override_problems(AgentName.TRIAGEM, content) == []
    PromptOverride.objects.create(agent="triagem", content=content, is_active=True)

    with caplog.at_level(logging.ERROR, logger="agents.invoker"):
        call = build_agent_invoker(llm=FakeLLM()).invoke(
            session=session_context(session), agent=AgentName.TRIAGEM
        )

    assert call.prompt_version == "builtin"
    assert [(r.getMessage(), vars(r)["error"]) for r in caplog.records] == [
        ("prompt_override_render_failed", "rendered_too_long: over 60000 characters")
    ]
    # The package is still given to the model once, in the packages item.
    assert call.reference.count("Conteúdo grande.") == 2_000
    assert (call.instructions + call.context).count("Conteúdo grande.") == 0


# One invocation: runtime config + strategic companies (2), active override (1), catalog
# (4: segments, intents, services, packages), loaded packages (1), history (1), LLMCall (1).
QUERIES_PER_INVOCATION = 10


@pytest.mark.parametrize(
    ("messages", "packages", "loaded"), [(2, 1, 1), (50, 100, 3), (120, 100, 10)]
)
def test_one_invocation_makes_a_fixed_number_of_queries(
    django_assert_num_queries: DjangoAssertNumQueries,
    models_per_agent: dict[AgentName, str],
    messages: int,
    packages: int,
    loaded: int,
) -> None:
    session = make_world(messages=messages, packages=packages, loaded=loaded)
    PromptOverride.objects.create(agent="triagem", content="Oi {{ agent_name }}", is_active=True)
    context = session_context(session)
    invoker = build_agent_invoker(llm=FakeLLM())

    with django_assert_num_queries(QUERIES_PER_INVOCATION):
        call = invoker.invoke(session=context, agent=AgentName.TRIAGEM)

    assert len(call.messages) == min(messages, 50)
    assert call.reference.count("Conteúdo completo do pacote") == loaded


@pytest.mark.parametrize("pinned", ["override", "builtin"])
def test_a_pinned_version_costs_one_query_for_an_override_and_none_for_the_builtin(
    django_assert_num_queries: DjangoAssertNumQueries,
    models_per_agent: dict[AgentName, str],
    pinned: str,
) -> None:
    session = make_world()
    old = PromptOverride.objects.create(agent="triagem", content="Antigo", is_active=True)
    version = f"override:{old.history.get().history_id}" if pinned == "override" else "builtin"
    PromptOverride.objects.filter(pk=old.pk).update(is_active=False)
    PromptOverride.objects.create(agent="triagem", content="Novo", is_active=True)
    context = replace(session_context(session), prompt_versions={"triagem": version})
    invoker = build_agent_invoker(llm=FakeLLM())

    # The pinned history row instead of the active override; nothing for the built-in prompt.
    expected = QUERIES_PER_INVOCATION if pinned == "override" else QUERIES_PER_INVOCATION - 1
    with django_assert_num_queries(expected):
        call = invoker.invoke(session=context, agent=AgentName.TRIAGEM)

    assert call.prompt_version == version
    assert call.instructions.startswith("Antigo" if pinned == "override" else "Você é Lia")


def test_a_pin_whose_history_row_is_gone_uses_the_active_override(
    models_per_agent: dict[AgentName, str], caplog: pytest.LogCaptureFixture
) -> None:
    session = make_world()
    old = PromptOverride.objects.create(agent="triagem", content="Antigo", is_active=False)
    gone = old.history.get().history_id
    old.history.all().delete()
    active = PromptOverride.objects.create(agent="triagem", content="Ativo", is_active=True)
    context = replace(session_context(session), prompt_versions={"triagem": f"override:{gone}"})

    with caplog.at_level(logging.WARNING, logger="agents.invoker"):
        call = build_agent_invoker(llm=FakeLLM()).invoke(session=context, agent=AgentName.TRIAGEM)

    assert call.instructions.startswith("Ativo")
    assert LLMCall.objects.get().prompt_version == f"override:{active.history.get().history_id}"
    assert [(r.getMessage(), vars(r)["prompt_version"]) for r in caplog.records] == [
        ("prompt_pin_unresolved", f"override:{gone}")
    ]


def test_build_agent_invoker_defaults_to_the_openai_client_from_settings(
    openai_settings: FakeOpenAIServer, models_per_agent: dict[AgentName, str]
) -> None:
    session = make_world()
    openai_settings.queue_text('{"s":1}Oi!')

    build_agent_invoker().invoke(session=session_context(session), agent=AgentName.TRIAGEM)

    assert openai_settings.requests[0]["model"] == "gpt-triage-test"
    assert openai_settings.request_headers[0]["authorization"] == "Bearer test-openai-key"
