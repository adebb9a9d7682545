"""The configuration every turn reads, kept for a few seconds by each worker process.

Every turn reads the runtime settings (two statements), the active prompt overrides (one) and the
knowledge-base catalog (four): seven statements (a first turn also reads the candidates of a
gradual release and the published release, two more), about a twelfth of a worker's CPU per turn
(bench/worker_cpu.py), for rows that change when an editor saves in the admin. A worker keeps
what it read for ``WORKER_CONFIG_CACHE_SECONDS`` (5 s by default; 0 reads on every turn), so an
edit reaches every worker within that time: a conversation's first turn in that window pins the
prompt versions, release and package versions that were active before it, as one that started
a moment earlier would have.

Switched on when a worker starts (`config/celery.py`), like the connection pool. The web
process, eager tasks (the embedded default), the simulator and the tests read on every turn, so
an edit is seen at once there. The values are immutable snapshots (frozen dataclasses,
mappings nobody writes to) shared by the worker's threads; two threads that find a value expired
at the same moment may both read it, which is harmless.
"""

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Generic, TypeVar

from agents.context import CatalogSnapshot, PackageInfo
from agents.sources import (
    KBSource,
    OverrideTemplate,
    PromptSource,
    RolloutCandidate,
    RuntimeSettings,
)
from agents.states import PROMPT_AGENTS, AgentName

T = TypeVar("T")


class ExpiringValue(Generic[T]):
    """A value read at most once per `ttl` seconds of `clock`."""

    def __init__(self, ttl: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._ttl = ttl
        self._clock = clock
        self._entry: tuple[float, T] | None = None

    def get(self, read: Callable[[], T]) -> T:
        now = self._clock()
        entry = self._entry  # one read of the attribute: another thread may replace it
        if entry is not None and now < entry[0]:
            return entry[1]
        value = read()
        self._entry = (now + self._ttl, value)
        return value


# Pinned versions kept by a process, at most (a version's text never changes: a history row).
MAX_VERSIONS = 256


class WorkerConfigCache:
    """One process's runtime settings, active overrides, release candidates, published release and
    catalog, each kept
    for `ttl` s, and the override versions it read (immutable: kept until `MAX_VERSIONS` are, then
    started over)."""

    def __init__(self, ttl: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl = ttl
        self.versions: dict[tuple[AgentName, str], OverrideTemplate] = {}
        self.runtime: ExpiringValue[RuntimeSettings] = ExpiringValue(ttl, clock)
        self.overrides: ExpiringValue[Mapping[AgentName, OverrideTemplate | None]] = ExpiringValue(
            ttl, clock
        )
        self.catalog: ExpiringValue[CatalogSnapshot] = ExpiringValue(ttl, clock)
        self.candidates: ExpiringValue[Mapping[AgentName, RolloutCandidate]] = ExpiringValue(
            ttl, clock
        )
        self.release: ExpiringValue[int | None] = ExpiringValue(ttl, clock)


class CachedPromptSource:
    """`inner`'s runtime settings, active overrides, release candidates, published release and
    pinned versions through `cache`; the
    caller's chosen override as `inner` gives it."""

    def __init__(self, inner: PromptSource, cache: WorkerConfigCache) -> None:
        self._inner = inner
        self._cache = cache

    def runtime(self) -> RuntimeSettings:
        return self._cache.runtime.get(self._inner.runtime)

    def active_overrides(self) -> Mapping[AgentName, OverrideTemplate | None]:
        return self._cache.overrides.get(self._inner.active_overrides)

    def rollout_candidates(self) -> Mapping[AgentName, RolloutCandidate]:
        return self._cache.candidates.get(self._inner.rollout_candidates)

    def live_release(self) -> int | None:
        return self._cache.release.get(self._inner.live_release)

    def active_override(self, agent: AgentName) -> OverrideTemplate | None:
        if agent in PROMPT_AGENTS:  # one active override per agent (a unique constraint)
            return self.active_overrides().get(agent)
        return self._inner.active_override(agent)

    def override_at(self, agent: AgentName, version: str) -> OverrideTemplate | None:
        """A session's pinned version: the active override when it is that version (most
        sessions), else its history row, read once per process."""
        active = self.active_overrides().get(agent) if agent in PROMPT_AGENTS else None
        if active is not None and active.version == version:
            return active
        versions = self._cache.versions
        found = versions.get((agent, version))
        if found is None:
            found = self._inner.override_at(agent, version)
            if found is not None:  # an unreadable pin is read again: it is rare, and logged
                if len(versions) >= MAX_VERSIONS:
                    versions.clear()
                versions[(agent, version)] = found
        return found

    def chosen_override(self, agent: AgentName) -> OverrideTemplate | None:
        return self._inner.chosen_override(agent)


class CachedKBSource:
    """`inner`'s catalog through `cache`; package contents read when asked, as `inner` reads
    them (a package's text is read only by the turns that load it)."""

    def __init__(self, inner: KBSource, cache: WorkerConfigCache) -> None:
        self._inner = inner
        self._cache = cache

    def catalog(self) -> CatalogSnapshot:
        return self._cache.catalog.get(self._inner.catalog)

    def load_packages(
        self, package_ids: Sequence[str], versions: Mapping[str, int] | None = None
    ) -> dict[str, PackageInfo]:
        return self._inner.load_packages(package_ids, versions)


_worker_cache: WorkerConfigCache | None = None


def worker_config_cache_enable(ttl: float) -> None:
    """Keep this process's configuration reads for `ttl` seconds (none when `ttl` <= 0)."""
    global _worker_cache
    _worker_cache = WorkerConfigCache(ttl) if ttl > 0 else None


def worker_config_cache() -> WorkerConfigCache | None:
    """The process's cache when a worker switched it on, else None (read on every turn)."""
    return _worker_cache
