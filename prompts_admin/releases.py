"""Releases (docs/decisions/0060): one version of each agent's prompt and of each knowledge
package, published together.

- `release_live_versions` is what is live now (the add form's prefill): each agent's active
  override at its latest version, or the built-in prompt; every active package at its latest
  version. Two queries.
- `release_changes` is what publishing would change against what is live, per agent and per
  package, with the texts before and after (the approval page's diff).
- `release_propose` → `release_approve` (another user, with `prompts_admin.approve_release`) →
  `release_publish` when `PROMPT_APPROVAL_REQUIRED`; without it a draft is published directly.
  Publishing weighs each changed prompt through the activation gate (`prompts_admin.activation`):
  a prompt without a passing replay or test suite needs a reason, which the history records
  (for an approved release, the approver's).
- `release_publish` activates all of it in one transaction: each agent's override version
  becomes its active override (its gradual release stopped), or the agent goes back to the
  built-in prompt; each package gets its version's title, description, content and health flag,
  active. A package the release does not name is left as it is. The release published before
  becomes "replaced".
- `release_rollback` publishes again the release published before the current one: one action,
  no approval (that release was approved, or needed none, when it was first published), from
  the current release the page showed (a second click goes nowhere).

Every override and package a publication changes gets a history row whose change reason names
the release, in the site's language.
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.contrib.auth.models import User as StaffUser
from django.db import transaction
from django.db.models import Field, Q
from django.utils import timezone, translation
from django.utils.text import capfirst
from django.utils.translation import gettext, gettext_noop

from agents.labels import AGENT_LABELS
from agents.sources import BUILTIN_PROMPT_VERSION
from agents.states import PROMPT_AGENTS, AgentName
from knowledge_base.models import KBPackage
from prompts_admin.activation import (
    ActivationCheck,
    activation_change_reason,
    activation_check,
    cases_problem,
    latest_cases,
    latest_replay,
)
from prompts_admin.models import PromptOverride, Release, ReleaseStatus
from versioning.history import historical_model, latest_version

APPROVE_PERMISSION = "prompts_admin.approve_release"
# The package fields a release restores (its version's), besides making it active.
PACKAGE_FIELDS = ("title", "description", "content", "health_sensitive")

User = StaffUser | AnonymousUser


class ReleaseRefused(Exception):
    """Why a release cannot be proposed, approved, published or rolled back (pt-BR)."""


@dataclass(frozen=True, slots=True)
class ReleaseVersions:
    # {agent value: override history id, or None for the built-in prompt}
    prompts: dict[str, int | None]
    # {package id: package history id}
    packages: dict[str, int]


@dataclass(frozen=True, slots=True)
class PromptChange:
    agent: str
    label: str
    before: str  # the live text ("" for the built-in prompt)
    after: str
    before_version: int | None
    after_version: int | None
    # The activation gate's view of the text published (None: the built-in prompt).
    check: ActivationCheck | None


@dataclass(frozen=True, slots=True)
class PackageChange:
    package_id: str
    before: str  # the live content ("" for a package not live)
    after: str
    before_version: int | None
    after_version: int
    # (label, before, after) of each other field publishing changes: title, description, the
    # health flag.
    fields: tuple[tuple[str, str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class RolloutStop:
    """A gradual release that publishing stops (every publication stops them all)."""

    agent: str
    label: str
    override_id: int
    percent: int


@dataclass(frozen=True, slots=True)
class ReleaseChanges:
    prompts: tuple[PromptChange, ...]
    packages: tuple[PackageChange, ...]
    # Versions the release names that can no longer be read (a message each).
    missing: tuple[str, ...]
    rollouts_stopped: tuple[RolloutStop, ...] = ()

    @property
    def needs_confirmation(self) -> bool:
        return any(c.check is not None and c.check.needs_confirmation for c in self.prompts)

    def gate_messages(self) -> list[str]:
        """ "Triagem: nenhum teste deste texto em conversas gravadas", one per changed prompt
        the activation gate would not let through."""
        return [
            f"{change.label}: {gate_problems(change.check)}"
            for change in self.prompts
            if change.check is not None and change.check.needs_confirmation
        ]


def gate_problems(check: ActivationCheck) -> str:
    """What the activation gate finds wrong with a text, in a few words."""
    problems = []
    if check.evidence is None:
        problems.append(gettext("no replay of this text"))
    elif check.exceeded:
        problems.append(
            gettext("replay #%(run)s over the limit (%(exceeded)s)")
            % {"run": check.evidence.run_id, "exceeded": "; ".join(map(str, check.exceeded))}
        )
    if check.cases_failing and check.cases is not None:
        problem = cases_problem(check.cases)
        problems.append(gettext("test cases: %(problem)s") % {"problem": problem})
    return "; ".join(problems)


def agent_label(agent: AgentName) -> str:
    """ "Triagem", "Qualificação", "Coleta": the label table's, translated."""
    return capfirst(gettext(AGENT_LABELS[agent]))


def release_prompt_versions(release: Release) -> dict[str, str]:
    """The `Session.prompt_versions` a conversation of `release` pins: "override:<history id>"
    per agent, "builtin" for the built-in prompt (and for an agent the release does not name)."""
    return {
        agent.value: (
            f"override:{release.prompts[agent.value]}"
            if release.prompts.get(agent.value) is not None
            else BUILTIN_PROMPT_VERSION
        )
        for agent in PROMPT_AGENTS
    }


def release_live_versions() -> ReleaseVersions:
    """Each agent's active override at its latest version (None: the built-in prompt), and
    every active package at its latest version."""
    active = dict(
        PromptOverride.objects.filter(is_active=True)
        .annotate(version=latest_version(PromptOverride))
        .values_list("agent", "version")
    )
    packages = dict(
        KBPackage.objects.filter(is_active=True)
        .annotate(version=latest_version(KBPackage))
        .values_list("package_id", "version")
    )
    return ReleaseVersions(
        prompts={agent.value: active.get(agent.value) for agent in PROMPT_AGENTS},
        packages={pid: version for pid, version in packages.items() if version is not None},
    )


def release_changes(release: Release) -> ReleaseChanges:
    """What publishing `release` changes against what is live, with the gate's view of each
    changed prompt."""
    live = release_live_versions()
    prompt_ids = {int(h) for h in release.prompts.values() if h is not None}
    prompt_ids |= {h for h in live.prompts.values() if h is not None}
    texts = dict(
        historical_model(PromptOverride)
        .objects.filter(history_id__in=prompt_ids)
        .values_list("history_id", "content")
    )
    package_ids = {int(h) for h in release.packages.values()} | set(live.packages.values())
    package_rows = {
        row["history_id"]: row
        for row in historical_model(KBPackage)
        .objects.filter(history_id__in=package_ids)
        .values("history_id", *PACKAGE_FIELDS)
    }
    missing: list[str] = []
    prompts: list[PromptChange] = []
    for agent in PROMPT_AGENTS:
        label = agent_label(agent)
        after_version = release.prompts.get(agent.value)
        after_version = int(after_version) if after_version is not None else None
        before_version = live.prompts.get(agent.value)
        if after_version is not None and after_version not in texts:
            missing.append(
                gettext("%(agent)s: the prompt version %(version)s no longer exists")
                % {"agent": label, "version": after_version}
            )
            continue
        before = texts.get(before_version, "") if before_version is not None else ""
        after = texts[after_version] if after_version is not None else ""
        if before_version == after_version or (
            after_version is not None and before_version is not None and before == after
        ):
            continue
        check = (
            activation_check(
                latest_replay(agent=agent.value, content=after),
                latest_cases(agent=agent.value, content=after),
            )
            if after_version is not None
            else None
        )
        prompts.append(
            PromptChange(agent.value, label, before, after, before_version, after_version, check)
        )
    packages: list[PackageChange] = []
    for package_id, version in sorted(release.packages.items()):
        after_version = int(version)
        if after_version not in package_rows:
            missing.append(
                gettext("%(package)s: the package version %(version)s no longer exists")
                % {"package": package_id, "version": after_version}
            )
            continue
        before_version = live.packages.get(package_id)
        before = package_rows.get(before_version, {}) if before_version is not None else {}
        after = package_rows[after_version]
        if before_version != after_version:
            packages.append(
                PackageChange(
                    package_id,
                    before.get("content", ""),
                    after["content"],
                    before_version,
                    after_version,
                    package_field_changes(before, after),
                )
            )
    rollouts = (
        PromptOverride.objects.filter(
            rollout_percent__isnull=False, agent__in=[agent.value for agent in PROMPT_AGENTS]
        )
        .order_by("agent", "pk")
        .values_list("agent", "pk", "rollout_percent")
    )
    stops = tuple(
        RolloutStop(agent, agent_label(AgentName(agent)), pk, percent)
        for agent, pk, percent in rollouts
        if percent is not None  # the query's filter, for the type checker
    )
    return ReleaseChanges(tuple(prompts), tuple(packages), tuple(missing), stops)


def package_field_changes(
    before: Mapping[str, Any], after: Mapping[str, Any]
) -> tuple[tuple[str, str, str], ...]:
    """(label, before, after) of each package field besides the content that differs ("" before,
    for a package not live)."""

    def shown(value: Any) -> str:
        if isinstance(value, bool):
            return gettext("Yes") if value else gettext("No")
        return "" if value is None else str(value)

    changed = []
    for name in PACKAGE_FIELDS:
        field = KBPackage._meta.get_field(name)
        if name == "content" or before.get(name) == after[name] or not isinstance(field, Field):
            continue
        changed.append(
            (capfirst(str(field.verbose_name)), shown(before.get(name)), shown(after[name]))
        )
    return tuple(changed)


def release_propose(release: Release, *, user: User) -> None:
    """A draft waits for another editor's approval."""
    if release.status != ReleaseStatus.DRAFT:
        raise ReleaseRefused(gettext("Only a draft release can be sent for approval."))
    release.status = ReleaseStatus.PROPOSED
    release.created_by = release.created_by or _user(user)
    release._change_reason = _reason(gettext_noop("Sent for approval"), "")
    _save_step(release, was=ReleaseStatus.DRAFT)


def release_approve(release: Release, *, user: User, reason: str = "") -> None:
    """Another user with the approval permission approves a proposed release, having seen what
    it changes; a changed prompt the activation gate would not let through needs `reason`."""
    if release.status != ReleaseStatus.PROPOSED:
        raise ReleaseRefused(gettext("Only a release awaiting approval can be approved."))
    if not user.has_perm(APPROVE_PERMISSION):
        raise ReleaseRefused(gettext("You may not approve releases."))
    if release_authored_by(release, user):
        raise ReleaseRefused(
            gettext(
                "You prepared or proposed this release: another editor with approval rights "
                "approves it."
            )
        )
    changes = _publishable_changes(release, reason)
    release.status = ReleaseStatus.APPROVED
    release.approved_by = _user(user)
    release.approved_at = timezone.now()
    release.approval_reason = reason.strip()
    release._change_reason = _reason(gettext_noop("Approved"), _gate_reasons(changes, reason))
    _save_step(release, was=ReleaseStatus.PROPOSED)


def release_authored_by(release: Release, user: User) -> bool:
    """Whether `user` prepared or proposed `release`: whoever created it, saved a version of
    it or sent it for approval approves nothing of it."""
    if release.created_by_id is not None and release.created_by_id == user.pk:
        return True
    return bool(
        user.pk is not None
        and Release.history.filter(id=release.pk, history_user_id=user.pk)
        .filter(status__in=[ReleaseStatus.DRAFT, ReleaseStatus.PROPOSED])
        .exists()
    )


def release_publish(release: Release, *, user: User, reason: str = "") -> ReleaseChanges:
    """Publishes `release` in one transaction (see the module docstring); what it changed.
    `reason` is the editor's for a draft; an approved release publishes with its approver's."""
    if release.status in (ReleaseStatus.PUBLISHED, ReleaseStatus.SUPERSEDED):
        raise ReleaseRefused(gettext("This release was already published."))
    approved = release.status == ReleaseStatus.APPROVED
    if not approved and (
        settings.PROMPT_APPROVAL_REQUIRED or release.status != ReleaseStatus.DRAFT
    ):
        raise ReleaseRefused(
            gettext("Another editor with approval rights must approve this release first.")
        )
    # An approved release was weighed by its approver, whose reason the history records; a
    # draft is weighed now.
    if approved:
        reason = release.approval_reason
        changes = release_changes(release)
    else:
        changes = _publishable_changes(release, reason)
    if changes.missing:
        raise ReleaseRefused(" ".join(changes.missing))
    why = _reason(
        gettext_noop("Published with release #%(id)s “%(name)s”"),
        _gate_reasons(changes, reason),
        id=release.pk,
        name=release.name,
    )
    _apply(release, user=user, why=why)
    return changes


def release_rollback(*, user: User, current_id: int | None, reason: str = "") -> Release:
    """Publishes again the release published before the current one, `current_id` (the one the
    page that asks showed); that release."""
    current = Release.objects.filter(status=ReleaseStatus.PUBLISHED).first()
    if current is None:
        raise ReleaseRefused(gettext("No release is published: there is nothing to roll back."))
    if current.pk != current_id:
        # A second click, or another editor's rollback meanwhile: going back again would
        # publish again the release just left.
        raise ReleaseRefused(gettext("This release changed meanwhile: reload its page."))
    previous = (
        Release.objects.filter(status=ReleaseStatus.SUPERSEDED, published_at__isnull=False)
        .exclude(pk=current.pk)
        .order_by("-published_at", "-pk")
        .first()
    )
    if previous is None:
        raise ReleaseRefused(gettext("No release was published before this one."))
    missing = release_changes(previous).missing
    if missing:
        raise ReleaseRefused(" ".join(missing))
    why = _reason(
        gettext_noop("Rolled back to release #%(id)s “%(name)s”"),
        reason.strip(),
        id=previous.pk,
        name=previous.name,
    )
    _apply(previous, user=user, why=why)
    return previous


def _publishable_changes(release: Release, reason: str) -> ReleaseChanges:
    changes = release_changes(release)
    if changes.missing:
        raise ReleaseRefused(" ".join(changes.missing))
    if changes.needs_confirmation and not reason.strip():
        raise ReleaseRefused(
            ". ".join(changes.gate_messages())
            + ". "
            + gettext("Write the reason to go ahead anyway; the history records it.")
        )
    return changes


def _gate_reasons(changes: ReleaseChanges, reason: str) -> str:
    """The gate's finding for each changed prompt that needed a confirmation, with the
    editor's reason (the editor's reason alone when none needed one)."""
    with translation.override(settings.LANGUAGE_CODE):
        found = [
            f"{agent_label(AgentName(change.agent))}: "
            f"{activation_change_reason(change.check, reason.strip())}"
            for change in changes.prompts
            if change.check is not None and change.check.needs_confirmation
        ]
    return "; ".join(found) if found else reason.strip()


def _reason(msgid: str, reason: str, **params: Any) -> str:
    """The history's change reason, in the site's language: `msgid` with `params`, then
    `reason`."""
    with translation.override(settings.LANGUAGE_CODE):
        text = gettext(msgid) % params if params else gettext(msgid)
    return f"{text}: {reason}" if reason else text


def _user(user: User) -> Any:
    return user if user.is_authenticated else None


def _unchanged(locked: Release | None, release: Release, status: str) -> Release:
    """`locked`, the row of `release` read under its lock, when it still reads `status` with
    `release`'s versions. Refuses a step whose release another request moved, changed or
    deleted between the checks and the lock (a second click, a save of the draft in another
    tab): what was weighed is not what would be written, and writing `release` back would
    undo that."""
    if locked is None or (locked.status, locked.prompts, locked.packages) != (
        status,
        release.prompts,
        release.packages,
    ):
        raise ReleaseRefused(gettext("This release changed meanwhile: reload its page."))
    return locked


def _save_step(release: Release, *, was: ReleaseStatus) -> None:
    """Saves `release`'s next step if its row still reads `was`, with its versions."""
    with transaction.atomic():
        locked = Release.objects.select_for_update().filter(pk=release.pk).first()
        _unchanged(locked, release, was)
        release.save()


def _apply(release: Release, *, user: User, why: str) -> None:
    with transaction.atomic():
        # One publication at a time: a second one waits here for the first to commit, then
        # reads the overrides and the published release it left (locking only its own rows, it
        # would miss them and break the one-active and one-published constraints).
        rows = {row.pk: row for row in Release.objects.select_for_update().order_by("pk")}
        locked = _unchanged(rows.get(release.pk), release, release.status)
        if _published_since_approval(locked, rows.values()):
            raise ReleaseRefused(
                gettext(
                    "Another release was published after this one was approved: what it "
                    "changes is no longer what was approved. Prepare a new release."
                )
            )
        for agent in PROMPT_AGENTS:
            version = locked.prompts.get(agent.value)
            _prompt_publish(agent, int(version) if version is not None else None, why)
        for package_id, version in locked.packages.items():
            _package_publish(package_id, int(version), why)
        for previous in rows.values():
            if previous.status != ReleaseStatus.PUBLISHED:
                continue
            previous.status = ReleaseStatus.SUPERSEDED
            previous._change_reason = why
            previous.save()
        locked.status = ReleaseStatus.PUBLISHED
        locked.published_by = _user(user)
        locked.published_at = timezone.now()
        locked._change_reason = why
        locked.save()
    release.refresh_from_db()


def _published_since_approval(release: Release, releases: Iterable[Release]) -> bool:
    """Whether another release went live (published or rolled back to) after `release` was
    approved: the approver weighed its changes against what was live then, and publishing it
    now would change what they never saw as a change, unweighed."""
    approved_at = release.approved_at
    if release.status != ReleaseStatus.APPROVED or approved_at is None:
        return False
    return any(
        other.pk != release.pk
        and other.published_at is not None
        and other.published_at > approved_at
        for other in releases
    )


def release_approval_outdated(release: Release) -> bool:
    """Whether `release` is approved but another release went live since (its page says so and
    offers no Publish): one query for an approved release, none otherwise."""
    if release.status != ReleaseStatus.APPROVED or release.approved_at is None:
        return False
    return _published_since_approval(
        release, Release.objects.filter(published_at__gt=release.approved_at)
    )


def _prompt_publish(agent: AgentName, version: int | None, why: str) -> None:
    """`agent`'s override at history `version` becomes its active override (None: no override
    is active, the built-in prompt serves); no other override of the agent stays active or
    released gradually."""
    row = (
        historical_model(PromptOverride).objects.filter(history_id=version).first()
        if version is not None
        else None
    )
    others = PromptOverride.objects.select_for_update().filter(
        Q(is_active=True) | Q(rollout_percent__isnull=False), agent=agent.value
    )
    if row is not None:
        others = others.exclude(pk=row.id)
    for other in others:
        other.is_active = False
        other.rollout_percent = None
        other.rollout_paused_at = None
        other.rollout_pause_reason = ""
        other._change_reason = why
        other.save()
    if row is None:
        return
    override = PromptOverride.objects.select_for_update().filter(pk=row.id).first()
    if override is None:  # deleted since: the version brings it back
        override = row.instance
    changed = _assign(
        override,
        content=row.content,
        agent=agent.value,
        is_active=True,
        rollout_percent=None,
        rollout_paused_at=None,
        rollout_pause_reason="",
    )
    if changed or override._state.adding:
        override._change_reason = why
        override.save()


def _package_publish(package_id: str, version: int, why: str) -> None:
    row = historical_model(KBPackage).objects.get(history_id=version)
    # By its id, the release's key: a package deleted and created again keeps its id.
    package: Any = KBPackage.objects.select_for_update().filter(package_id=package_id).first()
    if package is None:
        package = row.instance
    values: dict[str, Any] = {field: getattr(row, field) for field in PACKAGE_FIELDS}
    changed = _assign(package, package_id=package_id, is_active=True, **values)
    if changed or package._state.adding:
        package._change_reason = why
        package.save()


def _assign(instance: Any, **values: Any) -> bool:
    """Sets `values` on `instance`; whether any differed."""
    changed = False
    for field, value in values.items():
        if getattr(instance, field) != value:
            setattr(instance, field, value)
            changed = True
    return changed


def release_versions_valid(prompts: Mapping[str, Any], packages: Mapping[str, Any]) -> list[str]:
    """What is wrong with a release's versions as a form submits them ([] when nothing): every
    agent and package known, every version a history row of that agent or package."""
    problems: list[str] = []
    agents = {agent.value for agent in PROMPT_AGENTS}
    prompt_versions = {int(h) for h in prompts.values() if h is not None}
    found = dict(
        historical_model(PromptOverride)
        .objects.filter(history_id__in=prompt_versions)
        .values_list("history_id", "agent")
    )
    for agent, version in prompts.items():
        if agent not in agents:
            problems.append(gettext("Unknown agent: %(agent)s") % {"agent": agent})
        elif version is not None and found.get(int(version)) != agent:
            problems.append(
                gettext("%(agent)s: %(version)s is not a version of this agent's prompts")
                % {"agent": agent_label(AgentName(agent)), "version": version}
            )
    package_versions = {int(h) for h in packages.values()}
    found_packages = dict(
        historical_model(KBPackage)
        .objects.filter(history_id__in=package_versions)
        .values_list("history_id", "package_id")
    )
    for package_id, version in packages.items():
        if found_packages.get(int(version)) != package_id:
            problems.append(
                gettext("%(package)s: %(version)s is not a version of this package")
                % {"package": package_id, "version": version}
            )
    return problems
