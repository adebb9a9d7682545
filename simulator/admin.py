"""The simulator page (`…/conversations/session/simulator/`): talk to the bot as a customer
from the admin, never through WhatsApp.

Prompt editors, Support and superusers (`can_simulate`) write as a simulated customer of a chosen
instance (the demo's by default). Each message is a plain form POST that calls
`simulator.simulation.simulated_turn_start` and redirects back (post/redirect/get): the
delivery is applied in the request, the turn runs in the ``conversations.simulated_turn`` task,
never in the web worker. While it is in flight the page shows the customer's message with
"waiting for the answer" and `simulator.js` polls `…/simulator/turn/<id>/` (same permission, own
turns only) every second, reloading once it ended. Eager Celery (the embedded default, no
broker) runs the task inside the POST: the redirect then shows the answer and nothing polls.

One turn in flight per staff member and ``SIMULATOR_MAX_TURNS_PER_MINUTE`` a minute; a refused
message gets a pt-BR error on the page. The turns shown are the staff member's `SimulatedTurn`
rows of the open simulated conversation, with the latest handoff summary. "Nova conversa" closes
it (`simulated_session_reset`). The reply buttons or list rows under the bot's last message are
buttons on the page: clicking one sends the tap as WhatsApp would (an interactive reply quoting
that message, `simulated_text_delivery`), through the same path as a typed message; only the
options of the last bot message are offered, as on a phone where older ones no longer matter.

Each staff member writes from a phone of their own (`simulated_phone`, in the simulator's
reserved range), so two editors never share a conversation. For each agent with saved drafts
(inactive overrides) the form offers the active prompt or one of them; the choice (kept in the
Django session) reaches that staff member's turns only.
"""

from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.translation import gettext as _

import simulator.personas_admin  # noqa: F401 (registers the simulated customers' admins)
from agents.labels import AGENT_LABELS
from agents.states import PROMPT_AGENTS, AgentName
from conversations.inbound.session_rules import open_session_find
from conversations.labels import handoff_label, state_label
from conversations.models import HandoffSummary, Instance, Session, SimulatedTurn
from prompts_admin.models import PromptOverride
from simulator.simulation import (
    DEMO_PHONE_NUMBER_ID,
    SIMULATED_PHONE_PREFIX,
    TURN_LOST,
    SimulationError,
    model_configured,
    offered_tap,
    simulated_session_reset,
    simulated_turn_start,
    simulated_turns_expire,
)
from simulator.tasks import simulated_turn
from support.admin.queue import ATTEND_SESSION
from whatsapp.payload import Customer

SIMULATOR_URL_NAME = "conversations_session_simulator"
SIMULATOR_TURN_URL_NAME = "conversations_session_simulator_turn"
CHANGE_PROMPT = "prompts_admin.change_promptoverride"
# The Django session's key of the chosen drafts: {agent value: PromptOverride id}.
PROMPTS_KEY = "simulator_prompts"
# The simulator's reserved range; 9 keeps these apart from `simulate`'s default phone.
PHONE_PREFIX = f"{SIMULATED_PHONE_PREFIX}9"
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
    return open_session_find(
        instance.phone_number_id, Customer(phone=phone, user_id=""), simulated=True
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
    user_id = int(request.user.pk or 0)
    simulated_turns_expire(user_id=user_id, now=timezone.now())
    session = _open_session(instance, phone) if instance else None
    turns = _shown_turns(user_id, session) if session else []
    in_flight = next((turn for turn in turns if turn["pending"]), None)
    chosen: dict[str, int] = request.session.get(PROMPTS_KEY) or {}
    summary = (
        HandoffSummary.objects.filter(session=session).order_by("-id").first() if session else None
    )
    context = {
        **model_admin.admin_site.each_context(request),
        "title": _("Talk to the bot"),
        "opts": Session._meta,
        "instances": instances,
        "instance": instance,
        "phone": phone,
        "session": session,
        "turns": turns,
        "poll_url": (
            reverse(f"admin:{SIMULATOR_TURN_URL_NAME}", args=[in_flight["id"]]) if in_flight else ""
        ),
        "summary": summary,
        "draft_choices": _draft_choices(chosen),
        "model_configured": model_configured(),
        "max_text": MAX_TEXT,
    }
    return TemplateResponse(request, "admin/conversations/session/simulator.html", context)


def _post(request: HttpRequest, *, instance: Instance, phone: str) -> None:
    if "reset" in request.POST:
        simulated_session_reset(instance=instance, phone=phone)
        return
    tap = None
    if "option" in request.POST:
        session = _open_session(instance, phone)
        tap = offered_tap(session.pk, request.POST["option"]) if session else None
        if tap is None:
            messages.error(request, _("That option is no longer offered: write your answer."))
            return
        text = tap.option.title
        # The option's form has no prompt choice: the send form's last one stays.
        chosen: dict[str, int] = request.session.get(PROMPTS_KEY) or {}
    else:
        text = request.POST.get("text", "").strip()[:MAX_TEXT]
        chosen = _chosen_drafts(request)
    if not text:
        messages.error(request, _("Write a message."))
        return
    if not model_configured():
        messages.error(request, _("The simulator needs a model: set OPENAI_API_KEY."))
        return
    request.session[PROMPTS_KEY] = chosen
    try:
        simulated_turn_start(
            user_id=int(request.user.pk or 0),
            instance=instance,
            phone=phone,
            text=text,
            prompt_overrides={AgentName(agent): int(pk) for agent, pk in chosen.items()},
            enqueue=simulated_turn.delay,
            tap=tap,
        )
    except SimulationError as error:
        messages.error(request, str(error))


def _shown_turns(user_id: int, session: Session) -> list[dict[str, Any]]:
    """The staff member's turns of the conversation, as the page shows them (pt-BR labels)."""
    rows = (
        SimulatedTurn.objects.filter(user_id=user_id, session=session)
        .select_related("inbound")
        .order_by("id")
    )
    return [_shown(turn) for turn in rows]


def _shown(turn: SimulatedTurn) -> dict[str, Any]:
    report: dict[str, Any] = turn.report or {}
    failed = ""
    if turn.error == TURN_LOST:
        failed = _("No answer: the turn was lost. Send the message again.")
    elif turn.error:
        failed = _("The turn failed (%(error)s); see the worker log.") % {"error": turn.error}
    return {
        "id": turn.pk,
        "text": turn.inbound.content,
        "pending": turn.finished_at is None,
        "failed": failed,
        "has_report": bool(report),
        "replies": report.get("replies", []),
        "options": report.get("options", []),
        "agents": report.get("agents", []),
        "code": report.get("code"),
        "state": state_label(str(report.get("state", ""))),
        "handoff_reason": handoff_label(str(report.get("handoff_reason") or "")),
        "packages": report.get("packages", []),
        "tokens": report.get("tokens", {}),
        "cost_usd": report.get("cost_usd"),
        "latency_ms": turn.latency_ms,
        "drafts": ", ".join(f"{agent} #{pk}" for agent, pk in turn.prompt_overrides.items()),
    }


def simulator_turn_state(request: HttpRequest, *, turn_id: int) -> JsonResponse:
    """The page's poll: whether the staff member's own turn ended (another's is a 404)."""
    if not can_simulate(request.user):
        raise PermissionDenied
    user_id = int(request.user.pk or 0)
    simulated_turns_expire(user_id=user_id, now=timezone.now())
    found = list(
        SimulatedTurn.objects.filter(pk=turn_id, user_id=user_id).values_list(
            "finished_at", flat=True
        )
    )
    if not found:
        raise Http404
    return JsonResponse({"done": found[0] is not None})


def simulator_urls(model_admin: admin.ModelAdmin[Session]) -> list[URLPattern]:
    """The simulator's URL, for `SessionAdmin.get_urls` (before the admin's `<object_id>/`)."""

    def view(request: HttpRequest) -> HttpResponse:
        return session_simulator(request, model_admin=model_admin)

    def turn_view(request: HttpRequest, turn_id: int) -> HttpResponse:
        return simulator_turn_state(request, turn_id=turn_id)

    site = model_admin.admin_site
    return [
        path("simulator/", site.admin_view(view), name=SIMULATOR_URL_NAME),
        path(
            "simulator/turn/<int:turn_id>/",
            site.admin_view(turn_view),
            name=SIMULATOR_TURN_URL_NAME,
        ),
    ]
