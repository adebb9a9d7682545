"""The gradual release on the metrics page (governance.outcomes_admin.release_comparison): the
candidate and the current version side by side, counted by the automatic pause's
`release_sides`, running or paused; and the runs `releases` finds."""

import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.utils import timezone
from pytest_django import DjangoAssertNumQueries

from conversations.models import Instance, Session
from governance.rollout_pause import release_sides, releases, rollout_pauses_check
from prompts_admin.models import PromptOverride
from tests import baker_recipes as recipes
from tests.governance.test_rollout_pause import release, version_of
from tests.helpers.staff import logged_in

pytestmark = pytest.mark.django_db

URL = "/admin/governance/metrics/"
REASON = (
    "Liberação aos poucos pausada automaticamente: transferências 30% (110 conversas) "
    "contra 10% (90 conversas), margem de 5 pontos"
)


def row_texts(section: str) -> list[list[str]]:
    """The rows of an HTML fragment, each as its cells' texts (tags stripped, spaces folded)."""
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", section, flags=re.S)
    return [
        [
            " ".join(re.sub(r"<[^>]+>", " ", cell).split())
            for cell in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row, flags=re.S)
        ]
        for row in rows
    ]


def sides_table(html: str) -> list[list[str]]:
    """The rows of the side-by-side table, header first."""
    return row_texts(html.split('id="release-sides"', 1)[1].split("</table>", 1)[0])


def status(html: str) -> str:
    section = html.split('class="release-status">', 1)[1].split("</p>", 1)[0]
    return " ".join(re.sub(r"<[^>]+>", " ", section).split())


def local(moment: object) -> str:
    assert moment is not None
    return timezone.localtime(moment).strftime("%d/%m/%Y %H:%M")  # type: ignore[arg-type]


def test_a_running_release_shows_its_two_sides(
    instance: Instance, prompt_editor_client: Client
) -> None:
    candidate = release(instance, candidate_handoffs=33, current_handoffs=9)

    html = prompt_editor_client.get(URL + "?agent=triagem").content.decode()

    assert sides_table(html) == [
        ["", f"Candidata: prompt personalizado #{candidate.pk}", "Versão atual"],
        ["Porcentagem das novas conversas", "50 %", "50 %"],
        ["Conversas", "110", "90"],
        ["Taxa de transferência", "30,0 %", "10,0 %"],
        ["Erros de contrato por conversa", "0,0 %", "0,0 %"],
    ]
    assert status(html) == (
        "Em andamento. Ela pausa sozinha se a candidata transferir ou quebrar o contrato mais "
        "que a versão atual."
    )
    started = local(candidate.history.earliest().history_date)
    assert (
        f"Conversas reais criadas desde o começo da liberação ({started}), qualquer que seja o "
        "período acima"
    ) in " ".join(html.split())
    assert (
        '<h2 id="release-comparison-title">Liberação aos poucos do prompt do agente triagem</h2>'
        in html
    )
    assert (
        f'<a href="/admin/prompts_admin/promptoverride/{candidate.pk}/change/">Abrir a candidata</a>'
        in html
    )


def test_a_paused_release_shows_its_pause_and_the_sides_until_it(
    instance: Instance, prompt_editor_client: Client
) -> None:
    candidate = release(
        instance, candidate_handoffs=20, current_handoffs=15, candidate_reason="llm_invalid_json"
    )
    rollout_pauses_check()
    candidate.refresh_from_db()
    assert candidate.rollout_paused_at is not None
    # Two conversations of the current version: just before the pause (counted) and at it (not).
    current = PromptOverride.objects.get(is_active=True)
    for pk, at in (
        (201, candidate.rollout_paused_at - timedelta(microseconds=1)),
        (202, candidate.rollout_paused_at),
    ):
        recipes.session.make(
            instance=instance, pk=pk, prompt_versions={"triagem": version_of(current)}
        )
        Session.objects.filter(pk=pk).update(created_at=at)

    html = prompt_editor_client.get(URL + "?agent=triagem").content.decode()

    assert sides_table(html)[1:] == [
        ["Porcentagem das novas conversas", "50 % (pausada)", "50 %"],
        ["Conversas", "110", "91"],
        ["Taxa de transferência", "18,2 %", "16,5 %"],
        ["Erros de contrato por conversa", "18,2 %", "0,0 %"],
    ]
    assert status(html) == (
        f"Pausada em {local(candidate.rollout_paused_at)}. "
        "Liberação aos poucos pausada automaticamente: erros de contrato 18% (110 conversas) "
        "contra 0% (90 conversas), margem de 5 pontos"
    )
    assert "do começo da liberação" in html
    assert 'class="release-comparison paused"' in html


def test_an_agent_without_a_release_shows_none(
    instance: Instance, prompt_editor_client: Client
) -> None:
    release(instance, candidate_handoffs=33, current_handoffs=9)

    html = prompt_editor_client.get(URL + "?agent=qualificacao").content.decode()

    assert "release-comparison" not in html


def test_the_release_costs_three_queries(
    instance: Instance, prompt_editor_user: User, django_assert_num_queries: DjangoAssertNumQueries
) -> None:
    release(instance, candidate_handoffs=33, current_handoffs=9)
    client = logged_in(prompt_editor_user)
    client.get(URL)
    # The session, the user, the user's permissions (groups and own); the metrics without an
    # agent call in the period (one query, and `SET LOCAL jit = off` on PostgreSQL); the
    # release: the candidate, its history, the sides' aggregate.
    metrics = 2 if connection.vendor == "postgresql" else 1

    with django_assert_num_queries(4 + metrics + 3):
        html = client.get(URL).content.decode()

    assert sides_table(html)[2] == ["Conversas", "110", "90"]


def test_a_resumed_release_counts_from_its_resume(instance: Instance) -> None:
    candidate = release(instance, candidate_handoffs=33, current_handoffs=9)
    rollout_pauses_check()
    candidate.refresh_from_db()
    candidate.rollout_paused_at, candidate.rollout_pause_reason = None, ""
    candidate.save()  # what the override's page does on a save with the share
    resumed_at = candidate.history.latest().history_date

    [run] = [r for r in releases(include_paused=True) if r.override_id == candidate.pk]
    [sides] = release_sides([run])

    assert (run.started_at, run.paused_at) == (resumed_at, None)
    assert (sides.candidate.conversations, sides.current.conversations) == (0, 0)
    assert run.versions == (version_of(candidate),)


def test_releases_leave_the_paused_out_unless_asked(instance: Instance) -> None:
    candidate = release(instance, candidate_handoffs=33, current_handoffs=9)
    first_version = version_of(candidate)
    rollout_pauses_check()

    [paused] = releases(include_paused=True)

    assert releases() == []
    assert (paused.override_id, paused.percent, paused.versions) == (
        candidate.pk,
        50,
        (first_version,),
    )
    assert paused.pause_reason == REASON
