"""The prompt governance as an editor finds it: a "Governança dos prompts" block on the admin index
(custom prompts, metrics per prompt version, tests of a draft on recorded conversations, prompt
test cases and their runs) for staff who may read each, and the replay's pages called "Testar o
rascunho em conversas gravadas", never "Simulação" (the chat with the bot is "Conversar com o
bot")."""

import pytest
from django.test import Client

from governance.models import ReplayRun
from prompts_admin.models import PromptOverride
from tests.helpers.staff import PROMPT_EDITORS, SUPPORT, logged_in, staff_member

pytestmark = pytest.mark.django_db

CUSTOM_PROMPTS = '<a href="/admin/prompts_admin/promptoverride/">Prompts personalizados</a>'
METRICS = '<a href="/admin/governance/metrics/" id="prompt-metrics-link">Métricas por versão do prompt</a>'
REPLAYS = (
    '<a href="/admin/governance/replayrun/" id="replay-runs-link">'
    "Testar o rascunho em conversas gravadas</a>"
)
CASES = (
    '<a href="/admin/governance/prompttestcase/" id="test-cases-link">Casos de teste de prompt</a>'
)
RUNS = (
    '<a href="/admin/governance/prompttestrun/" id="test-runs-link">'
    "Execuções dos casos de teste</a>"
)


def index_of(client: Client) -> str:
    return client.get("/admin/").content.decode()


def test_a_prompt_editor_finds_the_governance_block_on_the_index() -> None:
    page = index_of(logged_in(staff_member(PROMPT_EDITORS)))

    assert '<div class="module" id="prompt-governance-module">' in page
    assert "<caption>Governança dos prompts</caption>" in page
    assert [CUSTOM_PROMPTS in page, METRICS in page, REPLAYS in page] == [True, True, True]
    assert [CASES in page, RUNS in page] == [True, True]


def test_support_staff_get_no_governance_block() -> None:
    page = index_of(logged_in(staff_member(SUPPORT)))

    assert 'id="prompt-governance-module"' not in page
    assert "Métricas por versão do prompt" not in page


@pytest.mark.parametrize(
    ("permission", "shown"),
    [
        ("prompts_admin.view_promptoverride", [True, True, False, False, False]),
        ("governance.view_replayrun", [False, False, True, False, False]),
        ("governance.view_prompttestcase", [False, False, False, True, False]),
        ("governance.view_prompttestrun", [False, False, False, False, True]),
    ],
)
def test_each_link_needs_its_own_permission(permission: str, shown: list[bool]) -> None:
    page = index_of(logged_in(staff_member(permissions=(permission,))))

    assert [p in page for p in (CUSTOM_PROMPTS, METRICS, REPLAYS, CASES, RUNS)] == shown


def test_the_index_has_one_governance_section_the_block(admin_client: Client) -> None:
    page = index_of(admin_client)

    assert page.count("Governança dos prompts") == 1
    assert 'class="app-governance module' not in page
    assert '<div class="app-prompts_admin module' in page
    assert "Simulaç" not in page
    assert "Override" not in page


def test_the_governance_app_page_names_the_runs_as_tests_on_recorded_conversations(
    admin_client: Client,
) -> None:
    page = admin_client.get("/admin/governance/").content.decode()

    assert ">Testes em conversas gravadas</a>" in page
    # An app's page lists its own models, not the index's blocks.
    assert 'id="prompt-governance-module"' not in page
    assert 'id="simulator-module"' not in page


def test_staff_who_may_only_read_the_runs_see_the_block_and_no_empty_list() -> None:
    page = index_of(logged_in(staff_member(permissions=("governance.view_replayrun",))))

    assert REPLAYS in page
    assert "Você não tem permissão para ver ou editar nada." not in page


def test_the_run_page_and_its_breadcrumbs_name_the_test(admin_client: Client) -> None:
    override = PromptOverride.objects.create(agent="qualificacao", content="Rascunho")
    run = ReplayRun.objects.create(
        override=override, agent="qualificacao", content="Rascunho", content_hash="h"
    )

    page = admin_client.get(f"/admin/governance/replayrun/{run.pk}/change/").content.decode()

    assert f"<h1>Teste em conversas gravadas nº {run.pk}</h1>" in page
    assert (
        '&rsaquo; <a href="/admin/governance/">Governança dos prompts</a>\n'
        '  &rsaquo; <a href="/admin/governance/replayrun/">Testes em conversas gravadas</a>\n'
        f"  &rsaquo; Teste em conversas gravadas nº {run.pk}\n"
    ) in page
    assert (
        f"<tr><th>Prompt personalizado</th><td><a "
        f'href="/admin/prompts_admin/promptoverride/{override.pk}/change/">'
        f"Qualificação (inativo) #{override.pk}</a>"
    ) in page
    assert "Simulaç" not in page


def test_the_start_page_and_the_custom_prompt_s_buttons_name_the_test(
    admin_client: Client,
) -> None:
    override = PromptOverride.objects.create(agent="triagem", content="Rascunho")

    start = admin_client.get(
        f"/admin/governance/replayrun/start/?override={override.pk}"
    ).content.decode()
    form = admin_client.get(
        f"/admin/prompts_admin/promptoverride/{override.pk}/change/"
    ).content.decode()

    assert (
        f"<h1>Testar o rascunho em conversas gravadas: Triagem (inativo) #{override.pk}</h1>"
    ) in start
    assert "&rsaquo; Testar o rascunho em conversas gravadas\n</div>" in start
    assert ">Iniciar o teste</button>" in start
    assert "(mesmos dados, histórico e regras fixas)" in start
    assert 'id="replay-this-draft">Testar o rascunho em conversas gravadas</a>' in form
    assert 'id="replays-of-this-draft">Testes deste rascunho em conversas gravadas</a>' in form
    assert "Simulaç" not in start + form
    assert "Simular" not in start
    # The one "Simular" of the override's page is the simulated customers' button, not the replay.
    assert form.count("Simular") == 1
    assert 'id="simulate-customers">Simular clientes</a>' in form
