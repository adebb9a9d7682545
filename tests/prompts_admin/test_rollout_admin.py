"""Releasing an override gradually from its admin page (docs/decisions/0057): an editor starts
it at a share of the new conversations, changes the share, stops it, or raises it to 100%, which
makes it the active override through the activation gate and deactivates the one active before;
each with its change reason in the history."""

import threading
import time
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone

from conversations.models import Instance
from governance.rollout_pause import rollout_pauses_check
from prompts_admin.admin import PromptOverrideAdmin
from prompts_admin.models import PromptOverride
from tests.governance.test_rollout_pause import release
from tests.helpers.replays import replayed
from tests.helpers.staff import logged_in, staff_member

pytestmark = pytest.mark.django_db

BASE = "/admin/prompts_admin/promptoverride/"
CURRENT = "Atual de {{ agent_name }}."
CANDIDATE = "Candidata de {{ agent_name }}."
REASON = "Testar com parte dos clientes"


def overrides() -> tuple[PromptOverride, PromptOverride]:
    """The agent's active override and an inactive one, each saved with history."""
    current = PromptOverride.objects.create(agent="triagem", content=CURRENT, is_active=True)
    candidate = PromptOverride.objects.create(agent="triagem", content=CANDIDATE)
    return current, candidate


def form(**fields: str | None) -> dict[str, str]:
    data: dict[str, str | None] = {"agent": "triagem", "content": CANDIDATE, "note": ""}
    data.update(fields)
    return {k: v for k, v in data.items() if v is not None}


def post(client: Client, override: PromptOverride, **fields: str | None) -> Any:
    return client.post(f"{BASE}{override.pk}/change/", form(**fields))


def errors_of(response: Any) -> dict[str, list[str]]:
    assert response.status_code == 200
    errors: dict[str, list[str]] = response.context["adminform"].form.errors
    return errors


def reasons(override: PromptOverride) -> list[str | None]:
    return list(
        PromptOverride.history.filter(id=override.pk)
        .order_by("history_id")
        .values_list("history_change_reason", flat=True)
    )


def state(override: PromptOverride) -> tuple[bool, int | None]:
    override.refresh_from_db()
    return override.is_active, override.rollout_percent


def test_the_page_shows_the_release_section_in_portuguese(prompt_editor_client: Client) -> None:
    _current, candidate = overrides()

    page = prompt_editor_client.get(f"{BASE}{candidate.pk}/change/").content.decode()

    assert "Liberar aos poucos" in page
    assert "Porcentagem das novas conversas" in page


def test_an_editor_starts_changes_and_stops_a_release_with_history(
    prompt_editor_client: Client,
) -> None:
    _current, candidate = overrides()
    replayed(CANDIDATE, calls=100)

    started = post(prompt_editor_client, candidate, rollout_percent="20", change_reason=REASON)
    after_start = state(candidate)
    changed = post(prompt_editor_client, candidate, rollout_percent="50")
    after_change = state(candidate)
    stopped = post(prompt_editor_client, candidate, rollout_percent="")

    assert [started.status_code, changed.status_code, stopped.status_code] == [302, 302, 302]
    assert after_start == (False, 20)
    assert after_change == (False, 50)
    assert state(candidate) == (False, None)
    assert reasons(candidate) == [
        None,
        "Liberação aos poucos iniciada em 20% das novas conversas: Testar com parte dos clientes",
        "Liberação aos poucos alterada de 20% para 50%",
        "Liberação aos poucos interrompida em 50%",
    ]


@pytest.mark.parametrize(
    ("percent", "stored"),
    [("1", 1), ("99", 99)],
)
def test_the_share_runs_from_1_to_99(
    prompt_editor_client: Client, percent: str, stored: int
) -> None:
    _current, candidate = overrides()
    replayed(CANDIDATE, calls=100)

    assert post(prompt_editor_client, candidate, rollout_percent=percent).status_code == 302
    assert state(candidate) == (False, stored)


def test_starting_a_release_without_a_replay_is_refused_by_the_gate_then_confirmed(
    prompt_editor_client: Client,
) -> None:
    _current, candidate = overrides()

    refused = post(prompt_editor_client, candidate, rollout_percent="20")
    refused_state = state(candidate)
    unreasoned = post(
        prompt_editor_client, candidate, rollout_percent="20", confirm_activation="on"
    )
    confirmed = post(
        prompt_editor_client,
        candidate,
        rollout_percent="20",
        confirm_activation="on",
        change_reason=REASON,
    )

    assert list(errors_of(refused)) == ["confirm_activation"]
    assert refused_state == (False, None)
    assert list(errors_of(unreasoned)) == ["change_reason"]
    assert confirmed.status_code == 302
    assert state(candidate) == (False, 20)
    assert reasons(candidate)[-1] == (
        "Liberação aos poucos iniciada em 20% das novas conversas: Testar com parte dos clientes"
    )


def test_a_released_text_changed_is_weighed_by_the_gate_again(
    prompt_editor_client: Client,
) -> None:
    _current, candidate = overrides()
    candidate.rollout_percent = 20
    candidate.save()

    changed = post(
        prompt_editor_client, candidate, content="Outra de {{ agent_name }}.", rollout_percent="20"
    )
    same_text = post(prompt_editor_client, candidate, rollout_percent="30")

    assert list(errors_of(changed)) == ["confirm_activation"]
    assert same_text.status_code == 302
    assert state(candidate) == (False, 30)


@pytest.mark.parametrize(
    ("percent", "error"),
    [
        ("0", "Certifique-se que este valor seja maior ou igual a 1."),
        ("-1", "Certifique-se que este valor seja maior ou igual a 1."),
        ("101", "Certifique-se que este valor seja menor ou igual a 100."),
        ("99999999999999999999", "Certifique-se que este valor seja menor ou igual a 100."),
        ("12.5", "Informe um número inteiro."),
        ("1e2", "Informe um número inteiro."),
        ("metade", "Informe um número inteiro."),
        ("\x00", "Informe um número inteiro."),
    ],
)
def test_a_share_outside_1_to_100_is_refused(
    prompt_editor_client: Client, percent: str, error: str
) -> None:
    _current, candidate = overrides()

    response = post(prompt_editor_client, candidate, rollout_percent=percent)

    assert errors_of(response) == {"rollout_percent": [error]}
    assert state(candidate) == (False, None)


def test_the_active_override_is_not_released_gradually(prompt_editor_client: Client) -> None:
    current, _candidate = overrides()

    response = post(
        prompt_editor_client, current, content=CURRENT, is_active="on", rollout_percent="30"
    )

    assert errors_of(response) == {
        "rollout_percent": [
            "Um prompt personalizado ativo já é a versão de todas as novas conversas: esvazie a "
            "porcentagem, ou desmarque “ativo”."
        ]
    }
    assert state(current) == (True, None)


def test_one_release_per_agent(prompt_editor_client: Client) -> None:
    _current, candidate = overrides()
    replayed(CANDIDATE, calls=100)
    other = PromptOverride.objects.create(agent="triagem", content="Outra.", rollout_percent=10)

    response = post(prompt_editor_client, candidate, rollout_percent="30")

    assert errors_of(response) == {
        "__all__": ["Outro prompt personalizado deste agente já está sendo liberado aos poucos."]
    }
    assert (state(candidate), state(other)) == ((False, None), (False, 10))


def test_100_percent_of_an_override_not_released_is_refused(prompt_editor_client: Client) -> None:
    _current, candidate = overrides()

    response = post(prompt_editor_client, candidate, rollout_percent="100")

    assert errors_of(response) == {
        "rollout_percent": [
            "Libere-o antes para parte das novas conversas (1 a 99), ou marque “ativo” para "
            "torná-lo a versão ativa agora."
        ]
    }
    assert state(candidate) == (False, None)


def test_raising_to_100_without_a_replay_is_refused_by_the_gate_then_confirmed(
    prompt_editor_client: Client,
) -> None:
    current, candidate = overrides()
    candidate.rollout_percent = 50
    candidate.save()

    refused = post(prompt_editor_client, candidate, rollout_percent="100")
    refused_state = (state(current), state(candidate))
    confirmed = post(
        prompt_editor_client,
        candidate,
        rollout_percent="100",
        confirm_activation="on",
        change_reason=REASON,
    )

    assert list(errors_of(refused)) == ["confirm_activation"]
    assert refused_state == ((True, None), (False, 50))
    assert confirmed.status_code == 302
    assert (state(current), state(candidate)) == ((False, None), (True, None))
    assert reasons(candidate)[-1] == (
        "Ativado sem teste em conversas gravadas: Testar com parte dos clientes"
    )
    assert reasons(current)[-1] == (
        f"Substituído pelo #{candidate.pk}, liberado para todas as novas conversas"
    )


def test_raising_to_100_with_a_replay_within_the_limits_activates(
    prompt_editor_client: Client,
) -> None:
    current, candidate = overrides()
    candidate.rollout_percent = 50
    candidate.save()
    run = replayed(CANDIDATE, calls=100)

    response = post(prompt_editor_client, candidate, rollout_percent="100")

    assert response.status_code == 302
    assert (state(current), state(candidate)) == ((False, None), (True, None))
    assert reasons(candidate)[-1] == f"Ativado com o teste #{run.pk}"
    assert list(PromptOverride.objects.filter(is_active=True).values_list("pk", flat=True)) == [
        candidate.pk
    ]


def test_support_cannot_start_a_release(support_client: Client) -> None:
    _current, candidate = overrides()

    response = post(support_client, candidate, rollout_percent="20")

    assert response.status_code == 403
    assert state(candidate) == (False, None)


def test_the_revert_page_starts_from_the_share_as_it_is_now(prompt_editor_client: Client) -> None:
    _current, candidate = overrides()
    candidate.rollout_percent = 30
    candidate.save()
    released = candidate.history.latest().history_id
    candidate.rollout_percent = None
    candidate.save()

    page = prompt_editor_client.get(f"{BASE}{candidate.pk}/history/{released}/")

    assert page.status_code == 200
    assert page.context["adminform"].form.initial["rollout_percent"] is None


# --- Resuming a paused release ------------------------------------------------------------------

PAUSE_REASON = (
    "Liberação aos poucos pausada automaticamente: transferências 30% (110 conversas) "
    "contra 10% (90 conversas), margem de 5 pontos"
)


def running(percent: int = 20) -> PromptOverride:
    _current, candidate = overrides()
    candidate.rollout_percent = percent
    candidate.save()
    return candidate


def pause(candidate: PromptOverride) -> None:
    """The automatic pause as `governance.rollout_pause` writes it."""
    candidate.refresh_from_db()
    candidate.rollout_paused_at = timezone.now()
    candidate.rollout_pause_reason = PAUSE_REASON
    candidate.save()


def rendered(client: Client, override: PromptOverride) -> dict[str, str]:
    """The hidden values of the override's page as its editor's browser would post them back."""
    form = client.get(f"{BASE}{override.pk}/change/").context["adminform"].form
    return {"rollout_pause_seen": str(form["rollout_pause_seen"].value() or "")}


def paused(override: PromptOverride) -> tuple[int | None, bool, str]:
    override.refresh_from_db()
    return (
        override.rollout_percent,
        override.rollout_paused_at is not None,
        override.rollout_pause_reason,
    )


def test_saving_the_page_of_a_paused_release_resumes_it(prompt_editor_client: Client) -> None:
    candidate = running(20)
    pause(candidate)
    seen = rendered(prompt_editor_client, candidate)

    response = post(prompt_editor_client, candidate, rollout_percent="20", **seen)

    assert response.status_code == 302
    assert paused(candidate) == (20, False, "")


def test_a_release_paused_while_its_page_was_open_is_not_resumed_by_that_page(
    prompt_editor_client: Client,
) -> None:
    candidate = running(20)
    seen = rendered(prompt_editor_client, candidate)  # opened before the pause
    pause(candidate)
    versions = candidate.history.count()

    refused = post(prompt_editor_client, candidate, rollout_percent="50", **seen)
    refused_state = (paused(candidate), candidate.history.count())
    again = {"rollout_pause_seen": refused.context["adminform"].form["rollout_pause_seen"].value()}
    resumed = post(prompt_editor_client, candidate, rollout_percent="50", **again)

    assert errors_of(refused) == {
        "rollout_percent": [
            "Esta liberação foi pausada automaticamente enquanto a página estava aberta (o "
            "motivo está abaixo): salve de novo para retomá-la, ou esvazie a porcentagem para "
            "encerrá-la."
        ]
    }
    assert refused_state == ((20, True, PAUSE_REASON), versions)
    assert resumed.status_code == 302
    assert paused(candidate) == (50, False, "")


def test_a_page_posted_without_what_it_showed_does_not_resume_a_paused_release(
    prompt_editor_client: Client,
) -> None:
    candidate = running(20)
    pause(candidate)

    refused = post(prompt_editor_client, candidate, rollout_percent="20")

    assert list(errors_of(refused)) == ["rollout_percent"]
    assert paused(candidate) == (20, True, PAUSE_REASON)


def test_a_release_paused_meanwhile_may_still_be_ended_after_the_editor_sees_it(
    prompt_editor_client: Client,
) -> None:
    candidate = running(20)
    seen = rendered(prompt_editor_client, candidate)
    pause(candidate)

    refused = post(prompt_editor_client, candidate, rollout_percent=None, **seen)
    again = {"rollout_pause_seen": refused.context["adminform"].form["rollout_pause_seen"].value()}
    ended = post(prompt_editor_client, candidate, rollout_percent=None, **again)

    assert list(errors_of(refused)) == ["rollout_percent"]
    assert ended.status_code == 302
    assert paused(candidate) == (None, False, "")


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_pause_landing_during_an_editors_save_is_kept(
    instance: Instance, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The editor raises the share (page opened before any pause) while the beat's check
    pauses the release, each in a thread with its own connection; the save is held after its
    form was checked, the moment a pause written then was lost: the form's row lock makes the
    check wait for the save, then pause."""
    candidate = release(instance, candidate_handoffs=33, current_handoffs=9)  # 50%, worse
    # Permissions, not the group: a transactional test's flush drops the migrations' groups.
    client = logged_in(
        staff_member(
            permissions=(
                "prompts_admin.view_promptoverride",
                "prompts_admin.change_promptoverride",
            )
        )
    )
    seen = rendered(client, candidate)
    in_save, go = threading.Event(), threading.Event()
    save_model = PromptOverrideAdmin.save_model

    def held_save_model(self: Any, request: Any, obj: Any, form: Any, change: bool) -> None:
        in_save.set()
        go.wait(10)
        save_model(self, request, obj, form, change)

    monkeypatch.setattr(PromptOverrideAdmin, "save_model", held_save_model)
    saved: list[int] = []
    paused_ids: list[list[int]] = []

    def edit() -> None:
        try:
            data = form(content="Nova.", rollout_percent="60") | seen
            saved.append(client.post(f"{BASE}{candidate.pk}/change/", data).status_code)
        finally:
            connection.close()

    def check() -> None:
        try:
            in_save.wait(10)
            paused_ids.append(rollout_pauses_check())
        finally:
            connection.close()

    threads = [threading.Thread(target=edit), threading.Thread(target=check)]
    for thread in threads:
        thread.start()
    in_save.wait(10)
    time.sleep(0.5)  # the check runs meanwhile, up to the row lock
    go.set()
    for thread in threads:
        thread.join()

    assert (saved, paused_ids) == ([302], [[candidate.pk]])
    candidate.refresh_from_db()
    assert (candidate.rollout_percent, candidate.rollout_pause_reason) == (60, PAUSE_REASON)
    assert reasons(candidate)[-2:] == [
        "Liberação aos poucos alterada de 50% para 60%",
        PAUSE_REASON,
    ]


def test_a_paused_release_raised_to_100_from_its_page_becomes_the_active_version(
    prompt_editor_client: Client,
) -> None:
    candidate = running(50)
    current = PromptOverride.objects.get(is_active=True)
    replayed(CANDIDATE, calls=100)
    pause(candidate)
    seen = rendered(prompt_editor_client, candidate)

    response = post(prompt_editor_client, candidate, rollout_percent="100", **seen)

    assert response.status_code == 302
    assert (state(current), state(candidate)) == ((False, None), (True, None))
    assert paused(candidate) == (None, False, "")


def test_the_revert_page_shows_the_pause_as_it_is_now_and_resumes_from_it(
    prompt_editor_client: Client,
) -> None:
    candidate = running(20)
    before_pause = candidate.history.latest().history_id
    pause(candidate)
    candidate.refresh_from_db()
    revert = f"{BASE}{candidate.pk}/history/{before_pause}/"

    shown = prompt_editor_client.get(revert).context["adminform"].form
    seen = {"rollout_pause_seen": str(shown["rollout_pause_seen"].value())}
    response = prompt_editor_client.post(revert, form(rollout_percent="20") | seen)

    assert candidate.rollout_paused_at is not None
    assert seen == {"rollout_pause_seen": candidate.rollout_paused_at.isoformat()}
    assert response.status_code == 302
    assert paused(candidate) == (20, False, "")
