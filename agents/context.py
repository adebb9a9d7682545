"""Plain snapshots the pure core works on: the catalog, the instance and one session.

The Django side (selectors in `knowledge_base`, `prompts_admin` and `conversations`) builds these
from the database; prompt builders, guards and the action mapping only ever see them. Pure module.
"""

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from agents.parameters import ParameterSpec
from agents.states import SessionState


@dataclass(frozen=True, slots=True)
class SegmentInfo:
    code: str
    label: str
    health_sensitive: bool = False


@dataclass(frozen=True, slots=True)
class IntentInfo:
    code: str
    label: str


@dataclass(frozen=True, slots=True)
class ServiceInfo:
    code: str
    label: str
    segment: str
    description: str = ""
    parameters: tuple[ParameterSpec, ...] = ()

    @property
    def required_parameters(self) -> tuple[ParameterSpec, ...]:
        return tuple(p for p in self.parameters if p.required)


@dataclass(frozen=True, slots=True)
class PackageInfo:
    """A KB package as the catalog lists it; `content` is filled only when it is loaded."""

    package_id: str
    title: str
    description: str
    health_sensitive: bool = False
    content: str = ""
    # The package's history id when it was read (the catalog's and a loaded package's), so a
    # session pins it and a recorded turn can be replayed exactly.
    version: int | None = None


@dataclass(frozen=True, slots=True)
class CatalogSnapshot:
    """What is active in the catalog now, keyed by code / package id."""

    segments: Mapping[str, SegmentInfo] = field(default_factory=dict)
    intents: Mapping[str, IntentInfo] = field(default_factory=dict)
    services: Mapping[str, ServiceInfo] = field(default_factory=dict)
    packages: Mapping[str, PackageInfo] = field(default_factory=dict)

    def services_of(self, segment: str) -> list[ServiceInfo]:
        return [s for s in self.services.values() if s.segment == segment]


@dataclass(frozen=True, slots=True)
class InstanceInfo:
    name: str
    display_phone: str = ""
    brand_context: str = ""
    health_sensitive: bool = False


@dataclass(frozen=True, slots=True)
class SessionContext:
    """The state of one session that an agent call is built from (and recorded with)."""

    session_id: int
    state: SessionState
    instance: InstanceInfo
    customer_phone: str = ""
    customer_name: str = ""
    segment: str = ""
    intent: str = ""
    service: str = ""
    technical_data: Mapping[str, Any] = field(default_factory=dict)
    registration_data: Mapping[str, Any] = field(default_factory=dict)
    loaded_packages: tuple[str, ...] = ()
    # Values the model sent that the schema does not declare (kept visible, never in the data);
    # a parameter given before its service was known is promoted once the service declares it.
    technical_extras: Mapping[str, Any] = field(default_factory=dict)
    registration_extras: Mapping[str, Any] = field(default_factory=dict)
    # The registration data as the code-4 message showed it to the customer (None outside
    # CONFIRM): a code 5 confirms exactly this, or it is not a confirmation (dispatcher).
    confirmation_data: Mapping[str, Any] | None = None
    # The prompt version of each prompt agent the session keeps until it ends, keyed by agent
    # value ("triagem" → "builtin" or "override:<history_id>"); empty until its first turn pins
    # them (`agents.invoker` then uses the active prompt).
    prompt_versions: Mapping[str, str] = field(default_factory=dict)
    # The history id of each package active at its first turn ({package id: history id}), which
    # its loaded packages are given at; a replay's are the versions the recorded call was given.
    package_versions: Mapping[str, int] = field(default_factory=dict)
