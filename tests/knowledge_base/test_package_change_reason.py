"""A knowledge package's form takes a change reason, as the custom prompt's does
(`versioning.forms.ChangeReasonForm`): the new version records it and the history page shows it in
its own column; none typed records none."""

import pytest
from django.test import Client

from knowledge_base.models import KBPackage
from prompts_admin.models import PromptOverride

pytestmark = pytest.mark.django_db

PACKAGES = "/admin/knowledge_base/kbpackage/"
OVERRIDES = "/admin/prompts_admin/promptoverride/"


@pytest.fixture
def package() -> KBPackage:
    return KBPackage.objects.create(
        package_id="PREPARO", title="Preparo", description="Preparo de exames", content="Jejum"
    )


def package_form(**fields: str) -> dict[str, str]:
    return {
        "package_id": "PREPARO",
        "title": "Preparo",
        "description": "Preparo de exames",
        "content": "Jejum de 8 horas",
        "is_active": "on",
        **fields,
    }


def reasons(package: KBPackage) -> list[str | None]:
    """The change reasons of the package's versions, oldest first."""
    return list(
        package.history.order_by("history_date", "history_id").values_list(
            "history_change_reason", flat=True
        )
    )


def test_the_package_form_offers_the_change_reason_in_pt_br(
    admin_client: Client, package: KBPackage
) -> None:
    page = admin_client.get(f"{PACKAGES}{package.pk}/change/").content.decode()

    assert '<label for="id_change_reason">Motivo da alteração:</label>' in page
    assert (
        "Por que você altera, em poucas palavras: o histórico mostra o motivo ao lado da versão."
    ) in page


def test_a_change_reason_goes_to_the_new_version_and_the_history_column(
    admin_client: Client, package: KBPackage
) -> None:
    response = admin_client.post(
        f"{PACKAGES}{package.pk}/change/",
        package_form(change_reason="  Jejum corrigido pelo laboratório  "),
    )

    assert response.status_code == 302
    assert reasons(package) == [None, "Jejum corrigido pelo laboratório"]
    page = admin_client.get(f"{PACKAGES}{package.pk}/history/").content.decode()
    assert '<th scope="col">Motivo da alteração</th>' in page
    assert '<td class="history-change-reason">Jejum corrigido pelo laboratório</td>' in page


def test_no_change_reason_records_none(admin_client: Client, package: KBPackage) -> None:
    response = admin_client.post(
        f"{PACKAGES}{package.pk}/change/", package_form(change_reason="   ")
    )

    assert response.status_code == 302
    assert reasons(package) == [None, None]


@pytest.mark.parametrize(("length", "saved"), [(254, True), (255, True), (256, False)])
def test_the_change_reason_holds_at_most_255_characters(
    admin_client: Client, package: KBPackage, length: int, saved: bool
) -> None:
    response = admin_client.post(
        f"{PACKAGES}{package.pk}/change/", package_form(change_reason="r" * length)
    )

    assert (response.status_code, reasons(package)) == (
        (302, [None, "r" * length]) if saved else (200, [None])
    )


def test_a_custom_prompt_edit_records_its_change_reason_too(admin_client: Client) -> None:
    override = PromptOverride.objects.create(agent="triagem", content="Oi")

    response = admin_client.post(
        f"{OVERRIDES}{override.pk}/change/",
        {"agent": "triagem", "content": "Olá", "note": "", "change_reason": "Saudação mais formal"},
    )

    assert response.status_code == 302
    page = admin_client.get(f"{OVERRIDES}{override.pk}/history/").content.decode()
    assert '<td class="history-change-reason">Saudação mais formal</td>' in page
