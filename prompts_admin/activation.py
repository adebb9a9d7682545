"""The activation gate (docs/architecture.md, The activation gate): activating a prompt override
shows the latest replay of exactly its text, and asks for a confirmation with a reason when there is
none or when it is over a threshold.

- *Activating* is a save after which the override is active and, before it, it was not stored,
  not active, for another agent, or active with another text (by `prompt_content_hash`, so a
  browser's CRLF resubmission of the same text is no change). Saving a draft never asks.
- *Evidence* is the latest finished replay of the agent and the text's hash (`ReplaySummary`).
  The replays live in the governance app, above this one: it registers a `ReplayEvidence` when
  ready (`replay_evidence_register`), and this module never imports it.
- *Test cases*: when the agent has active prompt test cases, the latest run of them against
  exactly this text (`CasesSummary`) must cover each case as it is now and have none
  failing; else the activation needs the same confirmation. The governance app registers the
  `CasesEvidence` too (`cases_evidence_register`). An agent without cases is not asked.
- *Thresholds* (settings, percentages of the replay's calls): handoffs changed
  (`ACTIVATION_GATE_MAX_HANDOFF_CHANGE_PCT`), codes changed (`..._CODE_CHANGE_PCT`), contract
  errors (`..._CONTRACT_ERROR_PCT`). Exactly the limit passes; above it asks.
- The change reason recorded in the override's history says which: "Ativado com a simulação
  #12", "Ativado sem simulação: <motivo>", "Ativado acima do limite (transferências 20,0% >
  10%): <motivo>"; with failing test cases, "... e com casos de teste falhando (1 de 3 falharam
  na execução #7): <motivo>". It is written in the site's language (`LANGUAGE_CODE`), whatever the
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


@dataclass(frozen=True, slots=True)
class CasesSummary:
    """The agent's active test cases against one text, as the gate weighs them."""

    # The agent's active cases now.
    active: int
    # The latest run of this text, when it covers every active case as it is now (None: none).
    run_id: int | None
    # Of the active cases, how many failed in that run, and one line for each.
    failed: int
    failures: tuple[str, ...]
    # The run's admin page ("" when none).
    admin_url: str

    @property
    def passes(self) -> bool:
        return self.active == 0 or (self.run_id is not None and self.failed == 0)


class CasesEvidence(Protocol):
    """What the gate reads of the prompt test cases: provided by the governance app."""

    def cases_of(self, agent: str, content_hash: str) -> CasesSummary:
        """The agent's active cases and the latest run of them against this text."""
        ...


_test_cases: CasesEvidence | None = None


def cases_evidence_register(evidence: CasesEvidence) -> None:
    """Called once by the governance app when it is ready."""
    global _test_cases
    _test_cases = evidence


def latest_cases(*, agent: str, content: str) -> CasesSummary:
    """The agent's active test cases and the latest run of them against exactly `content`."""
    if _test_cases is None:
        raise ImproperlyConfigured(
            "The activation gate reads test cases through the governance app, which registers "
            "its evidence when ready: is it in INSTALLED_APPS?"
        )
    return _test_cases.cases_of(agent, prompt_content_hash(content))


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
    # The share of new conversations it is released to (None: not released gradually).
    rollout_percent: int | None = None
    # When its release paused itself (None: not paused).
    rollout_paused_at: datetime | None = None


def is_activation(*, stored: StoredOverride | None, agent: str, content: str, active: bool) -> bool:
    """Whether a save leaving the override `active` with `agent` and `content` puts a text in
    front of customers that was not there: new or inactive before, moved to another agent, or
    its text changed (by hash) while active."""
    if not active:
        return False
    if stored is None or not stored.is_active or stored.agent != agent:
        return True
    return prompt_content_hash(stored.content) != prompt_content_hash(content)


def is_release(
    *, stored: StoredOverride | None, agent: str, content: str, percent: int | None
) -> bool:
    """Whether a save leaving the override released to `percent` of new conversations puts a
    text in front of customers that was not there: a release started, moved to another agent,
    or its text changed (by hash) while released. The gate weighs it as an activation."""
    if percent is None:
        return False
    if stored is None or stored.rollout_percent is None or stored.agent != agent:
        return True
    return prompt_content_hash(stored.content) != prompt_content_hash(content)


def changes_what_customers_get(
    *,
    stored: StoredOverride | None,
    agent: str,
    content: str,
    active: bool,
    percent: int | None,
) -> bool:
    """Whether a save changes what new conversations get: an activation or a gradual release
    (`is_activation`, `is_release`), the active override switched off or moved to another agent
    (its agent back on the built-in prompt), or a gradual release widened. Narrowing or ending
    a gradual release only gives more conversations the current version."""
    if is_activation(stored=stored, agent=agent, content=content, active=active):
        return True
    if is_release(stored=stored, agent=agent, content=content, percent=percent):
        return True
    if stored is None:
        return False
    if stored.is_active and (not active or stored.agent != agent):
        return True
    return (
        percent is not None
        and stored.rollout_percent is not None
        and percent > stored.rollout_percent
    )


@dataclass(frozen=True, slots=True)
class ActivationCheck:
    """The gate's view of one activation: the evidence, and what it is over."""

    evidence: ReplaySummary | None
    exceeded: tuple[Exceeded, ...]
    cases: CasesSummary | None = None

    @property
    def replay_unconfirmed(self) -> bool:
        return self.evidence is None or bool(self.exceeded)

    @property
    def cases_failing(self) -> bool:
        return self.cases is not None and not self.cases.passes

    @property
    def needs_confirmation(self) -> bool:
        return self.replay_unconfirmed or self.cases_failing


def latest_replay(*, agent: str, content: str) -> ReplaySummary | None:
    """The latest finished replay of `agent` with exactly `content` (by hash)."""
    return replay_evidence().latest_replay(agent, prompt_content_hash(content))


def activation_check(
    evidence: ReplaySummary | None, cases: CasesSummary | None = None
) -> ActivationCheck:
    """The gate's view of an activation with `evidence` and `cases`: the thresholds it is
    over, and whether the test cases pass."""
    exceeded = () if evidence is None else tuple(exceeded_thresholds(evidence))
    return ActivationCheck(evidence=evidence, exceeded=exceeded, cases=cases)


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


def cases_text(cases: CasesSummary) -> str:
    """ "Casos de teste deste agente: execução #7 deste texto, 1 de 3 falharam.", or that none
    covers them; "" for an agent without active cases."""
    if cases.active == 0:
        return ""
    if cases.run_id is None:
        return gettext(
            "Test cases of this agent: %(count)s active; no run of this text covers them."
        ) % {"count": cases.active}
    return gettext(
        "Test cases of this agent: run #%(run)s of this text, %(failed)s of %(count)s failed."
    ) % {"run": cases.run_id, "failed": cases.failed, "count": cases.active}


def cases_html(cases: CasesSummary) -> SafeString:
    """`cases_text` with a link to the run's page, when it has one."""
    if not cases.admin_url:
        return format_html("{}", cases_text(cases))
    return format_html(
        '{} <a href="{}">{}</a>', cases_text(cases), cases.admin_url, gettext("See the run")
    )


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


def cases_problem(cases: CasesSummary) -> str:
    """ "1 de 3 falharam na execução #7", or that no run of this text covers the cases."""
    if cases.run_id is None:
        return gettext("no run of this text covers the agent's active cases (%(count)s)") % {
            "count": cases.active
        }
    return gettext("%(failed)s of %(count)s failed in run #%(run)s") % {
        "failed": cases.failed,
        "count": cases.active,
        "run": cases.run_id,
    }


def gate_message(check: ActivationCheck) -> str:
    """Why the save was refused, and what to do: shown once, above the revealed fields."""
    replay = _replay_gate_message(check) if check.replay_unconfirmed else ""
    if not check.cases_failing or check.cases is None:
        return replay
    failures = " | ".join(check.cases.failures)
    values = {
        "problem": cases_problem(check.cases),
        "failures": f" ({failures})" if failures else "",
    }
    if replay:
        # The replay's sentence already says how to confirm: one confirmation answers both.
        also = gettext(
            "Also, the agent's test cases do not pass with this text: %(problem)s%(failures)s."
        )
        return f"{replay} {also % values}"
    return (
        gettext(
            "The agent's test cases do not pass with this text: %(problem)s%(failures)s. Run "
            "them against this text (“Run the test cases”), or tick “Activate anyway”, write "
            "the reason and save again."
        )
        % values
    )


def _replay_gate_message(check: ActivationCheck) -> str:
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
        if check.cases_failing and check.cases is not None:
            return _cases_change_reason(check, check.cases, reason)
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


def _cases_change_reason(check: ActivationCheck, cases: CasesSummary, reason: str) -> str:
    problem = cases_problem(cases)
    if check.evidence is None:
        return gettext(
            "Activated without a replay and with test cases failing (%(problem)s): %(reason)s"
        ) % {"problem": problem, "reason": reason}
    if check.exceeded:
        return gettext(
            "Activated over the limit (%(exceeded)s) and with test cases failing "
            "(%(problem)s): %(reason)s"
        ) % {
            "exceeded": "; ".join(str(e) for e in check.exceeded),
            "problem": problem,
            "reason": reason,
        }
    return gettext(
        "Activated with replay #%(run)s and with test cases failing (%(problem)s): %(reason)s"
    ) % {"run": check.evidence.run_id, "problem": problem, "reason": reason}
