"""A worker keeps the configuration every turn reads for WORKER_CONFIG_CACHE_SECONDS
(conversations/config_cache.py): the runtime settings, active overrides and catalog are read
once per window from the database, an edit is seen after it, and everything else is read as
before. Without a worker (eager tasks, the web, these tests' other modules) nothing is kept."""

from collections.abc import Iterator
from typing import Any

import pytest
from model_bakery import baker

from agents.states import AgentName
from config import celery as celery_config
from conversations import config_cache
from conversations.config_cache import (
    CachedKBSource,
    CachedPromptSource,
    ExpiringValue,
    WorkerConfigCache,
    worker_config_cache,
    worker_config_cache_enable,
)
from conversations.turns.tasks import build_pipeline_deps
from knowledge_base.models import Segment
from knowledge_base.selectors import DatabaseKBSource
from prompts_admin.models import PromptOverride, Release, ReleaseStatus, RuntimeConfig
from prompts_admin.selectors import DatabasePromptSource


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def sources(clock: Clock) -> tuple[CachedPromptSource, CachedKBSource]:
    """The database sources through one cache whose window is 5 s of `clock`."""
    cache = WorkerConfigCache(5, clock)
    return (
        CachedPromptSource(DatabasePromptSource(), cache),
        CachedKBSource(DatabaseKBSource(), cache),
    )


@pytest.fixture
def no_worker_cache() -> Iterator[None]:
    yield
    worker_config_cache_enable(0)


def test_a_value_is_read_once_per_window_and_again_after_it(clock: Clock) -> None:
    reads: list[int] = []
    value: ExpiringValue[int] = ExpiringValue(5, clock)

    def read() -> int:
        reads.append(len(reads) + 1)
        return len(reads)

    seen = [value.get(read)]
    clock.now += 4.9
    seen.append(value.get(read))
    clock.now += 0.1
    seen.append(value.get(read))
    seen.append(value.get(read))

    assert (seen, reads) == ([1, 1, 2, 2], [1, 2])


@pytest.mark.django_db
def test_the_cached_sources_read_the_database_once_per_window(
    sources: tuple[CachedPromptSource, CachedKBSource],
    clock: Clock,
    django_assert_num_queries: Any,
) -> None:
    prompts, kb = sources
    RuntimeConfig.load()  # created on its first read; not what is counted here
    baker.make(Segment, code="AMBIENTAL", label="Ambiental", is_active=True)
    override = baker.make(
        PromptOverride, agent=AgentName.TRIAGEM.value, content="Seja breve.", is_active=True
    )

    # Runtime (config + companies), overrides (one), catalog (four).
    with django_assert_num_queries(7):
        first = (prompts.runtime(), prompts.active_overrides(), kb.catalog())
    with django_assert_num_queries(0):
        again = (prompts.runtime(), prompts.active_overrides(), kb.catalog())
        triage = prompts.active_override(AgentName.TRIAGEM)
    assert [a is b for a, b in zip(first, again, strict=True)] == [True, True, True]
    assert (triage.content if triage else None) == "Seja breve."

    override.content = "Seja muito breve."
    override.save()
    Segment.objects.filter(code="AMBIENTAL").update(label="Meio ambiente")
    with django_assert_num_queries(0):  # within the window: what was read
        assert prompts.active_overrides()[AgentName.TRIAGEM] == triage
    clock.now += 5
    with django_assert_num_queries(7):
        later = (prompts.runtime(), prompts.active_overrides(), kb.catalog())
    edited = later[1][AgentName.TRIAGEM]
    assert (edited.content if edited else None, later[2].segments["AMBIENTAL"].label) == (
        "Seja muito breve.",
        "Meio ambiente",
    )


@pytest.mark.django_db
def test_package_contents_and_the_chosen_override_are_the_inner_source_s(
    sources: tuple[CachedPromptSource, CachedKBSource], django_assert_num_queries: Any
) -> None:
    prompts, kb = sources

    with django_assert_num_queries(1):
        assert kb.load_packages(["coleta-agua"]) == {}
    with django_assert_num_queries(0):
        assert prompts.chosen_override(AgentName.TRIAGEM) is None


@pytest.mark.django_db
def test_a_pinned_version_is_the_cached_active_one_or_its_history_row_read_once(
    sources: tuple[CachedPromptSource, CachedKBSource],
    clock: Clock,
    django_assert_num_queries: Any,
) -> None:
    prompts, _kb = sources
    override = baker.make(
        PromptOverride, agent=AgentName.TRIAGEM.value, content="Versão 1.", is_active=True
    )
    with django_assert_num_queries(1):
        first = prompts.active_overrides()[AgentName.TRIAGEM]
    assert first is not None
    override.content = "Versão 2."
    override.save()

    # Pinned to the active version the cache holds: no read.
    with django_assert_num_queries(0):
        assert prompts.override_at(AgentName.TRIAGEM, first.version) is first
    clock.now += 5  # the cache now holds version 2; version 1 is read from its history row once
    with django_assert_num_queries(2):
        old = prompts.override_at(AgentName.TRIAGEM, first.version)
    with django_assert_num_queries(0):
        again = prompts.override_at(AgentName.TRIAGEM, first.version)
    assert (old, again is old) == (first, True)
    # An unreadable pin is read each time (rare, and logged by the invoker).
    with django_assert_num_queries(1):
        assert prompts.override_at(AgentName.TRIAGEM, "override:999999") is None
    with django_assert_num_queries(1):
        assert prompts.override_at(AgentName.TRIAGEM, "override:999999") is None


def test_only_a_started_worker_keeps_the_reads(no_worker_cache: None, settings: Any) -> None:
    assert worker_config_cache() is None
    settings.WORKER_CONFIG_CACHE_SECONDS = 5.0

    celery_config.keep_the_configuration_reads()

    cache = worker_config_cache()
    assert (cache.ttl if cache else None) == 5.0
    settings.WORKER_CONFIG_CACHE_SECONDS = 0
    celery_config.keep_the_configuration_reads()
    assert worker_config_cache() is None


@pytest.mark.django_db
def test_a_worker_s_turn_reads_through_the_cache_and_the_simulator_s_draft_does_not(
    no_worker_cache: None,
) -> None:
    def sources(**kwargs: Any) -> tuple[str, str]:
        deps = build_pipeline_deps(**kwargs)
        return (
            type(deps.prompts._inner).__name__,  # type: ignore[attr-defined]
            type(deps.kb._inner).__name__,  # type: ignore[attr-defined]
        )

    assert sources() == ("DatabasePromptSource", "DatabaseKBSource")
    worker_config_cache_enable(5)
    assert config_cache.worker_config_cache() is not None
    assert sources() == ("CachedPromptSource", "CachedKBSource")
    assert sources(prompts=DatabasePromptSource()) == ("DatabasePromptSource", "CachedKBSource")


@pytest.mark.django_db
def test_the_release_candidates_are_read_once_per_window(
    sources: tuple[CachedPromptSource, CachedKBSource],
    clock: Clock,
    django_assert_num_queries: Any,
) -> None:
    prompts, _kb = sources
    candidate = PromptOverride.objects.create(
        agent=AgentName.COLETA.value, content="Nova coleta.", rollout_percent=20
    )
    version = f"override:{candidate.history.get().history_id}"

    with django_assert_num_queries(1):
        first = prompts.rollout_candidates()
    candidate.rollout_percent = 60
    candidate.save()
    with django_assert_num_queries(0):
        again = prompts.rollout_candidates()
    clock.now += 5
    with django_assert_num_queries(1):
        later = prompts.rollout_candidates()

    assert again is first
    assert [(c.override.version, c.percent) for c in first.values()] == [(version, 20)]
    assert list(first) == [AgentName.COLETA]
    assert [c.percent for c in later.values()] == [60]


@pytest.mark.django_db
def test_the_published_release_is_read_once_per_window(
    sources: tuple[CachedPromptSource, CachedKBSource],
    clock: Clock,
    django_assert_num_queries: Any,
) -> None:
    prompts, _kb = sources
    march = Release.objects.create(name="Março", status=ReleaseStatus.PUBLISHED)

    with django_assert_num_queries(1):
        first = prompts.live_release()
    Release.objects.filter(pk=march.pk).update(status=ReleaseStatus.SUPERSEDED)
    april = Release.objects.create(name="Abril", status=ReleaseStatus.PUBLISHED)
    with django_assert_num_queries(0):
        again = prompts.live_release()
    clock.now += 4.9
    with django_assert_num_queries(0):
        still = prompts.live_release()
    clock.now += 0.1
    with django_assert_num_queries(1):
        later = prompts.live_release()

    assert (first, again, still, later) == (march.pk, march.pk, march.pk, april.pk)


@pytest.mark.django_db
def test_no_published_release_is_kept_for_the_window_too(
    sources: tuple[CachedPromptSource, CachedKBSource],
    clock: Clock,
    django_assert_num_queries: Any,
) -> None:
    prompts, _kb = sources

    with django_assert_num_queries(1):
        assert prompts.live_release() is None
    Release.objects.create(name="Abril", status=ReleaseStatus.PUBLISHED)
    with django_assert_num_queries(0):
        assert prompts.live_release() is None


@pytest.mark.django_db
def test_pinned_package_versions_are_read_by_the_inner_source_every_time(
    sources: tuple[CachedPromptSource, CachedKBSource], django_assert_num_queries: Any
) -> None:
    _prompts, kb = sources

    for _ in range(2):
        # The pinned version (none readable), then the live package: two queries each time.
        with django_assert_num_queries(2):
            assert kb.load_packages(["coleta-agua"], {"coleta-agua": 41}) == {}
