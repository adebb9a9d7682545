"""The prompt-override form's template checks: the chosen agent's variables, named, or nothing.

`PromptTemplateForm` is the base of the admin's `PromptOverrideForm`. It validates `content` as a
prompt template for the selected agent (`agents.templating.validate_prompt_template`) and refuses
a syntax error, an unknown variable, a tag left open, a tag, filter or attribute outside the
allow-list, a template that cannot render or renders past the limit, with a message naming the
problem and its line; its help text lists the chosen agent's variables (from
`agents.prompts.variables`, the one place they are documented) and what the allow-list permits.

`RuntimeConfigForm` edits the runtime configuration with its business hours as one field per
weekday instead of raw JSON, and refuses a satisfaction survey turned on without a question.
"""

from typing import Any

from django import forms
from django.core.exceptions import ValidationError
from django.utils.formats import number_format
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe
from django.utils.text import capfirst
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from agents.business_hours import national_holidays
from agents.prompts.variables import sample_variables, variable_names, variables_for
from agents.states import PROMPT_AGENTS, AgentName
from agents.templating import (
    ALLOWED_FILTERS,
    MAX_IF_DEPTH,
    PROMPT_RENDERED_MAX_CHARS,
    PROMPT_TEMPLATE_MAX_CHARS,
    TemplateProblem,
    validate_prompt_template,
)
from prompts_admin.models import AGENT_CHOICES, PromptOverride, RuntimeConfig


def override_problems(agent: AgentName, content: str) -> list[TemplateProblem]:
    """What is wrong with `content` as `agent`'s prompt template (empty: nothing)."""
    return validate_prompt_template(content, variable_names(agent), sample_variables(agent))


def problem_error(problem: TemplateProblem, agent: AgentName) -> ValidationError:
    """The admin's message for one problem (English msgid, translated)."""
    if problem.kind == "unknown_variable":
        names = ", ".join(sorted(variable_names(agent)))
        if problem.line is None:
            return ValidationError(
                _("Unknown variable “%(name)s”. The variables of this agent are: %(names)s."),
                code="unknown_variable",
                params={"name": problem.detail, "names": names},
            )
        return ValidationError(
            _(
                "Unknown variable “%(name)s” on line %(line)s. "
                "The variables of this agent are: %(names)s."
            ),
            code="unknown_variable",
            params={"name": problem.detail, "line": problem.line, "names": names},
        )
    if problem.kind == "unclosed_tag":
        return ValidationError(
            _("Tag not closed on line %(line)s: “%(snippet)s”. Close it with }} or %%}."),
            code="unclosed_tag",
            params={"line": problem.line, "snippet": problem.detail},
        )
    if problem.kind == "syntax":
        if problem.line is None:
            return ValidationError(
                _("Template syntax error: %(error)s"),
                code="syntax",
                params={"error": problem.detail.strip()},
            )
        return ValidationError(
            _(
                "Syntax error on line %(line)s (%(error)s): check the {{ }} and {%% %%} of "
                "that line."
            ),
            code="syntax",
            params={"line": problem.line, "error": problem.detail.strip()},
        )
    # `{% load x %}` fails to compile; a bare `{% load %}` compiles and is refused as a tag.
    if problem.kind == "load_not_allowed" or (
        problem.kind == "tag_not_allowed" and problem.detail == "load"
    ):
        return ValidationError(
            _(
                "{%% load %%} is not allowed in prompts (line %(line)s): no tag library can be "
                "loaded. Allowed: the tags %(tags)s and the filters %(filters)s."
            ),
            code="load_not_allowed",
            params={
                "line": problem.line if problem.line is not None else "?",
                "tags": ALLOWED_TAGS_TEXT,
                "filters": ", ".join(sorted(ALLOWED_FILTERS)),
            },
        )
    if problem.kind == "unclosed_block":
        return ValidationError(
            _(
                "The {%% %(tag)s %%} block opened on line %(line)s is not closed: add its "
                "{%% end%(tag)s %%}."
            ),
            code="unclosed_block",
            params={"tag": problem.detail, "line": problem.line},
        )
    if problem.kind == "misplaced_tag":
        return ValidationError(
            _(
                "{%% %(tag)s %%} on line %(line)s is out of place: it only goes inside a block "
                "opened before it ({%% if %%} … {%% endif %%}, or {%% comment %%} … "
                "{%% endcomment %%}), once."
            ),
            code="misplaced_tag",
            params={"tag": problem.detail, "line": problem.line},
        )
    if problem.kind in _CONSTRUCT_MESSAGES:
        message, param = _CONSTRUCT_MESSAGES[problem.kind]
        if problem.line is None:
            return ValidationError(message, code=problem.kind, params={param: problem.detail})
        return ValidationError(
            _("Line %(line)s: %(problem)s"),
            code=problem.kind,
            params={"line": problem.line, "problem": message % {param: problem.detail}},
        )
    if problem.kind in _LIMIT_MESSAGES:
        return ValidationError(
            _LIMIT_MESSAGES[problem.kind],
            code=problem.kind,
            params={"limit": number_format(int(problem.detail), force_grouping=True)},
        )
    return ValidationError(
        _("The template cannot be rendered: %(error)s"),
        code="render",
        params={"error": problem.detail},
    )


ALLOWED_TAGS_TEXT = (
    "{% if %}, {% elif %}, {% else %}, {% endif %}, {% comment %} … {% endcomment %}, {# … #}"
)

# What the allow-list refuses, named (agents/templating.py).
_CONSTRUCT_MESSAGES = {
    "tag_not_allowed": (_("The tag {%% %(tag)s %%} is not allowed in prompts."), "tag"),
    "filter_not_allowed": (_("The filter |%(filter)s is not allowed in prompts."), "filter"),
    "attribute_not_allowed": (
        _("“%(name)s”: a variable's attributes are not allowed in prompts; use the variable."),
        "name",
    ),
}
_LIMIT_MESSAGES = {
    "too_long": _("A prompt may have at most %(limit)s characters."),
    "rendered_too_long": _(
        "The rendered prompt passes the limit of %(limit)s characters (tried with the sample "
        "values and with empty values)."
    ),
    "too_deep": _("{%% if %%} blocks may be nested at most %(limit)s levels deep."),
}


def variables_help_text(selected: str | None = None) -> SafeString:
    """The agents' variables, as HTML for the content field's help text, folded behind "Ver as
    variáveis disponíveis" (a `<details>`, no script needed): only the `selected`
    agent's shown (the others hidden) when one is chosen, every agent's otherwise. Each group
    names its agent (`data-agent-variables`) so `override_form.js` shows the group of the agent
    picked in the form."""
    labels = dict(AGENT_CHOICES)
    shown = selected if selected in labels else None
    groups = format_html_join(
        "",
        '<li data-agent-variables="{}"{}><strong>{}</strong>: {}</li>',
        (
            (
                agent.value,
                mark_safe(" hidden") if shown is not None and agent.value != shown else "",
                capfirst(labels[agent.value]),
                format_html_join(
                    "; ",
                    "<code>{{{{ {} }}}}</code> — {}",
                    ((v.name, v.description) for v in variables_for(agent)),
                ),
            )
            for agent in PROMPT_AGENTS
        ),
    )
    # About 1,000 words: folded, so the edit box is not buried under them.
    return format_html(
        '{}<details class="prompt-variables"><summary>{}</summary>{}<ul>{}</ul>{}</details>',
        gettext(
            "The text is assembled for every call with its agent's variables, written as "
            "{{ name }}. The conversation context and the fixed rules are always added after it."
        ),
        gettext("See the available variables"),
        gettext("The variables of each agent:"),
        groups,
        gettext(
            "Allowed: {%% if %%} / {%% elif %%} / {%% else %%} / {%% endif %%} (at most "
            "%(depth)s levels), {%% comment %%} and {# … #}, and the filters %(filters)s. At "
            "most %(chars)s characters, and %(rendered)s once rendered."
        )
        % {
            "depth": MAX_IF_DEPTH,
            "filters": ", ".join(sorted(ALLOWED_FILTERS)),
            "chars": number_format(PROMPT_TEMPLATE_MAX_CHARS, force_grouping=True),
            "rendered": number_format(PROMPT_RENDERED_MAX_CHARS, force_grouping=True),
        },
    )


class PromptTemplateForm(forms.ModelForm[PromptOverride]):
    """A ModelForm whose `content` must be a valid prompt template for the chosen `agent`."""

    class Media:
        js = ("prompts_admin/admin/override_form.js",)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        content = self.fields.get("content")
        if content is not None:
            content.help_text = variables_help_text(self.selected_agent())

    def selected_agent(self) -> str | None:
        """The agent the form is for: as posted, else as prefilled or stored."""
        if self.is_bound:
            value = self.data.get(self.add_prefix("agent"))
        else:
            value = self.initial.get("agent") or self.instance.agent
        return str(value) if value else None

    def clean(self) -> dict[str, Any]:
        super().clean()
        cleaned = self.cleaned_data
        agent, content = cleaned.get("agent"), cleaned.get("content")
        if agent in {a.value for a in PROMPT_AGENTS} and content:
            errors = [
                problem_error(p, AgentName(agent))
                for p in override_problems(AgentName(agent), content)
                # The model field's MaxLengthValidator says so already.
                if p.kind != "too_long"
            ]
            if errors:
                self.add_error("content", errors)
        return cleaned


# --- Business hours as a form: one field per weekday ----------------------------------------------

WEEKDAY_LABELS = {
    "mon": _("Monday"),
    "tue": _("Tuesday"),
    "wed": _("Wednesday"),
    "thu": _("Thursday"),
    "fri": _("Friday"),
    "sat": _("Saturday"),
    "sun": _("Sunday"),
}
HOURS_FIELD_PREFIX = "hours_"


def format_spans(spans: list[list[str]]) -> str:
    """`[["08:00", "12:00"], ["13:00", "18:00"]]` → "08:00-12:00, 13:00-18:00"."""
    return ", ".join(f"{start}-{end}" for start, end in spans)


def parse_spans(text: str) -> list[list[str]]:
    """The inverse of `format_spans`; an empty text is a closed day. Spans must be HH:MM-HH:MM,
    each ending after it starts, in order and not overlapping."""
    spans: list[list[str]] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        # An en dash (as word processors type it) is read as the hyphen.
        pieces = [p.strip() for p in part.replace("\u2013", "-").split("-")]
        if len(pieces) != 2 or not all(_is_time(p) for p in pieces):
            raise ValidationError(
                _("“%(span)s” is not an interval: write it as 08:00-18:00."),
                code="span",
                params={"span": part},
            )
        start, end = (p.zfill(5) for p in pieces)
        if start >= end:
            raise ValidationError(
                _("“%(span)s”: the end must come after the start."),
                code="span_order",
                params={"span": part},
            )
        if spans and start < spans[-1][1]:
            raise ValidationError(
                _("“%(span)s” overlaps or comes before the previous interval: list them in order."),
                code="span_overlap",
                params={"span": part},
            )
        spans.append([start, end])
    return spans


def _is_time(text: str) -> bool:
    hours, sep, minutes = text.partition(":")
    return (
        sep == ":"
        and (hours + minutes).isascii()
        and hours.isdigit()
        and minutes.isdigit()
        and len(minutes) == 2
        and 1 <= len(hours) <= 2
        and int(hours) < 24
        and int(minutes) < 60
    )


def _day_field(day: str) -> forms.CharField:
    return forms.CharField(
        label=WEEKDAY_LABELS[day],
        required=False,
        help_text=_("Intervals separated by commas, e.g. 08:00-12:00, 13:00-18:00. Empty: closed."),
        widget=forms.TextInput(attrs={"class": "vTextField"}),
    )


class RuntimeConfigForm(forms.ModelForm[RuntimeConfig]):
    """The runtime configuration with its business hours as one field per weekday ("08:00-12:00,
    13:00-18:00"; empty: closed), not raw JSON; they are stored as the same JSON object."""

    hours_mon = _day_field("mon")
    hours_tue = _day_field("tue")
    hours_wed = _day_field("wed")
    hours_thu = _day_field("thu")
    hours_fri = _day_field("fri")
    hours_sat = _day_field("sat")
    hours_sun = _day_field("sun")

    class Meta:
        model = RuntimeConfig
        fields = [
            "agent_name",
            "company_name",
            "handoff_message_open",
            "handoff_message_closed",
            "unsupported_media_message",
            "invalid_format_message",
            "satisfaction_after_close",
            "satisfaction_after_lead",
            "satisfaction_question",
            "satisfaction_style",
        ]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        stored = self.instance.business_hours or {}
        for day in WEEKDAY_LABELS:
            self.initial.setdefault(HOURS_FIELD_PREFIX + day, format_spans(stored.get(day) or []))

    def clean(self) -> dict[str, Any]:
        super().clean()
        cleaned = self.cleaned_data
        hours: dict[str, list[list[str]]] = {}
        for day in WEEKDAY_LABELS:
            name = HOURS_FIELD_PREFIX + day
            try:
                hours[day] = parse_spans(str(cleaned.get(name) or ""))
            except ValidationError as error:
                self.add_error(name, error)
        asks = cleaned.get("satisfaction_after_close") or cleaned.get("satisfaction_after_lead")
        if asks and not str(cleaned.get("satisfaction_question") or "").strip():
            self.add_error(
                "satisfaction_question",
                ValidationError(
                    _("Write the satisfaction question, or turn the survey off."),
                    code="required",
                ),
            )
        if not self.errors:
            self.instance.business_hours = hours
        return cleaned


def holidays_description(year: int) -> SafeString:
    """The national holidays of `year` (closed all day, automatically), for the business-hours
    fieldset."""
    return format_html(
        "{}<ul>{}</ul>",
        gettext("National holidays are closed all day, automatically. In %(year)s:")
        % {"year": year},
        format_html_join(
            "",
            "<li>{}: {}</li>",
            ((day.strftime("%d/%m"), name) for day, name in national_holidays(year)),
        ),
    )
