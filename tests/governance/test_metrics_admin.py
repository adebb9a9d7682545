"""The admin page "Métricas por versão do prompt": who may open it, the filter form, the table
(newest version first, the change in handoff rate from the version before), the handoffs by reason
and the chart, in pt-BR."""

import re
import uuid

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from pytest_django import DjangoAssertNumQueries

from prompts_admin.models import PromptOverride
from tests.governance import metrics_data
from tests.governance.test_metrics import cached_turn, metrics_queries
from tests.helpers.staff import logged_in, staff_member

pytestmark = pytest.mark.django_db

URL = "/admin/governance/metrics/"
PERIOD_QUERY = "?agent=triagem&date_from=2026-11-01&date_to=2026-11-10"


def cells(html: str, version: str, table: str = "version-metrics") -> list[str]:
    """The texts of the row of `version` in the table `table` (tags stripped)."""
    section = html.split(f'id="{table}"', 1)[1].split("</table>", 1)[0]
    row = section.split(f'data-version="{version}"', 1)[1].split("</tr>", 1)[0]
    found = re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row, flags=re.S)
    return [re.sub(r"<[^>]+>", " ", text).split("  ")[0].strip() for text in found]


def test_the_url_is_the_admins() -> None:
    assert reverse("governance_prompt_metrics") == URL


def test_anonymous_visitors_are_sent_to_the_login() -> None:
    response = Client().get(URL)

    assert (response.status_code, response["Location"]) == (302, f"/admin/login/?next={URL}")


def test_support_gets_403(support_client: Client) -> None:
    assert support_client.get(URL).status_code == 403


def test_staff_without_the_permission_get_403() -> None:
    assert logged_in(staff_member()).get(URL).status_code == 403


def test_a_prompt_editor_sees_the_versions_newest_first(prompt_editor_client: Client) -> None:
    data = metrics_data.build()

    response = prompt_editor_client.get(URL + PERIOD_QUERY)

    assert response.status_code == 200
    html = response.content.decode()
    override = data.override
    date = override.history.get().history_date.astimezone(metrics_data.ZONE).strftime("%d/%m")
    assert cells(html, data.override_version) == [
        f"Prompt personalizado #{override.pk} · versão {data.history_id} · {date}",
        "3",
        "4",
        "4",
        "33,3 %",
        "−16,7 p.p.",
        "0,00",
        "0,00",
        "2,0",
        "4,0",
        "0,33",
        "147",
        "0,000028",
        "0,0 %",
        "2.500 / 3.850",
    ]
    assert cells(html, "builtin") == [
        "Prompt padrão",
        "4",
        "6",
        "6",
        "50,0 %",
        "—",
        "16,67",
        "16,67",
        "2,0",
        "3,0",
        "0,25",
        "179",
        "0,000034",
        "0,0 %",
        "350 / 575",
    ]
    assert html.index(f'data-version="{data.override_version}"') < html.index(
        'data-version="builtin"'
    )
    assert "Pergunta a cidade antes" in html


def test_the_prompt_cache_column_shows_the_cached_share_of_the_input(
    prompt_editor_client: Client,
) -> None:
    data = metrics_data.build()
    cached_turn(data)
    # A version whose only call counted no input tokens: no share to show.
    session = metrics_data.conversation(data.instance)
    metrics_data.call(
        session, turn=uuid.uuid4(), at=metrics_data.OVERRIDE_DAY, version="", tokens=(0, 0)
    )

    html = prompt_editor_client.get(URL + PERIOD_QUERY).content.decode()

    head = html.split('id="version-metrics"', 1)[1].split("</thead>", 1)[0]
    headers = re.findall(r'<th scope="col"[^>]*>(.*?)</th>', head)
    assert headers[-3:] == [
        "Custo por conversa (US$)",
        "Cache do prompt",
        "Latência p50 / p95 (ms)",
    ]
    # 2,560 of 3,600 input tokens cached; US$ 0.000444 over 4 conversations; the new call's
    # 100 ms joins the latencies.
    assert cells(html, data.override_version)[-3:] == ["0,000111", "71,1 %", "2.000 / 3.800"]
    assert cells(html, "builtin")[-3:-1] == ["0,000034", "0,0 %"]
    assert cells(html, "")[-3:-1] == ["0,000000", "—"]


def test_the_handoffs_by_reason_show_the_reasons_some_version_had(
    prompt_editor_client: Client,
) -> None:
    data = metrics_data.build()

    html = prompt_editor_client.get(URL + PERIOD_QUERY).content.decode()

    head = html.split('id="handoff-reasons"', 1)[1].split("</thead>", 1)[0]
    assert re.findall(r'<th scope="col"[^>]*>(.*?)</th>', head) == [
        "Versão",
        "Transferida pela assistente",
        "Resposta do modelo em formato inválido",
        "Assumida pela equipe",
    ]
    assert cells(html, "builtin", "handoff-reasons") == [
        "Prompt padrão",
        "25,0 %",
        "25,0 %",
        "0,0 %",
    ]
    assert cells(html, data.override_version, "handoff-reasons")[1:] == ["0,0 %", "0,0 %", "33,3 %"]


@pytest.mark.parametrize(
    ("version", "label"),
    [
        ("override:unversioned-7", "Prompt personalizado #7 (sem versão)"),
        ("override:999999", "Prompt personalizado, versão 999999 (excluído)"),
        # isdigit() accepts it, int() refuses it: shown as recorded.
        ("override:²", "override:²"),
        ("", "Sem versão registrada"),
    ],
)
def test_versions_without_a_history_row_are_named_by_what_they_recorded(
    prompt_editor_client: Client, version: str, label: str
) -> None:
    data = metrics_data.build()
    session = metrics_data.conversation(data.instance)
    metrics_data.call(session, turn=uuid.uuid4(), at=metrics_data.OVERRIDE_DAY, version=version)

    html = prompt_editor_client.get(URL + PERIOD_QUERY).content.decode()

    assert cells(html, version)[:2] == [label, "1"]


def test_the_chart_is_inline_svg_with_a_series_per_version(prompt_editor_client: Client) -> None:
    data = metrics_data.build()

    html = prompt_editor_client.get(URL + PERIOD_QUERY).content.decode()

    svg = html.split('<svg xmlns="http://www.w3.org/2000/svg" class="line-chart"', 1)[1]
    svg = svg.split("</svg>", 1)[0]
    assert (
        'aria-label="Taxa de transferência das versões do prompt do agente triagem, por dia"' in svg
    )
    assert svg.count('class="series ') == 2
    assert "Prompt padrão · 02/11: 50,0 % transferidas (2 de 4 conversas)" in svg
    date = data.override.history.get().history_date.astimezone(metrics_data.ZONE)
    label = f"Prompt personalizado #{data.override.pk} · versão {data.history_id} · {date:%d/%m}"
    assert f"{label} · 05/11: 33,3 % transferidas (1 de 3 conversas)" in svg
    assert " style=" not in html.split('id="content-main"', 1)[1]


def test_the_form_defaults_to_triage_over_the_last_30_days(prompt_editor_client: Client) -> None:
    response = prompt_editor_client.get(URL)

    form = response.context["form"]
    assert form.is_valid()
    filters = form.filters()
    assert (
        filters.agent,
        (filters.date_to - filters.date_from).days,
        filters.include_simulated,
    ) == (
        "triagem",
        29,
        False,
    )
    assert "Nenhuma chamada do agente triagem neste período." in response.content.decode()


def test_including_simulated_conversations(prompt_editor_client: Client) -> None:
    data = metrics_data.build()

    html = prompt_editor_client.get(URL + PERIOD_QUERY + "&include_simulated=on").content.decode()

    assert cells(html, data.override_version)[1:6] == ["4", "5", "5", "50,0 %", "±0,0 p.p."]


def test_a_reversed_period_is_refused_with_a_message(prompt_editor_client: Client) -> None:
    metrics_data.build()

    response = prompt_editor_client.get(URL + "?date_from=2026-11-10&date_to=2026-11-01")

    html = response.content.decode()
    assert response.status_code == 200
    assert "A data inicial é posterior à data final." in html
    assert 'id="version-metrics"' not in html


def test_an_unknown_agent_is_refused(prompt_editor_client: Client) -> None:
    response = prompt_editor_client.get(URL + "?agent=summary")

    assert response.context["form"].errors["agent"] == [
        "Faça uma escolha válida. summary não é uma das escolhas disponíveis."
    ]


def test_the_override_list_links_to_the_page(prompt_editor_client: Client) -> None:
    html = prompt_editor_client.get("/admin/prompts_admin/promptoverride/").content.decode()

    assert f'<a href="{URL}" class="prompt-metrics-link">Métricas por versão do prompt</a>' in html


def test_the_page_makes_as_many_queries_for_ten_versions_as_for_two(
    prompt_editor_user: User, django_assert_num_queries: DjangoAssertNumQueries
) -> None:
    data = metrics_data.build()
    client = logged_in(prompt_editor_user)
    client.get(URL + PERIOD_QUERY)  # the session and the user, cached from here on
    with django_assert_num_queries(QUERIES_PER_PAGE) as first:
        client.get(URL + PERIOD_QUERY)
    for n in range(8):
        data.override.content = f"v{n}"
        data.override.save()
        history_id = PromptOverride.history.filter(id=data.override.pk).latest().history_id
        version = f"override:{history_id}"
        session = metrics_data.conversation(data.instance)
        metrics_data.call(
            session,
            turn=uuid.uuid4(),
            at=metrics_data.OVERRIDE_DAY,
            version=version,
        )

    with django_assert_num_queries(len(first.captured_queries)):
        response = client.get(URL + PERIOD_QUERY)

    assert response.content.decode().count("<tr data-version=") == 2 * 10


# The session, the user, the user's permissions (groups and own), then the metrics, then the
# agent's gradual release (one query finding none; tests/governance/test_rollout_metrics.py has
# the three of a release).
QUERIES_PER_PAGE = 5 + metrics_queries()


@pytest.mark.parametrize(
    ("query", "errors"),
    [
        # The last day taken, and its weekly chart (its end is read to the next Monday).
        ("?date_from=9998-06-01&date_to=9998-12-31", {}),
        (
            "?date_from=9999-12-20&date_to=9999-12-31",
            {
                "date_from": ["Certifique-se que este valor seja menor ou igual a 9998-12-31."],
                "date_to": ["Certifique-se que este valor seja menor ou igual a 9998-12-31."],
            },
        ),
        (
            "?date_from=9998-12-31&date_to=9999-01-01",
            {
                "date_to": ["Certifique-se que este valor seja menor ou igual a 9998-12-31."],
            },
        ),
        ("?date_from=0001-01-01&date_to=0001-12-31", {}),
    ],
)
def test_a_period_at_the_calendars_ends_is_shown_or_refused_never_a_server_error(
    prompt_editor_client: Client, query: str, errors: dict[str, list[str]]
) -> None:
    response = prompt_editor_client.get(URL + query)

    assert (response.status_code, response.context["form"].errors) == (200, errors)
