"""What one agent call's system prompt is built from, and the pt-BR text of each fact.

`PromptInputs` gathers the session, the runtime settings, the catalog, the loaded packages and
the clock. The template variables (`variables.py`), the metadata block (`metadata.py`) and the
guards (`agents/guards.py`) all format their facts with the functions here, so one fact reads
the same wherever it appears. Pure module.
"""

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from agents import phones
from agents.business_hours import BUSINESS_TZ, BusinessHoursStatus
from agents.context import CatalogSnapshot, PackageInfo, SegmentInfo, ServiceInfo, SessionContext
from agents.parameters import ParameterSpec
from agents.sources import RuntimeSettings
from agents.states import AgentName

NOT_YET = "ainda não identificado"
WEEKDAY_NAMES = (
    "segunda-feira",
    "terça-feira",
    "quarta-feira",
    "quinta-feira",
    "sexta-feira",
    "sábado",
    "domingo",
)
PARAMETER_TYPE_LABELS = {
    "text": "texto",
    "integer": "número inteiro",
    "decimal": "número",
    "boolean": "sim ou não",
    "choice": "uma das opções",
    "date": "data",
}


@dataclass(frozen=True, slots=True)
class PromptInputs:
    agent: AgentName
    session: SessionContext
    runtime: RuntimeSettings
    catalog: CatalogSnapshot
    # The session's loaded packages that still exist and are active, in the session's order.
    loaded_packages: Mapping[str, PackageInfo]
    hours: BusinessHoursStatus
    now: datetime

    @property
    def segment_info(self) -> SegmentInfo | None:
        return self.catalog.segments.get(self.session.segment)

    @property
    def service_info(self) -> ServiceInfo | None:
        return self.catalog.services.get(self.session.service)

    @property
    def health_sensitive(self) -> bool:
        """Guard 5's condition: the instance, the segment or a loaded package is health-sensitive."""
        segment = self.segment_info
        return (
            self.session.instance.health_sensitive
            or (segment is not None and segment.health_sensitive)
            or any(p.health_sensitive for p in self.loaded_packages.values())
        )


def format_datetime(moment: datetime) -> str:
    """`sexta-feira, 25/12/2026, 10:00` in Brasília time."""
    local = moment.astimezone(BUSINESS_TZ)
    return f"{WEEKDAY_NAMES[local.weekday()]}, {local:%d/%m/%Y}, {local:%H:%M}"


def describe_hours(hours: BusinessHoursStatus) -> str:
    if hours.is_open:
        return "aberto agora"
    text = "fechado agora"
    if hours.holiday:
        text += f" (feriado nacional: {hours.holiday})"
    if hours.next_opening is not None:
        text += f"; próxima abertura: {format_datetime(hours.next_opening)}"
    return text


def describe_instance(inputs: PromptInputs) -> str:
    instance = inputs.session.instance
    text = instance.name
    if instance.display_phone:
        text += f" ({instance.display_phone})"
    return text


def describe_segment(inputs: PromptInputs) -> str:
    code = inputs.session.segment
    if not code:
        return NOT_YET
    info = inputs.segment_info
    return f"{code} — {info.label}" if info is not None else code


def describe_intent(inputs: PromptInputs) -> str:
    code = inputs.session.intent
    if not code:
        return "ainda não identificada"
    info = inputs.catalog.intents.get(code)
    return f"{code} — {info.label}" if info is not None else code


def describe_service(inputs: PromptInputs) -> str:
    code = inputs.session.service
    if not code:
        return NOT_YET
    info = inputs.service_info
    return f"{code} — {info.label}" if info is not None else code


def format_data(data: Mapping[str, Any]) -> str:
    """Collected data as `- chave: valor` lines; `nenhum dado ainda` when empty."""
    if not data:
        return "nenhum dado ainda"
    return "\n".join(f"- {key}: {_value(value)}" for key, value in data.items())


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "sim" if value else "não"
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def format_segments(catalog: CatalogSnapshot) -> str:
    if not catalog.segments:
        return "nenhum segmento ativo"
    return "\n".join(f"- {s.code}: {s.label}" for s in catalog.segments.values())


def format_intents(catalog: CatalogSnapshot) -> str:
    if not catalog.intents:
        return "nenhuma intenção ativa"
    return "\n".join(f"- {i.code}: {i.label}" for i in catalog.intents.values())


def format_parameter(spec: ParameterSpec) -> str:
    kind = PARAMETER_TYPE_LABELS.get(spec.type, spec.type)
    if spec.choices:
        kind += " (" + ", ".join(spec.choices) + ")"
    need = "obrigatório" if spec.required else "opcional"
    return f"{spec.name} — {spec.label}; {kind}; {need}"


def format_services(services: list[ServiceInfo]) -> str:
    if not services:
        return "nenhum serviço ativo neste segmento"
    blocks = []
    for service in services:
        lines = [f"- {service.code}: {service.label}"]
        if service.description:
            lines.append(f"  Descrição: {' '.join(service.description.split())}")
        if service.parameters:
            lines.append("  Parâmetros técnicos:")
            lines.extend(f"    - {format_parameter(p)}" for p in service.parameters)
        else:
            lines.append("  Parâmetros técnicos: nenhum")
        blocks.append("\n".join(lines))
    return "\n".join(blocks)


def format_kb_catalog(catalog: CatalogSnapshot) -> str:
    if not catalog.packages:
        return "nenhum pacote disponível"
    return "\n".join(f"- {p.package_id}: {p.description}" for p in catalog.packages.values())


def format_loaded_packages(packages: Mapping[str, PackageInfo]) -> str:
    if not packages:
        return "nenhum pacote carregado"
    return "\n\n".join(
        f"### {p.package_id} — {p.title}\n{p.content.strip()}" for p in packages.values()
    )


def format_phone(digits: str) -> str:
    """The phone as staff read it (`agents.phones.format_phone`: ``+55 11 91234-5678``);
    "desconhecido" when the session has none."""
    return phones.format_phone(digits) if digits else "desconhecido"
