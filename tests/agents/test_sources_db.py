"""The Django implementations of the invoker's sources: KB, prompts/runtime, history, recorder."""

import logging
from datetime import timedelta
from typing import Any
from uuid import UUID

import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from model_bakery import baker
from pytest_django import DjangoAssertNumQueries, Settings

from agents.context import IntentInfo, PackageInfo, SegmentInfo
from agents.llm import LLMCallResult, LLMRateLimitError
from agents.parameters import ParameterSpec
from agents.sources import (
    CallRecord,
    HistoryEntry,
    OverrideTemplate,
    StrategicCompanyInfo,
    package_versions_of,
)
from agents.states import AgentName
from conversations.agent_sources import DatabaseCallRecorder, DatabaseHistorySource
from conversations.handoff import summary_facts
from conversations.models import Direction, LLMCall, Message, Session
from knowledge_base.models import Intent, KBPackage, Segment, Service
from knowledge_base.selectors import DatabaseKBSource
from prompts_admin.models import (
    PromptOverride,
    Release,
    ReleaseStatus,
    RuntimeConfig,
    StrategicCompany,
)
from prompts_admin.selectors import (
    ChosenOverridesPromptSource,
    DatabasePromptSource,
    override_ids_of,
)

pytestmark = pytest.mark.django_db


def make_catalog() -> None:
    water = Segment.objects.create(code="AMBIENTAL", label="Ambiental")
    human = Segment.objects.create(code="HUMANO", label="Saúde humana", health_sensitive=True)
    old = Segment.objects.create(code="ANTIGO", label="Antigo", is_active=False)
    Intent.objects.create(code="ORCAMENTO", label="Orçamento")
    Intent.objects.create(code="RECLAMAR", label="Reclamar", is_active=False)
    Service.objects.create(
        code="AGUA",
        label="Análise de água",
        segment=water,
        description="Potabilidade",
        parameter_schema=[
            {"name": "quantidade", "label": "Quantidade", "type": "integer", "required": True}
        ],
    )
    Service.objects.create(code="TOX", label="Toxicológico", segment=human)
    Service.objects.create(code="DESLIGADO", label="Desligado", segment=water, is_active=False)
    Service.objects.create(code="DO_ANTIGO", label="De segmento inativo", segment=old)
    KBPackage.objects.create(
        package_id="ENDERECOS", title="Endereços", description="Onde ficamos", content="Rua A, 1"
    )
    KBPackage.objects.create(
        package_id="PREPARO",
        title="Preparo",
        description="Preparo de exames",
        content="Jejum de 8 horas",
        health_sensitive=True,
    )
    KBPackage.objects.create(
        package_id="RETIRADO",
        title="Retirado",
        description="Não usar",
        content="segredo antigo",
        is_active=False,
    )


def test_catalog_lists_only_active_rows_without_package_content() -> None:
    make_catalog()

    catalog = DatabaseKBSource().catalog()

    assert catalog.segments == {
        "AMBIENTAL": SegmentInfo("AMBIENTAL", "Ambiental", False),
        "HUMANO": SegmentInfo("HUMANO", "Saúde humana", True),
    }
    assert catalog.intents == {"ORCAMENTO": IntentInfo("ORCAMENTO", "Orçamento")}
    assert list(catalog.services) == ["AGUA", "TOX"]
    assert catalog.services["AGUA"].parameters == (
        ParameterSpec("quantidade", "Quantidade", "integer", True),
    )
    assert catalog.services["AGUA"].segment == "AMBIENTAL"
    # Each with its latest history id: what a session's first turn pins.
    enderecos, preparo = (
        KBPackage.objects.get(package_id=pid).history.latest("history_id").history_id
        for pid in ("ENDERECOS", "PREPARO")
    )
    assert catalog.packages == {
        "ENDERECOS": PackageInfo("ENDERECOS", "Endereços", "Onde ficamos", False, "", enderecos),
        "PREPARO": PackageInfo("PREPARO", "Preparo", "Preparo de exames", True, "", preparo),
    }
    assert package_versions_of(catalog.packages) == {"ENDERECOS": enderecos, "PREPARO": preparo}


def test_catalog_is_one_query_per_table(django_assert_num_queries: DjangoAssertNumQueries) -> None:
    make_catalog()

    with django_assert_num_queries(4):
        DatabaseKBSource().catalog()


def test_a_service_with_a_broken_stored_schema_is_offered_without_parameters_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    segment = Segment.objects.create(code="AMBIENTAL", label="Ambiental")
    service = Service.objects.create(code="AGUA", label="Água", segment=segment)
    # Bypass validation, as a bad migration or a manual UPDATE would.
    Service.objects.filter(pk=service.pk).update(parameter_schema=[{"name": "Bad Name"}])

    with caplog.at_level(logging.ERROR, logger="knowledge_base"):
        catalog = DatabaseKBSource().catalog()

    assert catalog.services["AGUA"].parameters == ()
    assert [(r.message, r.service) for r in caplog.records] == [  # type: ignore[attr-defined]
        ("service_schema_invalid", "AGUA")
    ]


def test_load_packages_returns_active_ones_with_content_and_latest_history_id(
    django_assert_num_queries: DjangoAssertNumQueries,
) -> None:
    make_catalog()
    package = KBPackage.objects.get(package_id="ENDERECOS")
    package.content = "Rua B, 2"
    package.save()
    latest = package.history.latest("history_id").history_id

    with django_assert_num_queries(1):
        loaded = DatabaseKBSource().load_packages(["ENDERECOS", "RETIRADO", "NAO_EXISTE"])

    assert loaded == {
        "ENDERECOS": PackageInfo(
            "ENDERECOS", "Endereços", "Onde ficamos", False, "Rua B, 2", latest
        )
    }


def test_load_packages_with_no_ids_makes_no_query(
    django_assert_num_queries: DjangoAssertNumQueries,
) -> None:
    with django_assert_num_queries(0):
        assert DatabaseKBSource().load_packages([]) == {}


def edited(package_id: str, content: str) -> int:
    """`package_id` saved with `content`; the history id of the version it had before."""
    package = KBPackage.objects.get(package_id=package_id)
    before: int = package.history.latest("history_id").history_id
    package.content = content
    package.save()
    return before


def test_a_pinned_version_is_given_after_an_edit_and_a_deactivation_in_one_query(
    django_assert_num_queries: DjangoAssertNumQueries,
) -> None:
    make_catalog()
    pinned = edited("ENDERECOS", "Rua B, 2")
    preparo = KBPackage.objects.get(package_id="PREPARO")
    preparo_pin = preparo.history.latest("history_id").history_id
    preparo.is_active = False
    preparo.save()

    with django_assert_num_queries(1):
        loaded = DatabaseKBSource().load_packages(
            ["ENDERECOS", "PREPARO"], {"ENDERECOS": pinned, "PREPARO": preparo_pin}
        )

    assert loaded == {
        "ENDERECOS": PackageInfo(
            "ENDERECOS", "Endereços", "Onde ficamos", False, "Rua A, 1", pinned
        ),
        "PREPARO": PackageInfo(
            "PREPARO", "Preparo", "Preparo de exames", True, "Jejum de 8 horas", preparo_pin
        ),
    }


def test_a_package_with_no_readable_pinned_version_is_the_live_one_in_a_second_query(
    django_assert_num_queries: DjangoAssertNumQueries,
) -> None:
    make_catalog()
    pinned = edited("ENDERECOS", "Rua B, 2")
    KBPackage.history.filter(history_id=pinned).delete()
    latest = KBPackage.objects.get(package_id="ENDERECOS").history.latest("history_id").history_id
    preparo = KBPackage.objects.get(package_id="PREPARO").history.latest("history_id").history_id
    # PREPARO's pin is a history id of another package: not PREPARO's.
    versions = {"ENDERECOS": pinned, "PREPARO": latest}

    with django_assert_num_queries(2):
        loaded = DatabaseKBSource().load_packages(["ENDERECOS", "PREPARO"], versions)

    assert {pid: (p.content, p.version) for pid, p in loaded.items()} == {
        "ENDERECOS": ("Rua B, 2", latest),
        "PREPARO": ("Jejum de 8 horas", preparo),
    }


def test_a_package_the_session_did_not_pin_is_the_live_active_one(
    django_assert_num_queries: DjangoAssertNumQueries,
) -> None:
    make_catalog()
    latest = KBPackage.objects.get(package_id="ENDERECOS").history.latest("history_id").history_id

    with django_assert_num_queries(1):
        loaded = DatabaseKBSource().load_packages(["ENDERECOS", "RETIRADO"], {"OUTRO": 1})

    assert {pid: (p.content, p.version) for pid, p in loaded.items()} == {
        "ENDERECOS": ("Rua A, 1", latest)
    }


def test_live_release_is_the_published_one_in_one_query(
    django_assert_num_queries: DjangoAssertNumQueries,
) -> None:
    Release.objects.create(name="Rascunho", status=ReleaseStatus.DRAFT)
    Release.objects.create(name="Antiga", status=ReleaseStatus.SUPERSEDED)
    with django_assert_num_queries(1):
        assert DatabasePromptSource().live_release() is None

    published = Release.objects.create(name="Março", status=ReleaseStatus.PUBLISHED)
    Release.objects.create(name="Aprovada", status=ReleaseStatus.APPROVED)

    with django_assert_num_queries(1):
        assert DatabasePromptSource().live_release() == published.pk


def test_active_override_with_its_latest_history_id(
    django_assert_num_queries: DjangoAssertNumQueries,
) -> None:
    PromptOverride.objects.create(agent="triagem", content="velho", is_active=False)
    override = PromptOverride.objects.create(agent="triagem", content="v1", is_active=True)
    override.content = "v2 {{ agent_name }}"
    override.save()
    latest = override.history.latest("history_id").history_id

    with django_assert_num_queries(1):
        found = DatabasePromptSource().active_override(AgentName.TRIAGEM)

    assert found == OverrideTemplate("v2 {{ agent_name }}", f"override:{latest}")
    assert DatabasePromptSource().active_override(AgentName.COLETA) is None


def test_active_overrides_of_every_prompt_agent_in_one_query(
    django_assert_num_queries: DjangoAssertNumQueries,
) -> None:
    PromptOverride.objects.create(agent="triagem", content="rascunho", is_active=False)
    triagem = PromptOverride.objects.create(agent="triagem", content="t1", is_active=True)
    triagem.content = "t2"
    triagem.save()
    coleta = PromptOverride.objects.create(agent="coleta", content="c1", is_active=True)

    with django_assert_num_queries(1):
        found = DatabasePromptSource().active_overrides()

    assert found == {
        AgentName.TRIAGEM: OverrideTemplate(
            "t2", f"override:{triagem.history.latest('history_id').history_id}"
        ),
        AgentName.QUALIFICACAO: None,
        AgentName.COLETA: OverrideTemplate("c1", f"override:{coleta.history.get().history_id}"),
    }


def test_override_at_reads_the_text_as_of_that_version_in_one_query(
    django_assert_num_queries: DjangoAssertNumQueries,
) -> None:
    override = PromptOverride.objects.create(agent="triagem", content="antigo", is_active=True)
    old = override.history.get().history_id
    override.content = "novo"
    override.is_active = False
    override.save()

    with django_assert_num_queries(1):
        found = DatabasePromptSource().override_at(AgentName.TRIAGEM, f"override:{old}")

    assert found == OverrideTemplate("antigo", f"override:{old}")


@pytest.mark.parametrize(
    ("agent", "version", "queries"),
    [
        # Another agent's version is not this agent's prompt.
        (AgentName.COLETA, "override:{old}", 1),
        (AgentName.TRIAGEM, "override:999999", 1),
        (AgentName.TRIAGEM, "override:unversioned-3", 0),
        (AgentName.TRIAGEM, "builtin", 0),
        (AgentName.TRIAGEM, "", 0),
    ],
)
def test_override_at_is_none_for_a_version_it_cannot_read(
    django_assert_num_queries: DjangoAssertNumQueries, agent: AgentName, version: str, queries: int
) -> None:
    override = PromptOverride.objects.create(agent="triagem", content="antigo", is_active=True)
    old = override.history.get().history_id

    with django_assert_num_queries(queries):
        assert DatabasePromptSource().override_at(agent, version.format(old=old)) is None


def test_override_ids_of_the_versions_in_one_query(
    django_assert_num_queries: DjangoAssertNumQueries,
) -> None:
    override = PromptOverride.objects.create(agent="triagem", content="v1")
    first = override.history.get().history_id
    override.content = "v2"
    override.save()
    second = override.history.latest("history_id").history_id

    with django_assert_num_queries(1):
        ids = override_ids_of([f"override:{first}", f"override:{second}", "builtin", "override:0"])

    assert ids == {first: override.pk, second: override.pk}
    with django_assert_num_queries(0):
        assert override_ids_of(["builtin", "override:unversioned-4"]) == {}


def test_only_the_simulators_source_has_a_chosen_override() -> None:
    draft = PromptOverride.objects.create(agent="triagem", content="rascunho")
    chosen = ChosenOverridesPromptSource({AgentName.TRIAGEM: draft.pk})

    assert chosen.chosen_override(AgentName.TRIAGEM) == OverrideTemplate(
        "rascunho", f"override:{draft.history.get().history_id}"
    )
    assert chosen.chosen_override(AgentName.COLETA) is None
    assert DatabasePromptSource().chosen_override(AgentName.TRIAGEM) is None
    draft.delete()
    assert chosen.chosen_override(AgentName.TRIAGEM) is None


def test_runtime_settings_from_config_and_active_strategic_companies(
    django_assert_num_queries: DjangoAssertNumQueries,
) -> None:
    config = RuntimeConfig.load()
    config.agent_name = "Bia"
    config.company_name = "Lab Sul"
    config.business_hours = {"mon": [["09:00", "12:00"]]}
    config.satisfaction_after_lead = True
    config.satisfaction_question = "De 1 a 5, como foi?"
    config.satisfaction_style = "list"
    config.save()
    StrategicCompany.objects.create(
        name="Zeta Indústria",
        cnpj="11222333000181",
        phone_numbers="+55 11 91234-5678\n(19) 3333-4444\n",
    )
    StrategicCompany.objects.create(name="Alfa Antiga", is_active=False)

    with django_assert_num_queries(2):
        runtime = DatabasePromptSource().runtime()

    assert (runtime.agent_name, runtime.company_name) == ("Bia", "Lab Sul")
    assert runtime.business_hours == {"mon": [["09:00", "12:00"]]}
    assert runtime.strategic_companies == (
        StrategicCompanyInfo("Zeta Indústria", "11222333000181", ("5511912345678", "551933334444")),
    )
    assert runtime.handoff_message_open == config.handoff_message_open
    assert runtime.invalid_format_message == config.invalid_format_message
    assert (
        runtime.satisfaction_after_lead,
        runtime.satisfaction_question,
        runtime.satisfaction_style,
    ) == (True, "De 1 a 5, como foi?", "list")


def test_runtime_creates_the_config_row_with_defaults_on_first_use(settings: Settings) -> None:
    settings.AGENT_NAME = "Lia"

    runtime = DatabasePromptSource().runtime()

    assert RuntimeConfig.objects.count() == 1
    assert runtime.agent_name == "Lia"
    assert runtime.business_hours["mon"] == [["08:00", "18:00"]]


def make_message(
    session: Session, direction: str, content: str, minutes: int, **kw: Any
) -> Message:
    message: Message = baker.make(
        Message,
        session=session,
        direction=direction,
        content=content,
        created_at=timezone.now() - timedelta(minutes=100 - minutes),
        **kw,
    )
    return message


def test_history_source_returns_the_sessions_conversation_newest_limited_oldest_first(
    django_assert_num_queries: DjangoAssertNumQueries,
) -> None:
    session, other = baker.make(Session, _quantity=2)
    m1 = make_message(session, Direction.INBOUND, "Oi", 1)
    make_message(session, Direction.SYSTEM, "evento", 2)
    m3 = make_message(session, Direction.OUTBOUND, "Olá!", 3)
    make_message(session, Direction.OUTBOUND, "rascunho", 4, error="superseded")
    make_message(session, Direction.INBOUND, "", 5, message_type="image")
    make_message(other, Direction.INBOUND, "de outra sessão", 6)
    m7 = make_message(session, Direction.INBOUND, "Quero um orçamento", 7)

    with django_assert_num_queries(1):
        entries = DatabaseHistorySource().history(session.pk, 2)

    assert entries == [
        HistoryEntry(session.pk, "OUTBOUND", "Olá!", "", m3.pk),
        HistoryEntry(session.pk, "INBOUND", "Quero um orçamento", "", m7.pk),
    ]
    assert DatabaseHistorySource().history(session.pk, 50)[0] == HistoryEntry(
        session.pk, "INBOUND", "Oi", "", m1.pk
    )
    assert DatabaseHistorySource().history(session.pk, 0) == []


def test_history_follows_whatsapp_timestamps_when_a_burst_arrives_out_of_order() -> None:
    session = baker.make(Session)
    now = timezone.now()
    reply = make_message(session, Direction.OUTBOUND, "Olá! Como posso ajudar?", 1)
    second = make_message(
        session, Direction.INBOUND, "de água de poço", 3, wa_timestamp=now - timedelta(minutes=50)
    )
    first = make_message(
        session,
        Direction.INBOUND,
        "Quero analisar água",
        4,
        wa_timestamp=now - timedelta(minutes=51),
    )

    assert DatabaseHistorySource().history(session.pk, 50) == [
        HistoryEntry(session.pk, "OUTBOUND", "Olá! Como posso ajudar?", "", reply.pk),
        HistoryEntry(session.pk, "INBOUND", "Quero analisar água", "", first.pk),
        HistoryEntry(session.pk, "INBOUND", "de água de poço", "", second.pk),
    ]


def test_history_leaves_out_replies_whatsapp_refused_to_deliver() -> None:
    session = baker.make(Session)
    asked = make_message(session, Direction.INBOUND, "Quero um orçamento", 1)
    make_message(
        session,
        Direction.OUTBOUND,
        "Qual o seu e-mail?",
        2,
        delivery_status="failed",
        delivery_error_code=131047,
    )
    again = make_message(session, Direction.INBOUND, "Oi? Alguém aí?", 3)

    assert DatabaseHistorySource().history(session.pk, 50) == [
        HistoryEntry(session.pk, "INBOUND", "Quero um orçamento", "", asked.pk),
        HistoryEntry(session.pk, "INBOUND", "Oi? Alguém aí?", "", again.pk),
    ]


def test_recorder_writes_a_success_row() -> None:
    session = baker.make(Session)
    message = baker.make(Message, session=session, direction=Direction.INBOUND)
    turn = UUID("00000000-0000-4000-8000-000000000002")

    DatabaseCallRecorder().record(
        CallRecord(
            session_id=session.pk,
            agent=AgentName.TRIAGEM,
            purpose="agent",
            model="gpt-x-2026",
            result=LLMCallResult('{"s":1}Oi', "gpt-x-2026", 321, 12, 850, attempts=2),
            prompt_version="override:15",
            context_snapshot={"state": "TRIAGE"},
            raw_response='{"s":1}Oi',
            turn_id=turn,
            message_id=message.pk,
        )
    )

    row = LLMCall.objects.get()
    assert (row.session_id, row.message_id, row.turn_id) == (session.pk, message.pk, turn)
    assert (row.agent, row.purpose, row.model) == ("triagem", "agent", "gpt-x-2026")
    assert (row.tokens_input, row.tokens_output, row.latency_ms, row.attempts) == (321, 12, 850, 2)
    assert (row.outcome, row.error, row.prompt_version) == ("ok", "", "override:15")
    assert (row.context_snapshot, row.raw_response) == ({"state": "TRIAGE"}, '{"s":1}Oi')


def test_recorder_writes_a_failure_row() -> None:
    session = baker.make(Session)

    DatabaseCallRecorder().record(
        CallRecord(
            session_id=session.pk,
            agent=AgentName.COLETA,
            purpose="agent",
            model="gpt-y",
            error=LLMRateLimitError("HTTP 429 (insufficient_quota): quota", quota_exhausted=True),
            prompt_version="builtin",
        )
    )

    row = LLMCall.objects.get()
    assert (row.outcome, row.error) == ("quota_exceeded", "HTTP 429 (insufficient_quota): quota")
    assert (row.tokens_input, row.tokens_output, row.attempts, row.model) == (0, 0, 1, "gpt-y")
    assert (row.prompt_version, row.context_snapshot, row.raw_response) == ("builtin", None, "")


@pytest.mark.parametrize(
    ("result", "error"),
    [
        (None, None),
        (
            LLMCallResult("Oi", "m", 1, 1, 10),
            LLMRateLimitError("HTTP 429 (insufficient_quota): quota", quota_exhausted=True),
        ),
    ],
    ids=["neither", "both"],
)
def test_a_call_record_holds_a_result_or_an_error_and_only_one(
    result: LLMCallResult | None, error: LLMRateLimitError | None
) -> None:
    with pytest.raises(ValueError, match="a call record holds a result or an error, and only one"):
        CallRecord(
            session_id=1,
            agent=AgentName.COLETA,
            purpose="agent",
            model="m",
            prompt_version="builtin",
            result=result,
            error=error,
        )


def test_history_marks_what_the_team_wrote(
    django_assert_num_queries: DjangoAssertNumQueries,
) -> None:
    session = baker.make(Session)
    user = baker.make(User, username="ana")
    asked = make_message(session, Direction.INBOUND, "Quero falar com alguém", 1)
    reply = make_message(session, Direction.OUTBOUND, "Sou a Ana.", 2, staff_user=user)
    event = make_message(session, Direction.SYSTEM, "", 3, staff_user=user)

    with django_assert_num_queries(1):
        entries = DatabaseHistorySource().history(session.pk, 50)

    assert entries == [
        HistoryEntry(session.pk, "INBOUND", "Quero falar com alguém", "", asked.pk),
        HistoryEntry(session.pk, "OUTBOUND", "Sou a Ana.", "", reply.pk, staff=True),
    ]
    assert event.pk not in [e.message_id for e in entries]


def test_history_brings_the_text_a_reply_quotes_from_the_same_session_only(
    django_assert_num_queries: DjangoAssertNumQueries,
) -> None:
    session, other = baker.make(Session, _quantity=2)
    make_message(other, Direction.OUTBOUND, "De outra conversa", 1, wa_message_id="wamid.OTHER")
    asked = make_message(
        session, Direction.OUTBOUND, "Qual é o seu segmento?", 2, wa_message_id="wamid.ASKED"
    )
    answer = make_message(session, Direction.INBOUND, "Alimentos", 3, reply_to_wamid="wamid.ASKED")
    foreign = make_message(session, Direction.INBOUND, "Esse", 4, reply_to_wamid="wamid.OTHER")
    unknown = make_message(session, Direction.INBOUND, "Aquele", 5, reply_to_wamid="wamid.GONE")

    with django_assert_num_queries(1):
        entries = DatabaseHistorySource().history(session.pk, 50)

    assert entries == [
        HistoryEntry(session.pk, "OUTBOUND", "Qual é o seu segmento?", "", asked.pk),
        HistoryEntry(
            session.pk, "INBOUND", "Alimentos", "", answer.pk, quoted="Qual é o seu segmento?"
        ),
        HistoryEntry(session.pk, "INBOUND", "Esse", "", foreign.pk),
        HistoryEntry(session.pk, "INBOUND", "Aquele", "", unknown.pk),
    ]


def test_history_reads_a_long_quote_only_as_far_as_the_model_could_read_it() -> None:
    session = baker.make(Session)
    long_text = "x" * 5_000
    make_message(session, Direction.OUTBOUND, long_text, 1, wa_message_id="wamid.LONG")
    make_message(session, Direction.INBOUND, "Isso", 2, reply_to_wamid="wamid.LONG")

    entries = DatabaseHistorySource().history(session.pk, 50)

    assert entries[-1].quoted == "x" * 1_000


def test_history_and_summary_leave_out_reactions_which_are_shown_on_their_message() -> None:
    session = baker.make(Session)
    asked = make_message(session, Direction.OUTBOUND, "Posso confirmar?", 1, reaction="👍")
    make_message(session, Direction.INBOUND, "👍", 2, message_type="reaction")

    assert DatabaseHistorySource().history(session.pk, 50) == [
        HistoryEntry(session.pk, "OUTBOUND", "Posso confirmar?", "", asked.pk)
    ]
    assert [line.text for line in summary_facts(session).transcript] == ["Posso confirmar?"]
