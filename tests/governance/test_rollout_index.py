"""The admin index's notice of the gradual releases that paused themselves
(templates/admin/index.html, governance.templatetags.prompt_governance.paused_rollouts): for
those who may read prompt overrides, while a release is paused, in one query."""

from datetime import UTC, datetime

import pytest
from django.test import Client
from pytest_django import DjangoAssertNumQueries

from prompts_admin.models import PromptOverride
from tests.governance.test_rollout_metrics import row_texts
from tests.helpers.staff import PROMPT_EDITORS, SUPPORT, logged_in, staff_member

pytestmark = pytest.mark.django_db

REASON = (
    "Liberação aos poucos pausada automaticamente: transferências 30% (110 conversas) "
    "contra 10% (90 conversas), margem de 5 pontos"
)
# 14:32 UTC is 11:32 in Brasília.
PAUSED_AT = datetime(2026, 12, 1, 14, 32, tzinfo=UTC)


def candidate(agent: str = "triagem", *, paused: bool) -> PromptOverride:
    override = PromptOverride.objects.create(agent=agent, content="Nova.", rollout_percent=50)
    if paused:
        PromptOverride.objects.filter(pk=override.pk).update(
            rollout_paused_at=PAUSED_AT, rollout_pause_reason=REASON
        )
    return override


def notice(page: str) -> list[list[str]]:
    """The notice's rows, each as its texts (tags stripped); [] without the notice."""
    if 'id="rollout-paused-module"' not in page:
        return []
    return row_texts(page.split('id="rollout-paused-module"', 1)[1].split("</div>", 1)[0])


def index(client: Client) -> str:
    return client.get("/admin/").content.decode()


def test_a_prompt_editor_reads_the_paused_release_with_its_reason_and_link() -> None:
    override = candidate(paused=True)
    client = logged_in(staff_member(PROMPT_EDITORS))

    page = index(client)

    assert notice(page) == [
        [
            f"Triagem · prompt personalizado #{override.pk}",
            f"Pausada desde 01/12/2026 11:32 {REASON}",
        ]
    ]
    assert (
        f'<a href="/admin/prompts_admin/promptoverride/{override.pk}/change/">'
        f"Triagem · prompt personalizado #{override.pk}</a>"
    ) in page
    assert "<caption>Liberações aos poucos pausadas automaticamente</caption>" in page
    assert (
        "Nenhuma conversa nova recebe estas versões. Abra uma para retomar a liberação (salve "
        "com a porcentagem) ou encerrá-la (salve com a porcentagem vazia)."
    ) in page


def test_a_running_release_shows_no_notice_and_its_pause_does() -> None:
    override = candidate(paused=False)
    client = logged_in(staff_member(PROMPT_EDITORS))

    before = notice(index(client))
    PromptOverride.objects.filter(pk=override.pk).update(
        rollout_paused_at=PAUSED_AT, rollout_pause_reason=REASON
    )
    paused = notice(index(client))
    PromptOverride.objects.filter(pk=override.pk).update(
        rollout_paused_at=None, rollout_pause_reason=""
    )
    resumed = notice(index(client))

    assert (len(before), len(paused), len(resumed)) == (0, 1, 0)


def test_the_releases_are_listed_oldest_pause_first() -> None:
    first = candidate(paused=True)
    second = candidate("qualificacao", paused=True)
    PromptOverride.objects.filter(pk=second.pk).update(
        rollout_paused_at=datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
    )

    rows = notice(index(logged_in(staff_member(PROMPT_EDITORS))))

    assert [row[0] for row in rows] == [
        f"Qualificação · prompt personalizado #{second.pk}",
        f"Triagem · prompt personalizado #{first.pk}",
    ]
    assert rows[0][1] == f"Pausada desde 30/11/2026 06:00 {REASON}"


def test_staff_who_may_not_read_prompt_overrides_see_no_notice_and_pay_no_query(
    django_assert_num_queries: DjangoAssertNumQueries,
) -> None:
    candidate(paused=True)
    client = logged_in(staff_member(SUPPORT))
    index(client)

    # Login session, user, own and group permissions, the waiting count, recent actions.
    with django_assert_num_queries(6) as captured:
        page = index(client)

    assert notice(page) == []
    assert "rollout-paused" not in page
    assert not [q for q in captured.captured_queries if "prompts_admin_promptoverride" in q["sql"]]


@pytest.mark.parametrize("paused", [1, 3])
def test_the_notice_costs_one_query_whatever_the_number_of_paused_releases(
    django_assert_num_queries: DjangoAssertNumQueries, paused: int
) -> None:
    for agent in ("triagem", "qualificacao", "coleta")[:paused]:
        candidate(agent, paused=True)
    client = logged_in(staff_member(PROMPT_EDITORS))
    index(client)

    # Login session, user, own and group permissions, the paused releases, recent actions.
    with django_assert_num_queries(6) as captured:
        page = index(client)

    assert len(notice(page)) == paused
    assert len([q for q in captured.captured_queries if "promptoverride" in q["sql"]]) == 1
