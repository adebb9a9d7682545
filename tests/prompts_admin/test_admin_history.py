"""History through the admin: who changed what, a diff between any two versions, and revert."""

import html
import re

import pytest
from django.contrib.auth.models import User
from django.test import Client

from knowledge_base.models import KBPackage
from prompts_admin.models import PromptOverride

pytestmark = pytest.mark.django_db

BASE = "/admin/prompts_admin/promptoverride/"
DIFF_ROW_RE = re.compile(
    r'<tr class="diff-(added|removed|context)"><td class="diff-sign">[+-]?</td><td>([^<]*)</td></tr>'
)
FIELD_RE = re.compile(r'<tr class="diff-field" data-field="(\w+)">')


def form(**fields: str | None) -> dict[str, str]:
    data: dict[str, str | None] = {
        "agent": "triagem",
        "content": "Linha 1\nLinha 2\nLinha 3",
        "note": "",
        "is_active": "on",
        # These texts have no replay: each activation is confirmed (the activation gate,
        # tests/prompts_admin/test_activation_gate.py).
        "confirm_activation": "on",
        "change_reason": "teste",
    }
    data.update(fields)
    return {k: v for k, v in data.items() if v is not None}


@pytest.fixture
def three_versions(admin_client: Client) -> tuple[PromptOverride, list[int]]:
    """Created, its second line rewritten, then deactivated: three versions through the admin."""
    assert admin_client.post(BASE + "add/", form(note="v1")).status_code == 302
    override = PromptOverride.objects.get()
    url = f"{BASE}{override.pk}/change/"
    edited = "Linha 1\nLinha dois\nLinha 3"
    assert admin_client.post(url, form(content=edited, note="v2")).status_code == 302
    assert (
        admin_client.post(
            url, form(content=edited, note="v3", is_active=None, confirm_builtin="on")
        ).status_code
        == 302
    )
    versions = list(override.history.order_by("history_date").values_list("history_id", flat=True))
    return override, versions


def compare(client: Client, override: PromptOverride, query: str = "") -> str:
    response = client.get(f"{BASE}{override.pk}/history/compare/{query}")
    assert response.status_code == 200
    return response.content.decode()


def test_every_admin_save_is_a_version_with_its_author(
    admin_user: User, three_versions: tuple[PromptOverride, list[int]]
) -> None:
    override, _versions = three_versions
    records = override.history.order_by("history_date")
    assert [(r.history_type, r.note, r.history_user) for r in records] == [
        ("+", "v1", admin_user),
        ("~", "v2", admin_user),
        ("~", "v3", admin_user),
    ]


def test_compare_defaults_to_the_previous_version_against_the_latest(
    admin_client: Client, three_versions: tuple[PromptOverride, list[int]]
) -> None:
    override, (_v1, v2, v3) = three_versions
    page = compare(admin_client, override)
    assert FIELD_RE.findall(page) == ["is_active", "note"]
    assert "Ativo</th>" in page
    assert (
        '<span class="diff-removed">Sim</span> &rarr; <span class="diff-added">Não</span>' in page
    )
    assert f"Versão #{v2} (" in html.unescape(page)
    assert f"→ versão #{v3} (" in html.unescape(page)


def test_compare_shows_a_line_diff_of_the_prompt(
    admin_client: Client, three_versions: tuple[PromptOverride, list[int]]
) -> None:
    override, (v1, v2, _v3) = three_versions
    page = compare(admin_client, override, f"?old={v1}&new={v2}")
    assert FIELD_RE.findall(page) == ["content", "note"]
    assert DIFF_ROW_RE.findall(page) == [
        ("context", "Linha 1"),
        ("removed", "Linha 2"),
        ("added", "Linha dois"),
        ("context", "Linha 3"),
    ]


def test_compare_any_two_versions_not_only_neighbours(
    admin_client: Client, three_versions: tuple[PromptOverride, list[int]]
) -> None:
    override, (v1, _v2, v3) = three_versions
    page = compare(admin_client, override, f"?old={v1}&new={v3}")
    assert FIELD_RE.findall(page) == ["content", "is_active", "note"]


def test_comparing_a_version_with_itself_says_they_are_identical(
    admin_client: Client, three_versions: tuple[PromptOverride, list[int]]
) -> None:
    override, (v1, _v2, _v3) = three_versions
    page = compare(admin_client, override, f"?old={v1}&new={v1}")
    assert "As duas versões são idênticas." in page
    assert FIELD_RE.findall(page) == []


@pytest.mark.parametrize("query", ["?old=999999", "?new=abc"])
def test_compare_refuses_unknown_versions(
    admin_client: Client, three_versions: tuple[PromptOverride, list[int]], query: str
) -> None:
    override, _versions = three_versions
    assert admin_client.get(f"{BASE}{override.pk}/history/compare/{query}").status_code == 404


def test_compare_refuses_a_version_of_another_object(
    admin_client: Client, three_versions: tuple[PromptOverride, list[int]]
) -> None:
    override, _versions = three_versions
    other = PromptOverride.objects.create(agent="coleta", content="x")
    foreign = other.history.get().history_id
    response = admin_client.get(f"{BASE}{override.pk}/history/compare/?old={foreign}")
    assert response.status_code == 404


def test_history_page_offers_the_compare_form_with_two_versions_preselected(
    admin_client: Client, three_versions: tuple[PromptOverride, list[int]]
) -> None:
    override, (_v1, v2, v3) = three_versions
    page = admin_client.get(f"{BASE}{override.pk}/history/").content.decode()
    assert f'action="{BASE}{override.pk}/history/compare/"' in page
    checked = re.findall(r'name="(old|new)" value="(\d+)"[^>]* checked', page)
    assert checked == [("new", str(v3)), ("old", str(v2))]
    assert "Comparar as versões selecionadas" in page


def test_revert_restores_an_old_version_as_a_new_one(
    admin_client: Client, admin_user: User, three_versions: tuple[PromptOverride, list[int]]
) -> None:
    override, (v1, _v2, _v3) = three_versions
    revert_url = f"{BASE}{override.pk}/history/{v1}/"
    page = admin_client.get(revert_url).content.decode()
    assert "Linha 2" in page  # the form holds version 1's text
    response = admin_client.post(revert_url, form(note="revert to v1"))
    assert response.status_code == 302
    override.refresh_from_db()
    assert (override.content, override.is_active) == ("Linha 1\nLinha 2\nLinha 3", True)
    latest = override.history.latest()
    assert (override.history.count(), latest.history_user, latest.note) == (
        4,
        admin_user,
        "revert to v1",
    )


def test_compare_page_links_to_revert_the_older_version(
    admin_client: Client, three_versions: tuple[PromptOverride, list[int]]
) -> None:
    override, (v1, v2, _v3) = three_versions
    page = compare(admin_client, override, f"?old={v1}&new={v2}")
    assert f'href="{BASE}{override.pk}/history/{v1}/"' in page


def test_support_cannot_compare_prompt_versions(
    support_client: Client, three_versions: tuple[PromptOverride, list[int]]
) -> None:
    override, _versions = three_versions
    assert support_client.get(f"{BASE}{override.pk}/history/compare/").status_code == 403


def test_support_compares_package_versions_without_a_revert_link(support_client: Client) -> None:
    package = KBPackage.objects.create(
        package_id="PRAZOS_E_ENTREGA", title="Prazos", description="d", content="7 dias"
    )
    package.content = "5 dias"
    package.save()
    response = support_client.get(f"/admin/knowledge_base/kbpackage/{package.pk}/history/compare/")
    page = response.content.decode()
    assert response.status_code == 200
    assert (
        '<span class="diff-removed">7 dias</span> &rarr; <span class="diff-added">5 dias</span>'
        in page
    )
    assert "/history/" + str(package.history.earliest().history_id) + "/" not in page


def test_the_history_list_shows_booleans_as_sim_nao(
    admin_client: Client, three_versions: tuple[PromptOverride, list[int]]
) -> None:
    override, _versions = three_versions
    page = admin_client.get(f"{BASE}{override.pk}/history/").content.decode()

    assert "<li><strong>Ativo:</strong> Sim&nbsp;&rarr;&nbsp;Não</li>" in page
    assert "True" not in page
    assert "False" not in page


# --- Revert keeps the "active" flag; leaving an agent on the built-in prompt is confirmed -------

LEAVES_BUILTIN = (
    "Ao salvar, o agente triagem volta ao prompt padrão: este é o prompt personalizado ativo "
    "dele. Marque “Deixar o agente no prompt padrão” e salve de novo para confirmar."
)


def test_the_revert_form_starts_with_the_current_active_flag(
    admin_client: Client, three_versions: tuple[PromptOverride, list[int]]
) -> None:
    override, (v1, _v2, _v3) = three_versions  # active in v1, inactive now
    page = admin_client.get(f"{BASE}{override.pk}/history/{v1}/")

    assert page.context["adminform"].form.initial["is_active"] is False
    assert page.context["adminform"].form.initial["content"] == "Linha 1\nLinha 2\nLinha 3"
    assert 'name="is_active" id="id_is_active" checked' not in page.content.decode()


def test_reverting_the_text_of_the_active_override_keeps_it_active(admin_client: Client) -> None:
    assert admin_client.post(BASE + "add/", form(note="v1")).status_code == 302
    override = PromptOverride.objects.get()
    url = f"{BASE}{override.pk}/change/"
    assert admin_client.post(url, form(content="Novo", note="v2")).status_code == 302
    v1 = override.history.earliest().history_id
    # An old version that was inactive: the form starts active, as the override is now.
    PromptOverride.history.filter(history_id=v1).update(is_active=False)

    page = admin_client.get(f"{BASE}{override.pk}/history/{v1}/")
    assert page.context["adminform"].form.initial["is_active"] is True
    data = {k: str(v) for k, v in page.context["adminform"].form.initial.items() if v}
    data |= {"is_active": "on", "confirm_activation": "on", "change_reason": "teste"}
    response = admin_client.post(f"{BASE}{override.pk}/history/{v1}/", data | {"note": "volta"})

    assert response.status_code == 302
    override.refresh_from_db()
    assert (override.content, override.is_active, override.note) == (
        "Linha 1\nLinha 2\nLinha 3",
        True,
        "volta",
    )


def test_deactivating_the_active_override_asks_for_confirmation_first(
    admin_client: Client,
) -> None:
    override = PromptOverride.objects.create(agent="triagem", content="Oi", is_active=True)
    url = f"{BASE}{override.pk}/change/"

    refused = admin_client.post(url, form(content="Oi", is_active=None))

    assert refused.status_code == 200
    errors = refused.context["adminform"].form.errors
    assert errors == {"confirm_builtin": [LEAVES_BUILTIN]}
    html_page = refused.content.decode()
    assert '<input type="checkbox" name="confirm_builtin" aria-invalid="true"' in html_page
    assert "Deixar o agente no prompt padrão" in html_page
    override.refresh_from_db()
    assert (override.is_active, override.history.count()) == (True, 1)

    confirmed = admin_client.post(url, form(content="Oi", is_active=None, confirm_builtin="on"))

    assert confirmed.status_code == 302
    override.refresh_from_db()
    assert override.is_active is False


def test_moving_the_active_override_to_another_agent_asks_for_confirmation(
    admin_client: Client,
) -> None:
    override = PromptOverride.objects.create(agent="triagem", content="Oi", is_active=True)

    refused = admin_client.post(f"{BASE}{override.pk}/change/", form(agent="coleta", content="Oi"))

    assert refused.context["adminform"].form.errors == {"confirm_builtin": [LEAVES_BUILTIN]}
    assert PromptOverride.objects.get().agent == "triagem"


def test_the_confirmation_box_is_hidden_when_nothing_leaves_the_built_in_prompt(
    admin_client: Client,
) -> None:
    draft = PromptOverride.objects.create(agent="triagem", content="Oi", is_active=False)
    active = PromptOverride.objects.create(agent="coleta", content="Oi", is_active=True)

    page = admin_client.get(f"{BASE}{draft.pk}/change/").content.decode()
    edited_draft = admin_client.post(
        f"{BASE}{draft.pk}/change/", form(content="Oi", is_active=None)
    )
    edited_active = admin_client.post(
        f"{BASE}{active.pk}/change/", form(agent="coleta", content="Novo")
    )

    assert '<div class="form-row hidden field-confirm_builtin">' in page
    assert 'type="checkbox" name="confirm_builtin"' not in page
    assert (edited_draft.status_code, edited_active.status_code) == (302, 302)
    assert PromptOverride.objects.get(pk=active.pk).is_active is True


def test_reverting_an_active_override_to_an_inactive_version_asks_for_confirmation(
    admin_client: Client, three_versions: tuple[PromptOverride, list[int]]
) -> None:
    override, (v1, _v2, _v3) = three_versions
    PromptOverride.objects.filter(pk=override.pk).update(is_active=True)

    refused = admin_client.post(f"{BASE}{override.pk}/history/{v1}/", form(is_active=None))

    assert refused.status_code == 200
    assert refused.context["adminform"].form.errors == {"confirm_builtin": [LEAVES_BUILTIN]}
    assert PromptOverride.objects.get().is_active is True


def test_after_a_refused_save_the_header_shows_the_override_as_stored(
    admin_client: Client,
) -> None:
    override = PromptOverride.objects.create(agent="triagem", content="Oi", is_active=True)

    refused = admin_client.post(f"{BASE}{override.pk}/change/", form(content="Oi", is_active=None))

    page = refused.content.decode()
    assert refused.status_code == 200
    assert f"<title>Erro: Triagem (ativo) #{override.pk} | Modificar prompt personalizado" in page
    assert f"<h2>Triagem (ativo) #{override.pk}</h2>" in page
    assert "(inativo)" not in page
    assert refused.context["adminform"].form.instance.is_active is False  # the posted value


def test_the_history_list_shows_the_first_changed_line_of_a_long_prompt(
    admin_client: Client,
) -> None:
    long_line = "Você é Lia, assistente " + "x" * 100
    base = "\n".join(["Cabeçalho"] * 60 + [long_line, "Fim"])
    assert admin_client.post(BASE + "add/", form(content=base)).status_code == 302
    override = PromptOverride.objects.get()
    url = f"{BASE}{override.pk}/change/"
    edited = base.replace("Você é Lia", "Você é <Ana>")
    assert admin_client.post(url, form(content=edited)).status_code == 302
    assert admin_client.post(url, form(content=edited + "\n\nNova")).status_code == 302

    page = admin_client.get(f"{BASE}{override.pk}/history/").content.decode()

    old61 = html.escape("linha 61: " + long_line[:79] + "…", quote=False)
    new61 = html.escape("linha 61: " + edited.splitlines()[60][:79] + "…", quote=False)
    assert f"<li><strong>Conteúdo:</strong> {old61}&nbsp;&rarr;&nbsp;{new61}</li>" in page
    assert (
        "<li><strong>Conteúdo:</strong> linha 63: (não existe)&nbsp;&rarr;&nbsp;"
        "linha 63: (linha vazia)</li>"
    ) in page
    assert "chars]" not in page
