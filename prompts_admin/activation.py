"""The activation gate (docs/architecture.md, The activation gate): activating a prompt override
shows the latest replay of exactly its text, and asks for a confirmation with a reason when there is
none or when it is over a threshold.

- *Activating* is a save after which the override is active and, before it, it was not stored,
  not active, for another agent, or active with another text (by `prompt_content_hash`, so a
  browser's CRLF resubmission of the same text is no change). Saving a draft never asks.
- *Evidence* is the latest finished replay of the agent and the text's hash (`ReplaySummary`).
  The replays live in the governance app, above this one: it registers a `ReplayEvidence` when
  ready (`replay_evidence_register`), and this module never imports it.
- *Thresholds* (settings, percentages of the replay's calls): handoffs changed
  (`ACTIVATION_GATE_MAX_HANDOFF_CHANGE_PCT`), codes changed (`..._CODE_CHANGE_PCT`), contract
  errors (`..._CONTRACT_ERROR_PCT`). Exactly the limit passes; above it asks.
- The change reason recorded in the override's history says which: "Ativado com a simulação
  #12", "Ativado sem simulação: <motivo>", "Ativado acima do limite (transferências 20,0% >
  10%): <motivo>". It is written in the site's language (`LANGUAGE_CODE`), whatever the
  editor's browser asks for, so the history reads the same for everyone.

`PromptOverrideForm` (prompts_admin.admin) applies it: every admin path that saves an override
(add, change, simple-history's revert) goes through that form.
"""

from dataclasses import dataclass
from datetime import datetime
from decimal import ROUND_HALF_UP, Decimal
from typing import Protocol

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.utils import translation
from django.utils.formats import number_format
from django.utils.functional import Promise
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.translation import gettext, gettext_lazy

from prompts_admin.models import prompt_content_hash


@dataclass(frozen=True, slots=True)
class ReplaySummary:
    """A finished replay's totals, as the gate weighs and shows them."""

    run_id: int
    status: str
    calls_done: int
    code_changed: int
    handoff_changed: int
    contract_errors: int
    cost_usd: Decimal
    created_at: datetime
    # The run's admin page ("" when its admin is not installed).
    admin_url: str


class ReplayEvidence(Protocol):
    """What the gate reads of the replays: provided by the governance app."""

    def latest_replay(self, agent: str, content_hash: str) -> ReplaySummary | None:
        """The latest finished replay of `agent` with this text, or None when there is none."""
        ...


_evidence: ReplayEvidence | None = None


def replay_evidence_register(evidence: ReplayEvidence) -> None:
    """Called once by the governance app when it is ready."""
    global _evidence
    _evidence = evidence


def replay_evidence() -> ReplayEvidence:
    if _evidence is None:
        raise ImproperlyConfigured(
            "The activation gate reads replays through the governance app, which registers its "
            "evidence when ready: is it in INSTALLED_APPS?"
        )
    return _evidence


# --- Thresholds ---------------------------------------------------------------------------------

# (what is measured, the ReplaySummary total, the setting with its limit in %)
THRESHOLDS: tuple[tuple[Promise, str, str], ...] = (
    (gettext_lazy("handoffs"), "handoff_changed", "ACTIVATION_GATE_MAX_HANDOFF_CHANGE_PCT"),
    (gettext_lazy("codes"), "code_changed", "ACTIVATION_GATE_MAX_CODE_CHANGE_PCT"),
    (
        gettext_lazy("contract errors"),
        "contract_errors",
        "ACTIVATION_GATE_MAX_CONTRACT_ERROR_PCT",
    ),
)


@dataclass(frozen=True, slots=True)
class Exceeded:
    """One threshold a replay is over: `count` of `calls` is `percent` %, above `limit` %."""

    label: Promise
    count: int
    calls: int
    percent: Decimal
    limit: Decimal

    def __str__(self) -> str:
        # "transferências 20,0% > 10%"
        return gettext("%(what)s %(percent)s%% > %(limit)s%%") % {
            "what": self.label,
            "percent": number_format(self.percent, 1),
            "limit": number_format(self.limit),
        }


def exceeded_thresholds(summary: ReplaySummary) -> list[Exceeded]:
    """The thresholds `summary` is over, in `THRESHOLDS` order. Compared exactly (decimal
    arithmetic, no rounding): 10 of 100 is at a 10% limit and passes, 101 of 1,000 is over."""
    over = []
    for label, total, setting in THRESHOLDS:
        count: int = getattr(summary, total)
        limit = Decimal(str(getattr(settings, setting)))
        if summary.calls_done > 0 and Decimal(count) * 100 > limit * summary.calls_done:
            percent = (Decimal(count) * 100 / summary.calls_done).quantize(
                Decimal("0.1"), rounding=ROUND_HALF_UP
            )
            # 10.0 → "10", 12.5 → "12,5" when shown.
            shown_limit = limit.quantize(Decimal(1)) if limit == limit.to_integral() else limit
            over.append(Exceeded(label, count, summary.calls_done, percent, shown_limit))
    return over


# --- What a save does -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StoredOverride:
    """The override as it is in the database before the save."""

    agent: str
    content: str
    is_active: bool


def is_activation(*, stored: StoredOverride | None, agent: str, content: str, active: bool) -> bool:
    """Whether a save leaving the override `active` with `agent` and `content` puts a text in
    front of customers that was not there: new or inactive before, moved to another agent, or
    its text changed (by hash) while active."""
    if not active:
        return False
    if stored is None or not stored.is_active or stored.agent != agent:
        return True
    return prompt_content_hash(stored.content) != prompt_content_hash(content)


@dataclass(frozen=True, slots=True)
class ActivationCheck:
    """The gate's view of one activation: the evidence, and what it is over."""

    evidence: ReplaySummary | None
    exceeded: tuple[Exceeded, ...]

    @property
    def needs_confirmation(self) -> bool:
        return self.evidence is None or bool(self.exceeded)


def latest_replay(*, agent: str, content: str) -> ReplaySummary | None:
    """The latest finished replay of `agent` with exactly `content` (by hash)."""
    return replay_evidence().latest_replay(agent, prompt_content_hash(content))


def activation_check(evidence: ReplaySummary | None) -> ActivationCheck:
    """The gate's view of an activation with `evidence`: the thresholds it is over."""
    exceeded = () if evidence is None else tuple(exceeded_thresholds(evidence))
    return ActivationCheck(evidence=evidence, exceeded=exceeded)


# --- Wording --------------------------------------------------------------------------------------


def evidence_text(evidence: ReplaySummary | None) -> str:
    """ "Última simulação deste texto (#12): 40 chamadas, …", or that there is none."""
    if evidence is None:
        return gettext("No replay of this text.")
    return gettext(
        "Latest replay of this text (#%(run)s): %(calls)s calls, %(codes)s codes changed, "
        "%(handoffs)s handoffs changed, %(errors)s contract errors, cost US$ %(cost)s."
    ) % {
        "run": evidence.run_id,
        "calls": evidence.calls_done,
        "codes": evidence.code_changed,
        "handoffs": evidence.handoff_changed,
        "errors": evidence.contract_errors,
        "cost": number_format(evidence.cost_usd, 4),
    }


def evidence_html(evidence: ReplaySummary | None) -> SafeString:
    """`evidence_text` with a link to the run's page, when it has one."""
    if evidence is None or not evidence.admin_url:
        return format_html("{}", evidence_text(evidence))
    return format_html(
        '{} <a href="{}">{}</a>',
        evidence_text(evidence),
        evidence.admin_url,
        gettext("See the replay"),
    )


def gate_message(check: ActivationCheck) -> str:
    """Why the save was refused, and what to do: shown once, above the revealed fields."""
    if check.evidence is None:
        return gettext(
            "There is no replay of this text: activating it puts a prompt nobody has tested in "
            "front of customers. Replay it first, or tick “Activate anyway”, write the reason "
            "and save again."
        )
    return gettext(
        "The latest replay of this text (#%(run)s) is over the limit: %(exceeded)s. Tick "
        "“Activate anyway”, write the reason and save again."
    ) % {"run": check.evidence.run_id, "exceeded": "; ".join(str(e) for e in check.exceeded)}


def activation_change_reason(check: ActivationCheck, reason: str) -> str:
    """The history's change reason for an activation, in the site's language: what the gate
    found, then the editor's `reason` (required unless the replay was within the thresholds)."""
    with translation.override(settings.LANGUAGE_CODE):
        if check.evidence is None:
            return gettext("Activated without a replay: %(reason)s") % {"reason": reason}
        if check.exceeded:
            return gettext("Activated over the limit (%(exceeded)s): %(reason)s") % {
                "exceeded": "; ".join(str(e) for e in check.exceeded),
                "reason": reason,
            }
        if reason:
            return gettext("Activated with replay #%(run)s: %(reason)s") % {
                "run": check.evidence.run_id,
                "reason": reason,
            }
        return gettext("Activated with replay #%(run)s") % {"run": check.evidence.run_id}
