"""What an OUTBOUND ``template`` message sends (a staff template, `support.staff_actions`)."""

from dataclasses import dataclass
from typing import Any

from conversations.models import Message

TEMPLATE_MESSAGE_TYPE = "template"


@dataclass(frozen=True, slots=True)
class TemplatePayload:
    """What an OUTBOUND ``template`` message sends, kept in its `json_part` under "template"."""

    name: str
    language: str
    parameters: tuple[str, ...] = ()

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "language": self.language, "parameters": list(self.parameters)}


def template_of(message: Message) -> TemplatePayload:
    data = (message.json_part or {}).get("template") or {}
    return TemplatePayload(
        name=str(data.get("name", "")),
        language=str(data.get("language", "")),
        parameters=tuple(str(value) for value in data.get("parameters", ())),
    )
