"""With PROMPT_APPROVAL_REQUIRED, a prompt reaches customers only through an approved release
(docs/decisions/0060): the override page refuses any save that changes what new conversations
get (an activation, the active text edited or switched off, a gradual release started or
widened), and still saves drafts, notes and a gradual release narrowed or ended."""

from typing import Any

import pytest
from django.test import Client
from pytest_django import Settings

from prompts_admin.models import PromptOverride
from tests.helpers.replays import replayed

pytestmark = pytest.mark.django_db

BASE = "/admin/prompts_admin/promptoverride/"
CURRENT = "Atual de {{ agent_name }}."
CANDIDATE = "Candidata de {{ agent_name }}."
REFUSED = [
    "A aprovação é obrigatória (PROMPT_APPROVAL_REQUIRED): um prompt só chega aos clientes por "
    "um lançamento aprovado. Salve este texto inativo e depois prepare um lançamento com ele."
]


@pytest.fixture(autouse=True)
def approval_required(settings: Settings) -> None:
    settings.PROMPT_APPROVAL_REQUIRED = True


def data(**fields: str | None) -> dict[str, str]:
    values: dict[str, str | None] = {"agent": "triagem", "content": CANDIDATE, "note": ""}
    values.update(fields)
    return {k: v for k, v in values.items() if v is not None}


def refusal(response: Any) -> list[str]:
    assert response.status_code == 200
    return [str(e) for e in response.context["adminform"].form.non_field_errors()]


def row(override: PromptOverride) -> tuple[str, bool, int | None, int]:
    override.refresh_from_db()
    return (
        override.content,
        override.is_active,
        override.rollout_percent,
        override.history.count(),
    )


def test_a_new_override_is_saved_inactive_and_refused_active(
    prompt_editor_client: Client,
) -> None:
    replayed(CANDIDATE, calls=100)

    refused = prompt_editor_client.post(f"{BASE}add/", data(is_active="on"))
    saved = prompt_editor_client.post(f"{BASE}add/", data())

    assert refusal(refused) == REFUSED
    assert saved.status_code == 302
    assert list(PromptOverride.objects.values_list("content", "is_active")) == [(CANDIDATE, False)]


@pytest.mark.parametrize(
    "change",
    [
        {"content": "Outro texto de {{ agent_name }}."},
        {"is_active": None, "confirm_builtin": "on"},
        {"agent": "coleta", "confirm_builtin": "on"},
    ],
    ids=["text edited", "switched off", "moved to another agent"],
)
def test_the_active_override_is_not_changed_from_its_page(
    prompt_editor_client: Client, change: dict[str, str | None]
) -> None:
    current = PromptOverride.objects.create(agent="triagem", content=CURRENT, is_active=True)
    before = row(current)

    fields: dict[str, str | None] = {"content": CURRENT, "is_active": "on", **change}
    response = prompt_editor_client.post(f"{BASE}{current.pk}/change/", data(**fields))

    assert refusal(response) == REFUSED
    assert row(current) == before


def test_the_active_overrides_note_is_still_saved(prompt_editor_client: Client) -> None:
    current = PromptOverride.objects.create(agent="triagem", content=CURRENT, is_active=True)

    response = prompt_editor_client.post(
        f"{BASE}{current.pk}/change/", data(content=CURRENT, is_active="on", note="Revisado")
    )

    current.refresh_from_db()
    assert response.status_code == 302
    assert (current.note, current.is_active, current.content) == ("Revisado", True, CURRENT)


@pytest.mark.parametrize(
    ("before", "after", "saved"),
    [
        (None, "10", False),
        (30, "31", False),
        (30, "30", True),
        (30, "29", True),
        (30, "", True),
    ],
)
def test_a_gradual_release_is_not_started_or_widened_only_narrowed_or_ended(
    prompt_editor_client: Client, before: int | None, after: str, saved: bool
) -> None:
    PromptOverride.objects.create(agent="triagem", content=CURRENT, is_active=True)
    candidate = PromptOverride.objects.create(
        agent="triagem", content=CANDIDATE, rollout_percent=before
    )
    replayed(CANDIDATE, calls=100)
    expected = int(after) if after else None

    response = prompt_editor_client.post(
        f"{BASE}{candidate.pk}/change/", data(rollout_percent=after, change_reason="ajuste")
    )

    candidate.refresh_from_db()
    if saved:
        assert response.status_code == 302
        assert candidate.rollout_percent == expected
    else:
        assert refusal(response) == REFUSED
        assert candidate.rollout_percent == before


def test_without_approval_required_the_page_activates_as_before(
    prompt_editor_client: Client, settings: Settings
) -> None:
    settings.PROMPT_APPROVAL_REQUIRED = False
    replayed(CANDIDATE, calls=100)

    response = prompt_editor_client.post(f"{BASE}add/", data(is_active="on"))

    assert response.status_code == 302
    assert PromptOverride.objects.get().is_active is True
