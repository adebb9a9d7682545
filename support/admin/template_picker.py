"""The composer's template picker once WhatsApp's 24-hour window is closed
(templates/admin/conversations/session/template_picker.html, template_picker.js): the
approved WhatsApp message templates the conversation's number may send, a field per parameter
with Meta's example, and a preview. Sending is the existing send-template staff action, with
its one-time form token."""

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import uuid4

from django.urls import reverse

from agents.states import SessionState
from conversations.message_templates import template_examples
from conversations.models import MessageTemplate, Session, TemplateCategory
from support.admin.staff_actions import action_url_name
from support.staff_actions import can_attend, sendable_templates, window_is_open


@dataclass(frozen=True, slots=True)
class PickerParameter:
    label: str
    example: str


@dataclass(frozen=True, slots=True)
class PickerTemplate:
    pk: int
    name: str
    language: str
    category: str
    parameters: list[PickerParameter]


@dataclass(frozen=True, slots=True)
class TemplatePicker:
    """What template_picker.html shows; `data` feeds its preview (through json_script)."""

    url: str
    form_token: str
    templates: list[PickerTemplate]
    data: dict[str, Any]


def template_picker_for(*, session: Session, user: Any, now: datetime) -> TemplatePicker | None:
    """The picker for `user` on `session`, or None when it has no place: the user may not
    attend, the bot holds the conversation (take it over first) or the window is open."""
    if not can_attend(user) or session.state != SessionState.HUMAN:
        return None
    if window_is_open(session, now):
        return None
    categories = dict(TemplateCategory.choices)
    templates: list[PickerTemplate] = []
    data: dict[str, Any] = {}
    for template in sendable_templates(session).order_by("name", "language"):
        labels = [str(label) for label in template.parameters or []]
        examples = template_examples(template.components or [])
        templates.append(
            PickerTemplate(
                pk=template.pk,
                name=template.name,
                language=template.language,
                category=str(categories.get(template.category, "")),
                parameters=[
                    PickerParameter(label, examples[i] if i < len(examples) else "")
                    for i, label in enumerate(labels)
                ],
            )
        )
        data[str(template.pk)] = {
            "header": _text_of(template, "HEADER"),
            "body": template.body or template.name,
            "footer": _text_of(template, "FOOTER"),
        }
    return TemplatePicker(
        url=reverse(f"admin:{action_url_name('send_template')}", args=[session.pk]),
        form_token=str(uuid4()),
        templates=templates,
        data=data,
    )


def _text_of(template: MessageTemplate, kind: str) -> str:
    for component in template.components or []:
        if isinstance(component, dict) and str(component.get("type", "")).upper() == kind:
            text = component.get("text")
            return text if isinstance(text, str) else ""
    return ""
