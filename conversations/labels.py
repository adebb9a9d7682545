"""What staff read, rendered when shown: labels, handoff explanations, summary errors, and the
SYSTEM events' sentences.

Rows store codes and parameters (a state, a handoff reason and its machine detail, an
`conversations.event_codes.EventCode` with its ``json_part``); this module turns them into pt-BR
sentences through gettext when a page is rendered, from the one label table
(`agents.labels`). A SYSTEM row written before its event carried its parameters keeps the pt-BR
text it stored in ``content``: that text is shown as it is.
"""

from collections.abc import Callable, Mapping
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.utils import timezone
from django.utils.formats import date_format, number_format
from django.utils.text import capfirst
from django.utils.translation import gettext, gettext_lazy

from agents.labels import AGENT_LABELS, STATE_LABELS, handoff_label_msgid
from agents.states import PROMPT_AGENTS, AgentName, HandoffMotive, HandoffReason, SessionState
from conversations.event_codes import (
    ACTION_SATISFACTION_SURVEY,
    ACTION_UNSUPPORTED_MEDIA,
    CLOSED_IDLE,
    EventCode,
)
from conversations.models import DeliveryStatus, Message
from prompts_admin.labels import prompt_version_label
from whatsapp.client import is_simulated_wamid

# Why a session went to a human, explained for staff; the stored detail is for engineers (an
# English parser error, an HTTP status) and stays in the message log.
_HANDOFF_EXPLANATIONS: Mapping[HandoffReason, Any] = {
    HandoffReason.LLM_INVALID_JSON: gettext_lazy(
        "The model's answer could not be read, even after an attempt to repair it."
    ),
    HandoffReason.LLM_INVALID_CONTRACT: gettext_lazy(
        "The model's answer broke the attendance rules (a code or a field not allowed)."
    ),
    HandoffReason.LLM_TIMEOUT: gettext_lazy("The model did not answer in time."),
    HandoffReason.LLM_RATE_LIMITED: gettext_lazy(
        "The model provider refused the call: usage limit or quota reached."
    ),
    HandoffReason.LLM_PROVIDER_ERROR: gettext_lazy(
        "The model provider answered with an error, or the turn failed repeatedly."
    ),
    HandoffReason.UNKNOWN_PACKAGE: gettext_lazy(
        "The model asked for a knowledge package that does not exist or is inactive."
    ),
    HandoffReason.ENRICHMENT_LIMIT: gettext_lazy(
        "The model asked for more knowledge packages than a turn allows."
    ),
    HandoffReason.ROUTING_LOOP: gettext_lazy(
        "The agents passed the conversation to each other more times than a turn allows."
    ),
}
# The summary's error starts with the model call's outcome (`LLMError.outcome`) or says the
# answer was not a summary (`agents.summary`).
_SUMMARY_ERRORS: Mapping[str, Any] = {
    "timeout": gettext_lazy("The model did not answer in time."),
    "rate_limited": gettext_lazy("The model provider refused the call: usage limit reached."),
    "quota_exceeded": gettext_lazy("The model provider refused the call: quota exhausted."),
    "provider_error": gettext_lazy("The model provider answered with an error."),
    "invalid summary": gettext_lazy("The model's answer was not a valid summary."),
}
_IDENTITY_CHANGES: Mapping[str, Any] = {
    "user_changed_number": gettext_lazy("The customer changed their WhatsApp number"),
    "user_changed_user_id": gettext_lazy("The customer's WhatsApp user id changed"),
}


def moment_text(at: datetime) -> str:
    """A moment as staff read it, in the business's time zone: ``01/12/2026 14:32``."""
    return date_format(timezone.localtime(at), "SHORT_DATETIME_FORMAT")


def usd_text(value: Decimal | float, places: int = 6) -> str:
    """A cost in US dollars as staff read it: ``US$ 0,000153`` (the active language's decimal
    separator, `places` digits, rounded)."""
    return "US$ " + number_format(round(Decimal(value), places), places)


def state_label(value: str) -> str:
    """A session state's label ("Qualificação"); an unknown value as is."""
    if value in SessionState._value2member_map_:
        return gettext(STATE_LABELS[SessionState(value)])
    return value


def agent_label(value: str) -> str:
    if value in AgentName._value2member_map_:
        return gettext(AGENT_LABELS[AgentName(value)])
    return value


def prompt_versions_lines(
    versions: Mapping[str, Any], override_ids: Mapping[int, int]
) -> list[tuple[str, str]]:
    """(agent label, version label) of each prompt agent, in the agents' order."""
    return [
        (
            capfirst(agent_label(agent.value)),
            prompt_version_label(str(versions.get(agent.value, "")), override_ids),
        )
        for agent in PROMPT_AGENTS
    ]


def release_label(release_id: int, name: str) -> str:
    """The release a conversation pinned, for staff: "Publicação #3 — Março"."""
    return gettext("Release #%(id)s — %(name)s") % {"id": release_id, "name": name}


def handoff_label(reason: str, detail: str = "") -> str:
    """Why the session went to a human, in a few words; a model handoff by its motive ("cliente
    pediu um atendente", not "pedido pelo modelo")."""
    return gettext(handoff_label_msgid(reason, detail)) if reason else ""


def handoff_explanation(reason: str, detail: str = "") -> str:
    """One pt-BR sentence on the handoff's detail, for staff: the machine detail of a failure
    mapped by its reason; a strategic company's name; nothing more for the others."""
    if reason == HandoffReason.STRATEGIC_COMPANY and detail:
        return gettext("Company on the strategic list: %(company)s.") % {"company": detail}
    if reason == HandoffReason.MODEL_REQUESTED and detail:
        if detail in HandoffMotive._value2member_map_:
            return ""  # the label says it
        return gettext("The model's motive: %(motive)s.") % {"motive": detail}
    explanation = _HANDOFF_EXPLANATIONS.get(HandoffReason(reason)) if _known(reason) else None
    return str(explanation) if explanation is not None else ""


def _known(reason: str) -> bool:
    return reason in HandoffReason._value2member_map_


def summary_error_text(error: str) -> str:
    """The summary's stored error (``provider_error: HTTP 500``) as a pt-BR sentence."""
    if not error:
        return ""
    prefix = error.split(":", 1)[0].strip()
    text = _SUMMARY_ERRORS.get(prefix)
    return str(text) if text is not None else error


def summary_closing_reason_text(closing_reason: str) -> str:
    """A summary's closing reason; the minimal summary's (`agents.summary.SummaryFacts.fallback`:
    the handoff reason's code, then its machine detail after " — ") as the handoff's label and
    explanation."""
    reason, _sep, detail = closing_reason.partition(" — ")
    if not _known(reason):
        return closing_reason
    explanation = handoff_explanation(reason, detail)
    label = capfirst(handoff_label(reason, detail))
    return f"{label}. {explanation}" if explanation else label


def message_origin(code: int | None, action: str) -> str:
    """What a bubble's meta says about where an OUTBOUND text came from: the model's code
    ("código 1"), a handoff's fixed text, the unsupported-media answer; else the stored action."""
    if code is not None:
        return gettext("code %(code)s") % {"code": code}
    if _known(action):
        return gettext("fixed handoff text")
    if action == ACTION_UNSUPPORTED_MEDIA:
        return gettext("unsupported media answer")
    if action == ACTION_SATISFACTION_SURVEY:
        return gettext("satisfaction question")
    return action


# --- SYSTEM events ---------------------------------------------------------------------------


def _params(message: Message) -> dict[str, Any]:
    return message.json_part if isinstance(message.json_part, dict) else {}


def _state_changed(message: Message) -> str:
    to = str(_params(message).get("to", ""))
    if message.code is None:
        return gettext("Moved to %(state)s.") % {"state": state_label(to)}
    return gettext("Moved to %(state)s (code %(code)s).") % {
        "state": state_label(to),
        "code": message.code,
    }


def _context_loaded(message: Message) -> str:
    packages = _params(message).get("packages") or []
    return gettext("Knowledge base: packages loaded: %(packages)s.") % {
        "packages": ", ".join(str(p) for p in packages)
    }


def _data_rejected(message: Message) -> str:
    listed = "; ".join(
        f"{path} ({value.get('error', '') if isinstance(value, dict) else value})"
        for path, value in _params(message).items()
    )
    return gettext("Values refused (not stored): %(fields)s.") % {"fields": listed}


def _lead_created(message: Message) -> str:
    return gettext("Request confirmed by the customer and registered for the team.")


def _confirmation_changed(message: Message) -> str:
    changed = _params(message).get("changed") or []
    return gettext(
        "Confirmation (code 5) with registration data different from what the customer was "
        "shown (%(fields)s): nothing registered; a new confirmation was asked for."
    ) % {"fields": ", ".join(str(c) for c in changed)}


def _session_closed(message: Message) -> str:
    if message.action == CLOSED_IDLE:
        hours = _params(message).get("idle_hours", "?")
        return gettext(
            "Conversation closed for inactivity: the customer came back after %(hours)s h."
        ) % {"hours": hours}
    if message.code is not None:
        return gettext("Conversation closed by the assistant (code %(code)s).") % {
            "code": message.code
        }
    return gettext("Conversation closed.")


def _handoff(message: Message) -> str:
    params = _params(message)
    reason = str(params.get("reason") or message.action)
    if reason == HandoffReason.STAFF_TAKEOVER:
        if message.staff_user_id is not None:
            return gettext("Taken over by %(user)s.") % {
                "user": message.staff_user.get_username()  # type: ignore[union-attr]
            }
        return gettext("Taken over by the team in the WhatsApp Business app.")
    detail = str(params.get("detail", ""))
    text = gettext("Handed over to a person: %(reason)s.") % {
        "reason": handoff_label(reason, detail)
    }
    explanation = handoff_explanation(reason, detail)
    return f"{text} {explanation}" if explanation else text


def _identity_changed(message: Message) -> str:
    label = _IDENTITY_CHANGES.get(message.action)
    if label is None:
        return message.content
    return f"{label} ({message.content})." if message.content else f"{label}."


def _timestamp_replaced(message: Message) -> str:
    return gettext(
        "Time sent by WhatsApp (%(value)s) outside the accepted range: the reception time was used."
    ) % {"value": _params(message).get("value", "?")}


def _turn_failed(message: Message) -> str:
    return gettext(
        "Unexpected error answering the customer (%(error)s); the message will be processed again."
    ) % {"error": _params(message).get("error_type", "?")}


def _by(message: Message) -> str:
    return message.staff_user.get_username() if message.staff_user is not None else "?"


def _staff_assigned(message: Message) -> str:
    return gettext("%(who)s assigned the conversation to %(user)s.") % {
        "who": _by(message),
        "user": _params(message).get("assignee", "?"),
    }


def _staff_given_back(message: Message) -> str:
    return gettext("%(who)s gave the conversation back to the bot (%(state)s).") % {
        "who": _by(message),
        "state": state_label(str(_params(message).get("state", ""))),
    }


def _staff_closed(message: Message) -> str:
    return gettext("%(who)s closed the conversation.") % {"who": _by(message)}


def _staff_summary_requested(message: Message) -> str:
    return gettext("%(who)s requested a new summary.") % {"who": _by(message)}


def _staff_prompts_updated(message: Message) -> str:
    params = _params(message)
    before, after = params.get("from") or {}, params.get("to") or {}
    ids = {int(h): int(o) for h, o in (params.get("overrides") or {}).items()}
    changes = [
        gettext("%(agent)s: %(from)s → %(to)s")
        % {
            "agent": capfirst(agent_label(agent.value)),
            "from": prompt_version_label(str(before.get(agent.value, "")), ids),
            "to": prompt_version_label(str(after.get(agent.value, "")), ids),
        }
        for agent in PROMPT_AGENTS
        if before.get(agent.value) != after.get(agent.value)
    ]
    release, packages = params.get("release") or {}, params.get("packages") or {}
    if release.get("from") != release.get("to") or packages.get("from") != packages.get("to"):
        changes.append(gettext("knowledge packages: the versions active now"))
    return gettext("%(who)s moved the conversation to the current prompts: %(changes)s.") % {
        "who": _by(message),
        "changes": "; ".join(changes),
    }


def _staff_label_added(message: Message) -> str:
    return gettext('%(who)s added the label "%(label)s".') % {
        "who": _by(message),
        "label": _params(message).get("label", "?"),
    }


def _staff_label_removed(message: Message) -> str:
    return gettext('%(who)s removed the label "%(label)s".') % {
        "who": _by(message),
        "label": _params(message).get("label", "?"),
    }


def _personal_data_erased(message: Message) -> str:
    if message.staff_user is None:
        return gettext("The customer's personal data was erased (from the command line).")
    return gettext("%(who)s erased the customer's personal data.") % {"who": _by(message)}


def _handoff_alert(message: Message) -> str:
    params = _params(message)
    values = {
        "count": params.get("recipients", "?"),
        "status": params.get("status", "?"),
        "attempts": params.get("attempts", "?"),
        "error": params.get("error", "?"),
    }
    sent = params.get("outcome") == "sent"
    if params.get("channel") == "email":
        if sent:
            return gettext("Handoff alert e-mailed to %(count)s recipient(s).") % values
        return gettext("Handoff alert by e-mail not sent: %(error)s.") % values
    if sent:
        return (
            gettext(
                "Handoff alert delivered to the webhook (HTTP %(status)s, %(attempts)s try(ies))."
            )
            % values
        )
    return (
        gettext("Handoff alert not delivered to the webhook: %(error)s (%(attempts)s try(ies)).")
        % values
    )


_EVENT_TEXTS: Mapping[EventCode, Callable[[Message], str]] = {
    EventCode.STATE_CHANGED: _state_changed,
    EventCode.CONTEXT_LOADED: _context_loaded,
    EventCode.DATA_REJECTED: _data_rejected,
    EventCode.LEAD_CREATED: _lead_created,
    EventCode.CONFIRMATION_CHANGED: _confirmation_changed,
    EventCode.SESSION_CLOSED: _session_closed,
    EventCode.HANDOFF: _handoff,
    EventCode.IDENTITY_CHANGED: _identity_changed,
    EventCode.TIMESTAMP_REPLACED: _timestamp_replaced,
    EventCode.TURN_FAILED: _turn_failed,
    EventCode.STAFF_ASSIGNED: _staff_assigned,
    EventCode.STAFF_GIVEN_BACK: _staff_given_back,
    EventCode.STAFF_CLOSED: _staff_closed,
    EventCode.STAFF_SUMMARY_REQUESTED: _staff_summary_requested,
    EventCode.STAFF_PROMPTS_UPDATED: _staff_prompts_updated,
    EventCode.STAFF_LABEL_ADDED: _staff_label_added,
    EventCode.STAFF_LABEL_REMOVED: _staff_label_removed,
    EventCode.PERSONAL_DATA_ERASED: _personal_data_erased,
    EventCode.HANDOFF_ALERT: _handoff_alert,
}


def event_text(message: Message) -> str:
    """The pt-BR sentence of a SYSTEM row: rendered from its code and parameters; the stored
    ``content`` of a row written before the events carried them (and of an unknown code)."""
    if message.content and message.message_type != EventCode.IDENTITY_CHANGED:
        return message.content
    render = (
        _EVENT_TEXTS.get(EventCode(message.message_type))
        if message.message_type in EventCode._value2member_map_
        else None
    )
    if render is None:
        return message.content or message.message_type
    return capfirst(render(message))


DELIVERY_LABELS = dict(DeliveryStatus.choices)


def delivery_label(message: Message, *, simulated_session: bool) -> str:
    """An OUTBOUND message's delivery as staff read it. A send the dry-run sender stored (its
    ``sim.`` wamid, `conversations.sending`) never left the machine: it reads as simulated, with
    why, never as sent."""
    if is_simulated_wamid(message.wa_message_id):
        if simulated_session:
            return gettext("simulated (simulator conversation)")
        return gettext("simulated (no WhatsApp token)")
    return str(DELIVERY_LABELS.get(message.delivery_status) or gettext("not sent yet"))


# A failed delivery's reason by Meta's error code (the status webhook's ``errors[0].code``), as
# staff read it; Meta's title is English and may quote the customer's number.
DELIVERY_ERROR_REASONS: Mapping[int, Any] = {
    130429: gettext_lazy("the WhatsApp number's sending limit was reached; try again later"),
    130472: gettext_lazy("the customer's number is in a Meta experiment and gets no messages"),
    131000: gettext_lazy("WhatsApp failed to send it; try again"),
    131021: gettext_lazy("the customer's number is the sending number itself"),
    131026: gettext_lazy(
        "WhatsApp could not deliver it: the number may have no WhatsApp, or an old version"
    ),
    131031: gettext_lazy("the WhatsApp Business account is locked"),
    131042: gettext_lazy("the WhatsApp Business account has a payment problem"),
    131047: gettext_lazy(
        "more than 24 hours since the customer's last message: only a WhatsApp message "
        "template can be sent"
    ),
    131048: gettext_lazy("blocked for spam: too many messages were blocked or reported"),
    131049: gettext_lazy("Meta held it back to limit the messages this customer receives"),
    131051: gettext_lazy("WhatsApp does not support this type of message"),
    131053: gettext_lazy("the attachment could not be uploaded"),
    131056: gettext_lazy("too many messages to this customer in a short time; try again later"),
    132000: gettext_lazy("the template's parameters do not match the approved template"),
    132001: gettext_lazy("the template does not exist in this language, or is not approved"),
}


def delivery_error_text(code: int | None, title: str) -> str:
    """ "erro 131047: mais de 24 horas …" for a known code; else the code and Meta's `title`."""
    error = gettext("error")
    reason = DELIVERY_ERROR_REASONS.get(code) if code is not None else None
    if reason is not None:
        return f"{error} {code}: {reason}"
    return " ".join(part for part in (error, str(code or ""), title) if part)
