"""Releases (docs/decisions/0060): publishing activates one version of each agent's prompt and
of each knowledge package in one transaction, rolling back is one action, and with
PROMPT_APPROVAL_REQUIRED another editor with the approval permission approves first."""

import threading
import time
from collections.abc import Callable

import pytest
from django.contrib.auth.models import User
from django.db import DatabaseError, connection, connections, transaction
from django.utils import translation
from pytest_django import Settings

from knowledge_base.models import KBPackage
from prompts_admin.models import PromptOverride, Release, ReleaseStatus
from prompts_admin.releases import (
    ReleaseRefused,
    release_approve,
    release_changes,
    release_live_versions,
    release_propose,
    release_publish,
    release_rollback,
)
from tests.helpers.replays import replayed
from tests.helpers.staff import PROMPT_APPROVERS, PROMPT_EDITORS, staff_member
from tests.helpers.versions import latest_version, triage_release
from versioning.history import historical_model

pytestmark = pytest.mark.django_db

OLD = "Triagem antiga de {{ agent_name }}."
NEW = "Triagem nova de {{ agent_name }}."
COLETA = "Coleta de {{ agent_name }}."
OLD_PACKAGE = "Potabilidade: 2 frascos de 500 mL."
NEW_PACKAGE = "Potabilidade: 1 frasco de 1 L, entregue refrigerado."


def reasons(model: type, pk: int) -> list[str | None]:
    return list(
        historical_model(model)
        .objects.filter(id=pk)
        .order_by("history_id")
        .values_list("history_change_reason", flat=True)
    )


def refusal(step: Callable[[], object]) -> str:
    """The message `step` is refused with."""
    with pytest.raises(ReleaseRefused) as refused:
        step()
    return str(refused.value)


@pytest.fixture
def live() -> tuple[PromptOverride, PromptOverride, KBPackage]:
    """Triagem's active override, a draft of it, and a package: what is live before a release."""
    active = PromptOverride.objects.create(agent="triagem", content=OLD, is_active=True)
    draft = PromptOverride.objects.create(agent="triagem", content=NEW)
    package = KBPackage.objects.create(
        package_id="POTABILIDADE", title="Potabilidade", description="Água", content=OLD_PACKAGE
    )
    return active, draft, package


def release_of(
    draft: PromptOverride, package: KBPackage, *, by: User | None = None, name: str = "Março"
) -> Release:
    """A release of `draft` for triagem, the built-in prompt for the others, and `package`'s
    latest version."""
    return Release.objects.create(
        name=name,
        prompts={
            "triagem": latest_version(PromptOverride, draft.pk),
            "qualificacao": None,
            "coleta": None,
        },
        packages={"POTABILIDADE": latest_version(KBPackage, package.pk)},
        created_by=by,
    )


def test_the_live_versions_are_the_active_overrides_and_packages(
    live: tuple[PromptOverride, PromptOverride, KBPackage],
) -> None:
    active, _draft, package = live
    coleta = PromptOverride.objects.create(agent="coleta", content=COLETA, is_active=True)
    KBPackage.objects.create(
        package_id="ANTIGO", title="Antigo", description="x", content="x", is_active=False
    )

    versions = release_live_versions()

    assert versions.prompts == {
        "triagem": latest_version(PromptOverride, active.pk),
        "qualificacao": None,
        "coleta": latest_version(PromptOverride, coleta.pk),
    }
    assert versions.packages == {"POTABILIDADE": latest_version(KBPackage, package.pk)}


def test_publishing_activates_the_prompts_and_the_packages_together(
    live: tuple[PromptOverride, PromptOverride, KBPackage],
) -> None:
    active, draft, package = live
    replayed(NEW)
    package.content = NEW_PACKAGE
    package.save()
    release = release_of(draft, package)
    package.content = OLD_PACKAGE  # edited back after the release was prepared
    package.save()
    editor = staff_member(PROMPT_EDITORS)

    changes = release_publish(release, user=editor)

    active.refresh_from_db()
    draft.refresh_from_db()
    package.refresh_from_db()
    release.refresh_from_db()
    assert (active.is_active, draft.is_active) == (False, True)
    assert package.content == NEW_PACKAGE
    assert (release.status, release.published_by) == ("published", editor)
    assert [(c.agent, c.before, c.after) for c in changes.prompts] == [("triagem", OLD, NEW)]
    assert [(c.package_id, c.after) for c in changes.packages] == [("POTABILIDADE", NEW_PACKAGE)]
    assert (
        reasons(PromptOverride, draft.pk)[-1] == f"Publicado com o lançamento #{release.pk} “Março”"
    )
    assert reasons(PromptOverride, active.pk)[-1] == reasons(PromptOverride, draft.pk)[-1]
    assert reasons(KBPackage, package.pk)[-1] == reasons(PromptOverride, draft.pk)[-1]


def test_a_prompt_without_a_replay_needs_a_reason_and_nothing_changes_without_it(
    live: tuple[PromptOverride, PromptOverride, KBPackage],
) -> None:
    active, draft, package = live
    release = release_of(draft, package)

    with pytest.raises(ReleaseRefused) as refused:
        release_publish(release, user=staff_member(PROMPT_EDITORS))

    active.refresh_from_db()
    release.refresh_from_db()
    assert str(refused.value) == (
        "Triagem: nenhum teste deste texto em conversas gravadas. "
        "Escreva o motivo para seguir mesmo assim; o histórico o registra."
    )
    assert (active.is_active, release.status) == (True, "draft")

    release_publish(release, user=staff_member(PROMPT_EDITORS), reason="Urgente")

    assert reasons(PromptOverride, draft.pk)[-1] == (
        f"Publicado com o lançamento #{release.pk} “Março”: "
        "Triagem: Ativado sem teste em conversas gravadas: Urgente"
    )


def test_a_release_of_the_built_in_prompt_deactivates_the_agents_override_and_its_rollout(
    live: tuple[PromptOverride, PromptOverride, KBPackage],
) -> None:
    active, draft, _package = live
    draft.rollout_percent = 30
    draft.save()
    release = Release.objects.create(
        name="Padrão", prompts={"triagem": None}, packages={}, created_by=None
    )

    release_publish(release, user=staff_member(PROMPT_EDITORS))

    active.refresh_from_db()
    draft.refresh_from_db()
    assert (active.is_active, draft.is_active) == (False, False)
    assert draft.rollout_percent is None


def test_rolling_back_publishes_the_previous_release_again_in_one_action(
    live: tuple[PromptOverride, PromptOverride, KBPackage],
) -> None:
    active, draft, package = live
    first = triage_release(
        active, "Fevereiro", packages={"POTABILIDADE": latest_version(KBPackage, package.pk)}
    )
    release_publish(first, user=staff_member(PROMPT_EDITORS))
    replayed(NEW)
    package.content = NEW_PACKAGE
    package.save()
    second = release_of(draft, package)
    release_publish(second, user=staff_member(PROMPT_EDITORS))

    back = release_rollback(
        user=staff_member(PROMPT_EDITORS), current_id=second.pk, reason="Mais transferências"
    )

    active.refresh_from_db()
    draft.refresh_from_db()
    package.refresh_from_db()
    first.refresh_from_db()
    second.refresh_from_db()
    assert back == first
    assert (active.is_active, draft.is_active, package.content) == (True, False, OLD_PACKAGE)
    assert (first.status, second.status) == ("published", "superseded")
    assert reasons(PromptOverride, active.pk)[-1] == (
        f"Voltou ao lançamento #{first.pk} “Fevereiro”: Mais transferências"
    )


def test_rolling_back_with_no_earlier_release_is_refused(
    live: tuple[PromptOverride, PromptOverride, KBPackage],
) -> None:
    active, _draft, _package = live
    editor = staff_member(PROMPT_EDITORS)
    assert refusal(lambda: release_rollback(user=editor, current_id=None)) == (
        "Nenhum lançamento está no ar: não há para onde voltar."
    )
    only = triage_release(active, "Única")
    release_publish(only, user=editor)

    assert refusal(lambda: release_rollback(user=editor, current_id=only.pk)) == (
        "Nenhum lançamento foi publicado antes deste."
    )


def test_a_release_naming_a_version_that_is_gone_is_refused(
    live: tuple[PromptOverride, PromptOverride, KBPackage],
) -> None:
    _active, draft, package = live
    release = release_of(draft, package)
    KBPackage.history.filter(id=package.pk).delete()

    with pytest.raises(ReleaseRefused) as refused:
        release_publish(release, user=staff_member(PROMPT_EDITORS), reason="x")

    assert str(refused.value) == (
        f"POTABILIDADE: a versão {release.packages['POTABILIDADE']} do pacote não existe mais"
    )
    assert release_changes(release).missing == (str(refused.value),)


def test_with_approval_required_the_proposer_cannot_approve_their_own_release(
    live: tuple[PromptOverride, PromptOverride, KBPackage], settings: Settings
) -> None:
    settings.PROMPT_APPROVAL_REQUIRED = True
    _active, draft, package = live
    replayed(NEW)
    proposer = staff_member(PROMPT_EDITORS, PROMPT_APPROVERS)
    approver = staff_member(PROMPT_APPROVERS)
    release = release_of(draft, package, by=proposer)

    assert refusal(lambda: release_publish(release, user=proposer)) == (
        "Outro editor com permissão de aprovar precisa aprovar este lançamento antes."
    )
    assert refusal(lambda: release_approve(release, user=approver)) == (
        "Só um lançamento aguardando aprovação pode ser aprovado."
    )
    release_propose(release, user=proposer)
    assert refusal(lambda: release_approve(release, user=proposer)) == (
        "Você preparou ou propôs este lançamento: outro editor com permissão de aprovar é quem o aprova."
    )
    assert refusal(lambda: release_approve(release, user=staff_member(PROMPT_EDITORS))) == (
        "Você não pode aprovar lançamentos."
    )
    release_approve(release, user=approver)
    release_publish(release, user=proposer)

    release.refresh_from_db()
    draft.refresh_from_db()
    assert (release.status, release.created_by, release.approved_by) == (
        "published",
        proposer,
        approver,
    )
    assert release.approved_at is not None
    assert draft.is_active is True
    assert reasons(Release, release.pk)[1:] == [
        "Enviado para aprovação",
        "Aprovado",
        f"Publicado com o lançamento #{release.pk} “Março”",
    ]


@pytest.mark.parametrize("other_published", ["before the approval", "after it"])
def test_an_approved_release_is_not_published_over_one_published_after_its_approval(
    live: tuple[PromptOverride, PromptOverride, KBPackage],
    settings: Settings,
    other_published: str,
) -> None:
    settings.PROMPT_APPROVAL_REQUIRED = True
    _active, draft, package = live
    collection = PromptOverride.objects.create(agent="coleta", content=COLETA)
    replayed(NEW)
    replayed(COLETA, agent="coleta")
    proposer, approver = staff_member(PROMPT_EDITORS), staff_member(PROMPT_APPROVERS)
    march = release_of(draft, package, by=proposer)
    april = release_of(draft, package, by=proposer, name="Abril")
    april.prompts = {**april.prompts, "coleta": latest_version(PromptOverride, collection.pk)}
    april.save()
    for release in (march, april):
        release_propose(release, user=proposer)
    if other_published == "before the approval":
        release_approve(april, user=approver)
        release_publish(april, user=proposer)
        release_approve(march, user=approver)
    else:
        release_approve(march, user=approver)
        release_approve(april, user=approver)
        release_publish(april, user=proposer)

    if other_published == "before the approval":
        release_publish(march, user=proposer)
        march.refresh_from_db()
        assert march.status == "published"
    else:
        refused = refusal(lambda: release_publish(march, user=proposer))
        march.refresh_from_db()
        collection.refresh_from_db()
        assert refused == (
            "Outro lançamento foi publicado depois que este foi aprovado: o que ele muda já não é "
            "o que foi aprovado. Prepare um novo lançamento."
        )
        assert (march.status, collection.is_active) == ("approved", True)


def test_approval_off_publishes_a_draft_directly_and_a_published_one_only_once(
    live: tuple[PromptOverride, PromptOverride, KBPackage],
) -> None:
    _active, draft, package = live
    replayed(NEW)
    release = release_of(draft, package)
    release_publish(release, user=staff_member(PROMPT_EDITORS))

    assert refusal(lambda: release_publish(release, user=staff_member(PROMPT_EDITORS))) == (
        "Este lançamento já foi publicado."
    )
    assert Release.objects.get(pk=release.pk).status == ReleaseStatus.PUBLISHED


def test_the_database_keeps_one_published_release() -> None:
    Release.objects.create(name="A", status=ReleaseStatus.PUBLISHED)

    with pytest.raises(DatabaseError), transaction.atomic():
        Release.objects.create(name="B", status=ReleaseStatus.PUBLISHED)


def test_a_release_moved_by_another_request_before_the_lock_is_refused_and_left_alone(
    live: tuple[PromptOverride, PromptOverride, KBPackage],
) -> None:
    _active, draft, package = live
    replayed(NEW)
    release = release_of(draft, package)
    stale = Release.objects.get(pk=release.pk)
    release_publish(release, user=staff_member(PROMPT_EDITORS))

    # `stale` still reads "draft": a second click that passed the status check before the first
    # publication committed.
    refused = refusal(lambda: release_publish(stale, user=staff_member(PROMPT_EDITORS)))

    assert refused == "Este lançamento mudou nesse meio-tempo: recarregue a página."
    assert Release.objects.get(pk=release.pk).status == "published"
    assert reasons(Release, release.pk)[-1] == f"Publicado com o lançamento #{release.pk} “Março”"


def test_publishing_an_approved_release_records_the_approvers_reason_on_each_prompt(
    live: tuple[PromptOverride, PromptOverride, KBPackage], settings: Settings
) -> None:
    settings.PROMPT_APPROVAL_REQUIRED = True
    _active, draft, package = live
    proposer = staff_member(PROMPT_EDITORS)
    release = release_of(draft, package, by=proposer)
    release_propose(release, user=proposer)
    release_approve(release, user=staff_member(PROMPT_APPROVERS), reason="Urgente")

    release_publish(release, user=proposer)

    assert reasons(PromptOverride, draft.pk)[-1] == (
        f"Publicado com o lançamento #{release.pk} “Março”: "
        "Triagem: Ativado sem teste em conversas gravadas: Urgente"
    )
    assert reasons(Release, release.pk)[-2:] == [
        "Aprovado: Triagem: Ativado sem teste em conversas gravadas: Urgente",
        f"Publicado com o lançamento #{release.pk} “Março”: "
        "Triagem: Ativado sem teste em conversas gravadas: Urgente",
    ]


@pytest.mark.parametrize("approval", [True, False])
def test_publishing_the_published_release_again_says_it_was_published(
    live: tuple[PromptOverride, PromptOverride, KBPackage], settings: Settings, approval: bool
) -> None:
    settings.PROMPT_APPROVAL_REQUIRED = approval
    _active, draft, package = live
    replayed(NEW)
    release = release_of(draft, package)
    if approval:
        release_propose(release, user=staff_member(PROMPT_EDITORS))
        release_approve(release, user=staff_member(PROMPT_APPROVERS))
    release_publish(release, user=staff_member(PROMPT_EDITORS))
    history = reasons(Release, release.pk)
    # A second click: the page it came from still offered "Publish".
    again = Release.objects.get(pk=release.pk)

    refused = refusal(lambda: release_publish(again, user=staff_member(PROMPT_EDITORS)))

    assert refused == "Este lançamento já foi publicado."
    assert Release.objects.get(pk=release.pk).status == "published"
    assert reasons(Release, release.pk) == history


def test_a_proposed_release_with_approval_off_needs_its_approval_to_be_published(
    live: tuple[PromptOverride, PromptOverride, KBPackage],
) -> None:
    active, draft, package = live
    replayed(NEW)
    release = release_of(draft, package)
    release_propose(release, user=staff_member(PROMPT_EDITORS))

    refused = refusal(lambda: release_publish(release, user=staff_member(PROMPT_EDITORS)))

    active.refresh_from_db()
    assert refused == "Outro editor com permissão de aprovar precisa aprovar este lançamento antes."
    assert (Release.objects.get().status, active.is_active) == ("proposed", True)


def test_a_draft_whose_versions_changed_after_it_was_weighed_is_refused_and_left_alone(
    live: tuple[PromptOverride, PromptOverride, KBPackage],
) -> None:
    active, draft, _package = live
    release = triage_release(active, "Março")
    stale = Release.objects.get(pk=release.pk)
    # Another request saves the draft with a text no replay passed while `stale` is weighed.
    release.prompts = {"triagem": latest_version(PromptOverride, draft.pk)}
    release.save()

    refused = refusal(lambda: release_publish(stale, user=staff_member(PROMPT_EDITORS)))

    active.refresh_from_db()
    draft.refresh_from_db()
    assert refused == "Este lançamento mudou nesse meio-tempo: recarregue a página."
    assert (active.is_active, draft.is_active, Release.objects.get().status) == (
        True,
        False,
        "draft",
    )


def test_an_override_and_a_package_deleted_after_the_release_was_saved_come_back(
    live: tuple[PromptOverride, PromptOverride, KBPackage],
) -> None:
    active, draft, package = live
    replayed(NEW)
    release = release_of(draft, package)
    draft_pk, package_pk = draft.pk, package.pk
    draft.delete()
    package.delete()

    release_publish(release, user=staff_member(PROMPT_EDITORS))

    back = PromptOverride.objects.get(pk=draft_pk)
    package = KBPackage.objects.get(package_id="POTABILIDADE")
    active.refresh_from_db()
    assert (back.content, back.is_active, active.is_active) == (NEW, True, False)
    assert (package.pk, package.content, package.is_active) == (package_pk, OLD_PACKAGE, True)
    published = f"Publicado com o lançamento #{release.pk} “Março”"
    assert (reasons(PromptOverride, draft_pk)[-1], reasons(KBPackage, package_pk)[-1]) == (
        published,
        published,
    )


def test_a_release_naming_an_inactive_package_activates_it(
    live: tuple[PromptOverride, PromptOverride, KBPackage],
) -> None:
    active, _draft, _package = live
    new = KBPackage.objects.create(
        package_id="POCO",
        title="Poço",
        description="Água de poço",
        content="Poço.",
        is_active=False,
    )
    release = triage_release(active, "Poço", packages={"POCO": latest_version(KBPackage, new.pk)})

    changes = release_publish(release, user=staff_member(PROMPT_EDITORS))

    new.refresh_from_db()
    assert [(c.package_id, c.before, c.before_version, c.after) for c in changes.packages] == [
        ("POCO", "", None, "Poço.")
    ]
    assert new.is_active is True
    assert reasons(KBPackage, new.pk) == [None, f"Publicado com o lançamento #{release.pk} “Poço”"]


def test_a_release_of_what_is_live_publishes_and_writes_no_prompt_or_package_version(
    live: tuple[PromptOverride, PromptOverride, KBPackage],
) -> None:
    active, draft, package = live
    release = triage_release(
        active, "Base", packages={"POTABILIDADE": latest_version(KBPackage, package.pk)}
    )
    assert release_changes(release) == release_changes(release).__class__((), (), ())

    changes = release_publish(release, user=staff_member(PROMPT_EDITORS))

    assert (changes.prompts, changes.packages) == ((), ())
    assert Release.objects.get().status == "published"
    assert (reasons(PromptOverride, active.pk), reasons(PromptOverride, draft.pk)) == (
        [None],
        [None],
    )
    assert reasons(KBPackage, package.pk) == [None]


def test_rolling_back_to_a_release_whose_version_is_gone_says_which_and_changes_nothing(
    live: tuple[PromptOverride, PromptOverride, KBPackage],
) -> None:
    active, draft, package = live
    first = triage_release(active, "Fevereiro")
    release_publish(first, user=staff_member(PROMPT_EDITORS))
    replayed(NEW)
    second = release_of(draft, package)
    release_publish(second, user=staff_member(PROMPT_EDITORS))
    gone = first.prompts["triagem"]
    PromptOverride.history.filter(history_id=gone).delete()

    refused = refusal(
        lambda: release_rollback(user=staff_member(PROMPT_EDITORS), current_id=second.pk)
    )

    active.refresh_from_db()
    draft.refresh_from_db()
    assert refused == f"Triagem: a versão {gone} do prompt não existe mais"
    assert (active.is_active, draft.is_active) == (False, True)
    assert list(Release.objects.order_by("pk").values_list("status", flat=True)) == [
        "superseded",
        "published",
    ]


def test_a_long_reason_is_kept_whole_in_every_history_row(
    live: tuple[PromptOverride, PromptOverride, KBPackage],
) -> None:
    _active, draft, package = live
    release = release_of(draft, package, name="M" * 120)
    reason = "r" * 255

    release_publish(release, user=staff_member(PROMPT_EDITORS), reason=reason)

    expected = (
        f"Publicado com o lançamento #{release.pk} “{'M' * 120}”: "
        f"Triagem: Ativado sem teste em conversas gravadas: {reason}"
    )
    assert reasons(PromptOverride, draft.pk)[-1] == expected
    assert reasons(Release, release.pk)[-1] == expected


def lock_waiters() -> int:
    """How many other connections wait for a row lock (PostgreSQL)."""
    with connection.cursor() as cursor:
        # Inside a transaction the statistics views keep their first reading otherwise.
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
            "AND pid <> pg_backend_pid()"
        )
        waiting: int = cursor.fetchone()[0]
    return waiting


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_two_releases_published_at_once_are_published_one_after_the_other() -> None:
    """Two editors publish two releases of the same agent at the same moment: the second waits
    for the first and replaces it, leaving one active override and one published release."""
    active = PromptOverride.objects.create(agent="triagem", content=OLD, is_active=True)
    drafts = [PromptOverride.objects.create(agent="triagem", content=t) for t in (NEW, COLETA)]
    releases = [triage_release(draft, f"R{index}") for index, draft in enumerate(drafts)]
    # Permissions, not the group: a transactional test's flush drops the migrations' groups.
    editor = staff_member(permissions=("prompts_admin.change_release",))
    outcomes: list[str] = []

    def publish(release: Release) -> None:
        try:
            release_publish(release, user=editor, reason="Urgente")
            outcomes.append("published")
        except Exception as failed:  # the outcome the test compares
            outcomes.append(type(failed).__name__)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=publish, args=(release,)) for release in releases]
    # Both publications reach the lock on the live override before either commits.
    with transaction.atomic():
        list(PromptOverride.objects.select_for_update().filter(pk=active.pk))
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + 10
        while lock_waiters() < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
    for thread in threads:
        thread.join(timeout=30)

    assert outcomes == ["published", "published"]
    assert sorted(Release.objects.values_list("status", flat=True)) == ["published", "superseded"]
    assert PromptOverride.objects.filter(agent="triagem", is_active=True).count() == 1


def test_a_draft_deleted_while_it_is_published_is_refused_and_nothing_changes(
    live: tuple[PromptOverride, PromptOverride, KBPackage],
) -> None:
    active, draft, package = live
    replayed(NEW)
    release = release_of(draft, package)
    stale = Release.objects.get(pk=release.pk)
    release.delete()

    refused = refusal(lambda: release_publish(stale, user=staff_member(PROMPT_EDITORS)))

    active.refresh_from_db()
    draft.refresh_from_db()
    assert refused == "Este lançamento mudou nesse meio-tempo: recarregue a página."
    assert (active.is_active, draft.is_active, Release.objects.count()) == (True, False, 0)


def test_the_history_is_written_in_the_sites_language_whatever_the_editors(
    live: tuple[PromptOverride, PromptOverride, KBPackage],
) -> None:
    _active, draft, package = live
    release = release_of(draft, package)

    with translation.override("en"):
        release_publish(release, user=staff_member(PROMPT_EDITORS), reason="Urgent")

    assert reasons(PromptOverride, draft.pk)[-1] == (
        f"Publicado com o lançamento #{release.pk} “Março”: "
        "Triagem: Ativado sem teste em conversas gravadas: Urgent"
    )


def test_a_release_deleted_while_it_is_approved_is_refused_and_stays_deleted(
    live: tuple[PromptOverride, PromptOverride, KBPackage], settings: Settings
) -> None:
    settings.PROMPT_APPROVAL_REQUIRED = True
    _active, draft, package = live
    replayed(NEW)
    release = release_of(draft, package, by=staff_member(PROMPT_EDITORS))
    release_propose(release, user=staff_member(PROMPT_EDITORS))
    stale = Release.objects.get(pk=release.pk)
    release.delete()

    refused = refusal(lambda: release_approve(stale, user=staff_member(PROMPT_APPROVERS)))

    assert refused == "Este lançamento mudou nesse meio-tempo: recarregue a página."
    assert Release.objects.count() == 0


def test_a_draft_saved_while_it_is_sent_for_approval_is_refused_and_keeps_the_save(
    live: tuple[PromptOverride, PromptOverride, KBPackage], settings: Settings
) -> None:
    settings.PROMPT_APPROVAL_REQUIRED = True
    active, draft, package = live
    release = release_of(draft, package)
    stale = Release.objects.get(pk=release.pk)
    # Another tab saves the draft with the active override while `stale` is sent.
    release.prompts = {"triagem": latest_version(PromptOverride, active.pk)}
    release.save()

    refused = refusal(lambda: release_propose(stale, user=staff_member(PROMPT_EDITORS)))

    saved = Release.objects.get()
    assert refused == "Este lançamento mudou nesse meio-tempo: recarregue a página."
    assert (saved.status, saved.prompts) == (
        "draft",
        {"triagem": latest_version(PromptOverride, active.pk)},
    )
