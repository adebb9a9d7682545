"""The simulator page (`…/conversations/session/simulator/`, issue 14 §3): talk to the bot as a
customer from the admin, never through WhatsApp.

Prompt editors, Support and superusers (`can_simulate`) write as a simulated customer of a chosen
instance (the demo's by default); each message is a plain form POST that runs
`conversations.simulator.simulated_message_send` — the real webhook use case and pipeline with the
dry-run sender — and redirects back (post/redirect/get). The turn's `TurnReport`, with the customer
text and the wall-clock latency, is kept in the staff member's own Django session, for the current
simulated conversation only; the page shows them with the latest handoff summary of that
conversation. "Nova conversa" closes it (`simulated_session_reset`).

Each staff member writes from a phone of their own (`simulated_phone`), so two editors never share
a conversation. For each agent with saved drafts (inactive overrides) the form offers the active
prompt or one of them; the choice (kept in the Django session) reaches
`simulated_message_send(prompt_overrides=…)` for that staff member's turns only.
"""

import time
from dataclasses import asdict
from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.translation import gettext as _

from agents.labels import AGENT_LABELS
from agents.states import PROMPT_AGENTS, AgentName
from conversations.admin.queue import ATTEND_SESSION
from conversations.inbound.session_rules import open_sessions
from conversations.labels import handoff_label, state_label
from conversations.models import HandoffSummary, Instance, Session
from conversations.simulator import (
    DEMO_PHONE_NUMBER_ID,
    SimulationError,
    model_configured,
    simulated_message_send,
    simulated_session_reset,
)
from prompts_admin.models import PromptOverride

SIMULATOR_URL_NAME = "conversations_session_simulator"
CHANGE_PROMPT = "prompts_admin.change_promptoverride"
# The Django session's key of the shown turns: {"session_id": int, "turns": [dict, ...]}.
TURNS_KEY = "simulator_turns"
# The Django session's key of the chosen drafts: {agent value: PromptOverride id}.
PROMPTS_KEY = "simulator_prompts"
# 55 00 is no Brazilian area code; 9 keeps these apart from `simulate`'s default phone.
PHONE_PREFIX = "55009"
MAX_TEXT = 4096


def can_simulate(user: Any) -> bool:
    """Prompt editors (they change prompts), Support (they attend) and superusers."""
    return bool(
        user.is_active
        and user.is_staff
        and (user.is_superuser or user.has_perm(CHANGE_PROMPT) or user.has_perm(ATTEND_SESSION))
    )


def simulated_phone(user_id: int) -> str:
    """The staff member's own simulated customer phone: 13 digits, like a Brazilian mobile."""
    return f"{PHONE_PREFIX}{user_id:08d}"


def _chosen_instance(request: HttpRequest, instances: list[Instance]) -> Instance | None:
    wanted = request.POST.get("instance") or request.GET.get("instance")
    for instance in instances:
        if wanted and str(instance.pk) == wanted:
            return instance
    for instance in instances:
        if instance.phone_number_id == DEMO_PHONE_NUMBER_ID:
            return instance
    return instances[0] if instances else None


def _draft_choices(chosen: dict[str, int]) -> list[dict[str, Any]]:
    """Per agent with saved drafts: its select's name, label and options (one query)."""
    drafts: dict[str, list[dict[str, Any]]] = {}
    for pk, agent, note in (
        PromptOverride.objects.filter(is_active=False)
        .order_by("agent", "-pk")
        .values_list("pk", "agent", "note")
    ):
        label = _("Draft #%(id)s") % {"id": pk}
        drafts.setdefault(agent, []).append(
            {
                "pk": pk,
                "label": f"{label}: {note}" if note else label,
                "selected": chosen.get(agent) == pk,
            }
        )
    return [
        {
            "name": f"prompt_{agent.value}",
            "label": _(AGENT_LABELS[agent]),
            "options": drafts[agent.value],
        }
        for agent in PROMPT_AGENTS
        if agent.value in drafts
    ]


def _chosen_drafts(request: HttpRequest) -> dict[str, int]:
    """The drafts the send form chose, by agent value (empty: the active prompt)."""
    chosen: dict[str, int] = {}
    for agent in PROMPT_AGENTS:
        value = request.POST.get(f"prompt_{agent.value}", "")
        if value.isascii() and value.isdigit():
            chosen[agent.value] = int(value)
    return chosen


def _page_url(instance: Instance | None) -> str:
    url = reverse(f"admin:{SIMULATOR_URL_NAME}")
    return f"{url}?instance={instance.pk}" if instance else url


def _open_session(instance: Instance, phone: str) -> Session | None:
    return (
        open_sessions(instance.phone_number_id)
        .filter(customer_phone=phone, is_simulated=True)
        .first()
    )


def session_simulator(
    request: HttpRequest, *, model_admin: admin.ModelAdmin[Session]
) -> HttpResponse:
    """GET shows the conversation; POST sends a message (or resets) and redirects back."""
    if not can_simulate(request.user):
        raise PermissionDenied
    instances = list(Instance.objects.filter(is_active=True).order_by("name", "pk"))
    instance = _chosen_instance(request, instances)
    phone = simulated_phone(int(request.user.pk or 0))
    if request.method == "POST":
        if instance is not None:
            _post(request, instance=instance, phone=phone)
        return HttpResponseRedirect(_page_url(instance))
    session = _open_session(instance, phone) if instance else None
    stored = request.session.get(TURNS_KEY) or {}
    turns = stored.get("turns", []) if session and stored.get("session_id") == session.pk else []
    chosen: dict[str, int] = request.session.get(PROMPTS_KEY) or {}
    summary = (
        HandoffSummary.objects.filter(session=session).order_by("-id").first() if session else None
    )
    context = {
        **model_admin.admin_site.each_context(request),
        "title": _("Simulator"),
        "opts": Session._meta,
        "instances": instances,
        "instance": instance,
        "phone": phone,
        "session": session,
        "turns": [_labelled(turn) for turn in turns],
        "summary": summary,
        "draft_choices": _draft_choices(chosen),
        "model_configured": model_configured(),
        "max_text": MAX_TEXT,
    }
    return TemplateResponse(request, "admin/conversations/session/simulator.html", context)


def _post(request: HttpRequest, *, instance: Instance, phone: str) -> None:
    if "reset" in request.POST:
        simulated_session_reset(instance=instance, phone=phone)
        request.session.pop(TURNS_KEY, None)
        return
    text = request.POST.get("text", "").strip()[:MAX_TEXT]
    if not text:
        messages.error(request, _("Write a message."))
        return
    if not model_configured():
        messages.error(request, _("The simulator needs a model: set OPENAI_API_KEY."))
        return
    chosen = _chosen_drafts(request)
    request.session[PROMPTS_KEY] = chosen
    started = time.monotonic()
    try:
        report = simulated_message_send(
            instance=instance,
            phone=phone,
            text=text,
            prompt_overrides={AgentName(agent): pk for agent, pk in chosen.items()},
        )
    except SimulationError as error:
        messages.error(request, str(error))
        return
    turn = {
        **asdict(report),
        "text": text,
        "drafts": ", ".join(f"{agent} #{pk}" for agent, pk in chosen.items()),
        "latency_ms": round((time.monotonic() - started) * 1000),
    }
    stored = request.session.get(TURNS_KEY) or {}
    previous = stored.get("turns", []) if stored.get("session_id") == report.session_id else []
    request.session[TURNS_KEY] = {"session_id": report.session_id, "turns": [*previous, turn]}


def simulator_urls(model_admin: admin.ModelAdmin[Session]) -> list[URLPattern]:
    """The simulator's URL, for `SessionAdmin.get_urls` (before the admin's `<object_id>/`)."""

    def view(request: HttpRequest) -> HttpResponse:
        return session_simulator(request, model_admin=model_admin)

    return [path("simulator/", model_admin.admin_site.admin_view(view), name=SIMULATOR_URL_NAME)]


def _labelled(turn: dict[str, Any]) -> dict[str, Any]:
    """A stored turn with its state and handoff reason as staff read them (pt-BR labels)."""
    return {
        **turn,
        "state": state_label(str(turn.get("state", ""))),
        "handoff_reason": handoff_label(str(turn.get("handoff_reason") or "")),
    }
