"""The releases' admin (docs/decisions/0060): the add form prefilled with what is live, the
release's page with what publishing changes (diffs, replay, test suite, persona run), and the
steps — publish, send for approval, approve (another user), back to the previous release."""

from datetime import timedelta
from typing import Any

import pytest
from django.contrib import admin
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.test import Client, RequestFactory
from django.utils import timezone
from model_bakery import baker
from pytest_django import DjangoAssertNumQueries, Settings

from governance.models import PersonaRun, ReplayStatus
from knowledge_base.models import KBPackage
from prompts_admin.models import PromptOverride, Release
from prompts_admin.releases import release_publish
from tests.helpers.replays import replayed
from tests.helpers.staff import PROMPT_APPROVERS, PROMPT_EDITORS, logged_in, staff_member
from tests.helpers.versions import latest_version, triage_release

pytestmark = pytest.mark.django_db

BASE = "/admin/prompts_admin/release/"
OLD = "Triagem antiga de {{ agent_name }}."
NEW = "Triagem nova de {{ agent_name }}.\nPergunte o município."
PACKAGE = "Potabilidade: 2 frascos de 500 mL."


@pytest.fixture
def live() -> tuple[PromptOverride, PromptOverride, KBPackage]:
    active = PromptOverride.objects.create(agent="triagem", content=OLD, is_active=True)
    draft = PromptOverride.objects.create(agent="triagem", content=NEW, note="município")
    package = KBPackage.objects.create(
        package_id="POTABILIDADE", title="Potabilidade", description="Água", content=PACKAGE
    )
    return active, draft, package


def texts(response: Any) -> list[str]:
    """The messages the page a step redirected to showed (each step is followed, so every
    message is shown, and consumed, once)."""
    assert response.redirect_chain, "a step redirects to a page"
    return [str(m) for m in response.context["messages"]]


def release_form(draft: PromptOverride, package: KBPackage, **fields: str) -> dict[str, str]:
    data = {
        "name": "Março",
        "note": "Pergunta o município",
        "prompt_triagem": str(latest_version(PromptOverride, draft.pk)),
        "prompt_qualificacao": "",
        "prompt_coleta": "",
        "package_POTABILIDADE": str(latest_version(KBPackage, package.pk)),
    }
    return data | fields


def test_the_add_form_is_prefilled_with_what_is_live(
    live: tuple[PromptOverride, PromptOverride, KBPackage], prompt_editor_client: Client
) -> None:
    active, _draft, package = live

    form = prompt_editor_client.get(f"{BASE}add/").context["adminform"].form

    assert form["prompt_triagem"].value() == str(latest_version(PromptOverride, active.pk))
    assert form["prompt_coleta"].value() == ""
    assert form["package_POTABILIDADE"].value() == str(latest_version(KBPackage, package.pk))
    assert [label for _value, label in form.fields["prompt_coleta"].choices] == [
        "Prompt padrão (sem personalização)"
    ]


def test_an_editor_saves_a_release_with_the_versions_chosen(
    live: tuple[PromptOverride, PromptOverride, KBPackage],
    prompt_editor_client: Client,
    prompt_editor_user: Any,
) -> None:
    _active, draft, package = live

    response = prompt_editor_client.post(f"{BASE}add/", release_form(draft, package), follow=True)

    pk = Release.objects.get().pk
    assert texts(response) == [
        f'O lançamento “<a href="{BASE}{pk}/change/">#{pk} Março</a>” foi adicionado com sucesso.'
    ]
    release = Release.objects.get()
    assert release.prompts == {
        "triagem": latest_version(PromptOverride, draft.pk),
        "qualificacao": None,
        "coleta": None,
    }
    assert release.packages == {"POTABILIDADE": latest_version(KBPackage, package.pk)}
    assert (release.status, release.created_by) == ("draft", prompt_editor_user)


def test_a_version_of_another_agent_is_refused_with_what_is_wrong(
    live: tuple[PromptOverride, PromptOverride, KBPackage], prompt_editor_client: Client
) -> None:
    _active, draft, package = live
    coleta = PromptOverride.objects.create(agent="coleta", content="Coleta.")
    version = str(latest_version(PromptOverride, coleta.pk))

    response = prompt_editor_client.post(
        f"{BASE}add/", release_form(draft, package, prompt_triagem=version)
    )

    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert errors["prompt_triagem"] == [
        f"Faça uma escolha válida. {version} não é uma das escolhas disponíveis."
    ]
    assert Release.objects.count() == 0


def test_the_release_page_shows_the_diff_the_replay_and_publishes(
    live: tuple[PromptOverride, PromptOverride, KBPackage],
    prompt_editor_client: Client,
    django_assert_num_queries: DjangoAssertNumQueries,
) -> None:
    active, draft, package = live
    run = replayed(NEW)
    prompt_editor_client.post(f"{BASE}add/", release_form(draft, package), follow=True)
    release = Release.objects.get()

    with django_assert_num_queries(15):
        page = prompt_editor_client.get(f"{BASE}{release.pk}/change/").content.decode()

    assert "O que este lançamento muda" in page
    assert "Prompt de Triagem" in page
    assert '<tr class="diff-added"><td class="diff-sign">+</td><td>Pergunte o município.</td>' in (
        page
    )
    assert f"Último teste deste texto em conversas gravadas (#{run.pk})" in page
    assert "Nenhuma execução de clientes simulados exatamente destes prompts ainda." in page
    assert 'id="release-publish"' in page

    published = prompt_editor_client.post(
        f"{BASE}{release.pk}/publish/", {"reason": ""}, follow=True
    )

    assert texts(published) == ["Lançamento no ar: as novas conversas já o usam."]
    active.refresh_from_db()
    draft.refresh_from_db()
    assert (active.is_active, draft.is_active) == (False, True)


def test_publishing_without_a_replay_and_without_a_reason_says_why_and_changes_nothing(
    live: tuple[PromptOverride, PromptOverride, KBPackage], prompt_editor_client: Client
) -> None:
    active, draft, package = live
    prompt_editor_client.post(f"{BASE}add/", release_form(draft, package), follow=True)
    release = Release.objects.get()

    response = prompt_editor_client.post(
        f"{BASE}{release.pk}/publish/", {"reason": " "}, follow=True
    )

    assert texts(response) == [
        "Triagem: nenhum teste deste texto em conversas gravadas. "
        "Escreva o motivo para seguir mesmo assim; o histórico o registra."
    ]
    active.refresh_from_db()
    assert active.is_active is True
    assert Release.objects.get().status == "draft"


def test_with_approval_required_the_proposer_sees_no_approve_button_and_cannot_approve(
    live: tuple[PromptOverride, PromptOverride, KBPackage], settings: Settings
) -> None:
    settings.PROMPT_APPROVAL_REQUIRED = True
    _active, draft, package = live
    replayed(NEW)
    proposer = staff_member(PROMPT_EDITORS, PROMPT_APPROVERS)
    approver_user = staff_member(PROMPT_APPROVERS)
    approver = logged_in(approver_user)
    client = logged_in(proposer)
    client.post(f"{BASE}add/", release_form(draft, package), follow=True)
    release = Release.objects.get()
    draft_page = client.get(f"{BASE}{release.pk}/change/").content.decode()

    proposed = client.post(f"{BASE}{release.pk}/propose/", follow=True)
    own_page = client.get(f"{BASE}{release.pk}/change/").content.decode()
    own_approval = client.post(f"{BASE}{release.pk}/approve/", {"reason": ""}, follow=True)
    approver_page = approver.get(f"{BASE}{release.pk}/change/").content.decode()
    approved = approver.post(f"{BASE}{release.pk}/approve/", {"reason": ""}, follow=True)
    published = client.post(f"{BASE}{release.pk}/publish/", {"reason": ""}, follow=True)

    assert ('id="release-propose"' in draft_page, 'id="release-publish"' in draft_page) == (
        True,
        False,
    )
    assert texts(proposed) == [
        "Enviado para aprovação: outro editor com permissão de aprovar é quem o aprova."
    ]
    assert ('id="release-approve"' in own_page, 'id="release-own-proposal"' in own_page) == (
        False,
        True,
    )
    assert texts(own_approval) == [
        "Você preparou ou propôs este lançamento: outro editor com permissão de aprovar é quem o aprova."
    ]
    assert 'id="release-approve"' in approver_page
    assert texts(approved) == ["Lançamento aprovado: já pode ser publicado."]
    assert texts(published) == ["Lançamento no ar: as novas conversas já o usam."]
    release.refresh_from_db()
    assert (release.status, release.created_by, release.approved_by) == (
        "published",
        proposer,
        approver_user,
    )


def test_support_may_not_see_or_step_a_release(
    live: tuple[PromptOverride, PromptOverride, KBPackage], support_client: Client
) -> None:
    release = Release.objects.create(name="x", prompts={}, packages={})

    assert support_client.get(f"{BASE}{release.pk}/change/").status_code == 403
    assert support_client.post(f"{BASE}{release.pk}/publish/").status_code == 403
    assert support_client.post(f"{BASE}rollback/").status_code == 403
    assert Release.objects.get().status == "draft"


def test_a_step_is_a_post_only(
    live: tuple[PromptOverride, PromptOverride, KBPackage], prompt_editor_client: Client
) -> None:
    release = Release.objects.create(name="x", prompts={}, packages={})

    assert prompt_editor_client.get(f"{BASE}{release.pk}/publish/").status_code == 405
    assert Release.objects.get().status == "draft"


def test_the_published_release_page_rolls_back_in_one_action(
    live: tuple[PromptOverride, PromptOverride, KBPackage], prompt_editor_client: Client
) -> None:
    active, draft, _package = live
    first = triage_release(active, "Fevereiro")
    prompt_editor_client.post(f"{BASE}{first.pk}/publish/", {"reason": "base"}, follow=True)
    replayed(NEW)
    second = triage_release(draft, "Março")
    prompt_editor_client.post(f"{BASE}{second.pk}/publish/", {"reason": ""}, follow=True)
    page = prompt_editor_client.get(f"{BASE}{second.pk}/change/").content.decode()

    response = prompt_editor_client.post(
        f"{BASE}rollback/",
        {"release": str(second.pk), "reason": "mais transferências"},
        follow=True,
    )

    assert 'id="release-rollback"' in page
    assert response.redirect_chain == [(f"{BASE}{first.pk}/change/", 302)]
    assert texts(response) == [
        f"De volta ao lançamento #{first.pk} Fevereiro: as novas conversas já o usam."
    ]
    active.refresh_from_db()
    assert active.is_active is True


def test_the_persona_run_of_exactly_the_release_prompts_is_shown(
    live: tuple[PromptOverride, PromptOverride, KBPackage], prompt_editor_client: Client
) -> None:
    _active, draft, _package = live
    release = triage_release(draft, "Março")
    versions = {
        "triagem": f"override:{latest_version(PromptOverride, draft.pk)}",
        "qualificacao": "builtin",
        "coleta": "builtin",
    }
    run = baker.make(
        PersonaRun,
        prompt_versions=versions,
        status=ReplayStatus.DONE,
        personas_done=10,
        reached=9,
    )
    baker.make(PersonaRun, prompt_versions=versions | {"coleta": "override:1"}, status="done")

    page = prompt_editor_client.get(f"{BASE}{release.pk}/change/").content.decode()

    assert (
        f"Execução #{run.pk} destes prompts: 9 de 10 clientes simulados chegaram ao resultado "
        "esperado."
    ) in page


@pytest.mark.parametrize(
    ("played", "warned"),
    [("release's", False), ("other", True), ("none", True)],
)
def test_a_persona_run_of_other_knowledge_versions_is_said_so(
    live: tuple[PromptOverride, PromptOverride, KBPackage],
    prompt_editor_client: Client,
    played: str,
    warned: bool,
) -> None:
    _active, draft, package = live
    version = latest_version(KBPackage, package.pk)
    release = triage_release(draft, "Março", packages={"POTABILIDADE": version})
    package_versions = {
        "release's": {"POTABILIDADE": version},
        "other": {"POTABILIDADE": version + 1},
    }
    baker.make(
        PersonaRun,
        prompt_versions={
            "triagem": f"override:{latest_version(PromptOverride, draft.pk)}",
            "qualificacao": "builtin",
            "coleta": "builtin",
        },
        package_versions=package_versions.get(played, {}),
        status=ReplayStatus.DONE,
    )

    page = prompt_editor_client.get(f"{BASE}{release.pk}/change/").content.decode()

    warning = (
        "Essa execução usou outra versão de um pacote de conhecimento que este lançamento nomeia: "
        "simule o lançamento para ver os dois juntos."
    )
    assert (warning in page) is warned


def test_an_editor_may_simulate_customers_with_the_release_an_approver_may_not(
    live: tuple[PromptOverride, PromptOverride, KBPackage], prompt_editor_client: Client
) -> None:
    release = Release.objects.create(name="Março", prompts={}, packages={})
    approver = logged_in(staff_member(PROMPT_APPROVERS))
    link = (
        f'<a href="/admin/governance/personarun/start/?release={release.pk}" '
        'id="release-simulate">Simular clientes com este lançamento</a>'
    )

    assert link in prompt_editor_client.get(f"{BASE}{release.pk}/change/").content.decode()
    assert 'id="release-simulate"' not in (
        approver.get(f"{BASE}{release.pk}/change/").content.decode()
    )


def test_an_approved_release_outdated_by_another_publication_offers_no_publish(
    live: tuple[PromptOverride, PromptOverride, KBPackage],
    prompt_editor_client: Client,
    settings: Settings,
) -> None:
    settings.PROMPT_APPROVAL_REQUIRED = True
    _active, draft, _package = live
    approved_at = timezone.now()
    release = triage_release(draft, "Março", status="approved", approved_at=approved_at)
    url = f"{BASE}{release.pk}/change/"
    before = prompt_editor_client.get(url).content.decode()
    Release.objects.create(
        name="Abril",
        prompts={},
        packages={},
        status="published",
        published_at=approved_at + timedelta(seconds=1),
    )

    after = prompt_editor_client.get(url).content.decode()

    assert ('id="release-publish"' in before, 'id="release-approval-outdated"' in before) == (
        True,
        False,
    )
    assert 'id="release-publish"' not in after
    assert (
        "Outro lançamento foi publicado depois que este foi aprovado: o que ele muda já não é o "
        "que foi aprovado. Prepare um novo lançamento."
    ) in after


def test_an_editor_who_changed_or_proposed_someone_elses_draft_cannot_approve_it(
    live: tuple[PromptOverride, PromptOverride, KBPackage], settings: Settings
) -> None:
    settings.PROMPT_APPROVAL_REQUIRED = True
    _active, draft, package = live
    replayed(NEW)
    author = logged_in(staff_member(PROMPT_EDITORS))
    editor = logged_in(staff_member(PROMPT_EDITORS, PROMPT_APPROVERS))
    author.post(f"{BASE}add/", release_form(draft, package), follow=True)
    release = Release.objects.get()
    editor.post(
        f"{BASE}{release.pk}/change/",
        release_form(draft, package, note="Ajustei a nota"),
        follow=True,
    )
    author.post(f"{BASE}{release.pk}/propose/", follow=True)

    page = editor.get(f"{BASE}{release.pk}/change/").content.decode()
    refused = editor.post(f"{BASE}{release.pk}/approve/", {"reason": ""}, follow=True)

    assert ('id="release-approve"' in page, 'id="release-own-proposal"' in page) == (False, True)
    assert texts(refused) == [
        "Você preparou ou propôs este lançamento: outro editor com permissão de aprovar é quem o aprova."
    ]
    assert Release.objects.get().status == "proposed"


def test_an_approver_may_not_publish_or_roll_back_and_an_unknown_release_is_a_404(
    live: tuple[PromptOverride, PromptOverride, KBPackage], prompt_editor_client: Client
) -> None:
    release = Release.objects.create(name="x", prompts={}, packages={})
    approver = logged_in(staff_member(PROMPT_APPROVERS))

    assert approver.post(f"{BASE}{release.pk}/publish/").status_code == 403
    assert approver.post(f"{BASE}rollback/").status_code == 403
    assert approver.post(f"{BASE}{release.pk}/propose/").status_code == 403
    assert prompt_editor_client.post(f"{BASE}999/publish/").status_code == 404
    assert prompt_editor_client.post(f"{BASE}{release.pk}/approve/").status_code == 403
    assert Release.objects.get().status == "draft"


def release_row(pk: int) -> tuple[Any, ...]:
    """What a refused request must leave as it was."""
    return tuple(
        Release.objects.filter(pk=pk).values_list("name", "note", "prompts", "packages", "status")[
            0
        ]
    )


def test_an_approved_release_publishes_with_its_approvers_reason_and_only_once(
    live: tuple[PromptOverride, PromptOverride, KBPackage], settings: Settings
) -> None:
    settings.PROMPT_APPROVAL_REQUIRED = True
    _active, draft, package = live
    proposer = logged_in(staff_member(PROMPT_EDITORS))
    approver = logged_in(staff_member(PROMPT_APPROVERS))
    proposer.post(f"{BASE}add/", release_form(draft, package), follow=True)
    release = Release.objects.get()
    proposer.post(f"{BASE}{release.pk}/propose/", follow=True)
    approver.post(f"{BASE}{release.pk}/approve/", {"reason": "Urgente"}, follow=True)
    page = proposer.get(f"{BASE}{release.pk}/change/").content.decode()

    published = proposer.post(f"{BASE}{release.pk}/publish/", {"reason": ""}, follow=True)
    again = proposer.post(f"{BASE}{release.pk}/publish/", {"reason": ""}, follow=True)

    assert ('id="release-publish"' in page, 'id="release-reason"' in page) == (True, False)
    assert '<div class="readonly">Urgente</div>' in page
    assert texts(published) == ["Lançamento no ar: as novas conversas já o usam."]
    assert texts(again) == ["Este lançamento já foi publicado."]
    assert historical_reasons(PromptOverride, draft.pk)[-1] == (
        f"Publicado com o lançamento #{release.pk} “Março”: "
        "Triagem: Ativado sem teste em conversas gravadas: Urgente"
    )
    assert Release.objects.get().status == "published"


def historical_reasons(model: type, pk: int) -> list[str | None]:
    return list(
        model.history.filter(id=pk)  # type: ignore[attr-defined]
        .order_by("history_id")
        .values_list("history_change_reason", flat=True)
    )


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("prompt_triagem", "abc"),
        ("prompt_triagem", "-1"),
        ("prompt_triagem", "99999999999999999999"),
        ("prompt_triagem", "deleted override"),
        ("package_POTABILIDADE", "other package"),
        ("package_POTABILIDADE", "1.5"),
    ],
)
def test_a_tampered_version_is_refused_with_what_is_wrong_and_nothing_saved(
    live: tuple[PromptOverride, PromptOverride, KBPackage],
    prompt_editor_client: Client,
    field: str,
    value: str,
) -> None:
    _active, draft, package = live
    gone = PromptOverride.objects.create(agent="triagem", content="Apagado.")
    gone_version = latest_version(PromptOverride, gone.pk)
    gone.delete()
    other = KBPackage.objects.create(
        package_id="SOLO", title="Solo", description="Terra", content="Solo."
    )
    value = {
        "deleted override": str(gone_version),
        "other package": str(latest_version(KBPackage, other.pk)),
    }.get(value, value)

    response = prompt_editor_client.post(
        f"{BASE}add/", release_form(draft, package, **{field: value})
    )

    assert response.status_code == 200
    assert response.context["adminform"].form.errors[field] == [
        f"Faça uma escolha válida. {value} não é uma das escolhas disponíveis."
    ]
    assert Release.objects.count() == 0


def test_fields_the_form_does_not_have_are_ignored(
    live: tuple[PromptOverride, PromptOverride, KBPackage], prompt_editor_client: Client
) -> None:
    _active, draft, package = live

    prompt_editor_client.post(
        f"{BASE}add/",
        release_form(
            draft,
            package,
            status="published",
            approved_by="1",
            package_INEXISTENTE="1",
            prompt_outro="1",
        ),
        follow=True,
    )

    release = Release.objects.get()
    assert (release.status, release.approved_by, release.published_at) == ("draft", None, None)
    assert set(release.prompts) == {"triagem", "qualificacao", "coleta"}
    assert set(release.packages) == {"POTABILIDADE"}


@pytest.mark.parametrize("status", ["proposed", "approved", "published", "superseded"])
def test_a_release_past_its_draft_cannot_be_changed_or_written_back(
    live: tuple[PromptOverride, PromptOverride, KBPackage],
    prompt_editor_client: Client,
    status: str,
) -> None:
    active, draft, package = live
    release = triage_release(active, "Março", status=status)
    before = release_row(release.pk)
    version = latest_version(Release, release.pk)

    changed = prompt_editor_client.post(
        f"{BASE}{release.pk}/change/", release_form(draft, package, name="Outro")
    )
    reverted = prompt_editor_client.post(f"{BASE}{release.pk}/history/{version}/", {"name": "x"})
    page = prompt_editor_client.get(f"{BASE}{release.pk}/change/")

    assert (changed.status_code, reverted.status_code, page.status_code) == (403, 403, 200)
    assert 'name="prompt_triagem"' not in page.content.decode()
    assert release_row(release.pk) == before


def test_an_out_of_range_release_id_is_a_404(prompt_editor_client: Client) -> None:
    huge = "9" * 20

    assert prompt_editor_client.post(f"{BASE}{huge}/publish/").status_code == 404
    assert prompt_editor_client.post(f"{BASE}{huge}/propose/").status_code == 404
    assert prompt_editor_client.get(f"{BASE}{huge}/change/", follow=True).status_code == 200


def test_a_superuser_who_proposed_a_release_cannot_approve_it(
    live: tuple[PromptOverride, PromptOverride, KBPackage], settings: Settings
) -> None:
    settings.PROMPT_APPROVAL_REQUIRED = True
    _active, draft, _package = live
    replayed(NEW)
    release = triage_release(draft, "Março")
    root = User.objects.create_superuser("root", "root@example.com", "x")
    client = logged_in(root)
    client.post(f"{BASE}{release.pk}/propose/", follow=True)
    page = client.get(f"{BASE}{release.pk}/change/").content.decode()

    refused = client.post(f"{BASE}{release.pk}/approve/", {"reason": ""}, follow=True)

    assert ('id="release-approve"' in page, 'id="release-own-proposal"' in page) == (False, True)
    assert texts(refused) == [
        "Você preparou ou propôs este lançamento: outro editor com permissão de aprovar é quem o aprova."
    ]
    release.refresh_from_db()
    assert (release.status, release.approved_by) == ("proposed", None)


def test_a_release_whose_prompt_version_is_gone_says_which_on_its_page_and_publishes_nothing(
    live: tuple[PromptOverride, PromptOverride, KBPackage], prompt_editor_client: Client
) -> None:
    active, draft, package = live
    prompt_editor_client.post(f"{BASE}add/", release_form(draft, package), follow=True)
    release = Release.objects.get()
    gone = release.prompts["triagem"]
    PromptOverride.history.filter(history_id=gone).delete()
    before = release_row(release.pk)

    page = prompt_editor_client.get(f"{BASE}{release.pk}/change/").content.decode()
    response = prompt_editor_client.post(
        f"{BASE}{release.pk}/publish/", {"reason": "Urgente"}, follow=True
    )

    missing = f"Triagem: a versão {gone} do prompt não existe mais"
    assert f'<p class="errornote">{missing}</p>' in page
    assert texts(response) == [missing]
    active.refresh_from_db()
    assert active.is_active is True
    assert release_row(release.pk) == before


def test_a_second_click_on_back_to_the_previous_release_is_refused_and_changes_nothing(
    live: tuple[PromptOverride, PromptOverride, KBPackage], prompt_editor_client: Client
) -> None:
    active, draft, _package = live
    first = triage_release(active, "Fevereiro")
    prompt_editor_client.post(f"{BASE}{first.pk}/publish/", {"reason": ""}, follow=True)
    replayed(NEW)
    second = triage_release(draft, "Março")
    prompt_editor_client.post(f"{BASE}{second.pk}/publish/", {"reason": ""}, follow=True)
    page = prompt_editor_client.get(f"{BASE}{second.pk}/change/").content.decode()
    form = {"release": str(second.pk), "reason": "mais transferências"}
    prompt_editor_client.post(f"{BASE}rollback/", form, follow=True)
    history = historical_reasons(PromptOverride, draft.pk)

    again = prompt_editor_client.post(f"{BASE}rollback/", form, follow=True)

    assert f'<input type="hidden" name="release" value="{second.pk}">' in page
    assert again.redirect_chain == [(f"{BASE}{second.pk}/change/", 302)]
    assert texts(again) == ["Este lançamento mudou nesse meio-tempo: recarregue a página."]
    active.refresh_from_db()
    draft.refresh_from_db()
    assert (active.is_active, draft.is_active) == (True, False)
    assert list(Release.objects.order_by("pk").values_list("status", flat=True)) == [
        "published",
        "superseded",
    ]
    assert historical_reasons(PromptOverride, draft.pk) == history


def published_twice(live: tuple[PromptOverride, PromptOverride, KBPackage], client: Client) -> None:
    """Triagem's active override published as "Fevereiro", then its draft as "Março"."""
    active, draft, _package = live
    first = triage_release(active, "Fevereiro")
    client.post(f"{BASE}{first.pk}/publish/", {"reason": ""}, follow=True)
    second = triage_release(draft, "Março")
    client.post(f"{BASE}{second.pk}/publish/", {"reason": "x"}, follow=True)


@pytest.mark.parametrize("sent", ["", "abc", "-1", "²"])
def test_a_rollback_sent_without_a_release_id_is_a_404(
    live: tuple[PromptOverride, PromptOverride, KBPackage],
    prompt_editor_client: Client,
    sent: str,
) -> None:
    published_twice(live, prompt_editor_client)

    refused = prompt_editor_client.post(f"{BASE}rollback/", {"release": sent})

    assert refused.status_code == 404
    assert list(Release.objects.order_by("pk").values_list("status", flat=True)) == [
        "superseded",
        "published",
    ]


def test_a_rollback_from_an_unknown_release_is_refused(
    live: tuple[PromptOverride, PromptOverride, KBPackage],
    prompt_editor_client: Client,
) -> None:
    published_twice(live, prompt_editor_client)
    sent = "9" * 20

    refused = prompt_editor_client.post(f"{BASE}rollback/", {"release": sent}, follow=True)

    assert texts(refused) == [
        "Este lançamento mudou nesse meio-tempo: recarregue a página.",
        f"O lançamento com ID “{sent}” não existe. Talvez tenha sido removido.",
    ]
    assert list(Release.objects.order_by("pk").values_list("status", flat=True)) == [
        "superseded",
        "published",
    ]


def test_a_draft_saved_from_a_read_that_a_step_overtook_is_refused_and_the_step_stays(
    live: tuple[PromptOverride, PromptOverride, KBPackage], prompt_editor_user: User
) -> None:
    _active, draft, _package = live
    replayed(NEW)
    release = triage_release(draft, "Março")
    # The change view read the draft; the publication commits before its save.
    stale = Release.objects.get(pk=release.pk)
    release_publish(release, user=prompt_editor_user)
    stale.name = "Outro"
    request = RequestFactory().post(f"{BASE}{release.pk}/change/")
    request.user = prompt_editor_user

    with pytest.raises(PermissionDenied):
        admin.site._registry[Release].save_model(request, stale, None, True)

    assert release_row(release.pk)[::4] == ("Março", "published")


def test_the_page_says_publishing_stops_a_gradual_release_even_when_nothing_else_changes(
    live: tuple[PromptOverride, PromptOverride, KBPackage], prompt_editor_client: Client
) -> None:
    active, draft, _package = live
    draft.rollout_percent = 30
    draft.save()
    release = triage_release(active, "Base")

    page = prompt_editor_client.get(f"{BASE}{release.pk}/change/").content.decode()

    assert (
        f'<p class="release-rollout" data-agent="triagem">Encerra a liberação aos poucos de '
        f"Triagem (#{draft.pk}, 30% das novas conversas).</p>"
    ) in page
    assert "Nada: este lançamento é o que já está no ar." not in page


def test_the_page_shows_a_package_change_outside_its_content(
    live: tuple[PromptOverride, PromptOverride, KBPackage], prompt_editor_client: Client
) -> None:
    _active, _draft, package = live
    package.title = "Potabilidade (saúde)"
    package.health_sensitive = True
    package.save()
    release = Release.objects.create(
        name="Saúde", prompts={}, packages={"POTABILIDADE": latest_version(KBPackage, package.pk)}
    )
    package.title = "Potabilidade"
    package.health_sensitive = False
    package.save()

    page = prompt_editor_client.get(f"{BASE}{release.pk}/change/").content.decode()

    assert (
        '<p class="release-package-field">Título: Potabilidade → Potabilidade (saúde)</p>'
    ) in page
    assert '<p class="release-package-field">Sensível à saúde: Não → Sim</p>' in page
    assert "Descrição de uma linha:" not in page
