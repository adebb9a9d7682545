"""The CSAT page: who may open it, the figures by week, staff member and handoff reason exactly,
the period's boundaries in local time, and a constant number of queries."""

import html
import re
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from conversations.models import Instance, SatisfactionSurvey, Session
from tests import baker_recipes as recipes
from tests.helpers.staff import PROMPT_EDITORS, SUPPORT, logged_in, staff_member

pytestmark = pytest.mark.django_db

LIST_URL = "/admin/conversations/satisfactionsurvey/"
URL = LIST_URL + "csat/"
PERIOD = "?date_from=2026-11-16&date_to=2026-11-29"
LOCAL = ZoneInfo("America/Sao_Paulo")


def at(day: int, hour: int = 10, minute: int = 0, second: int = 0, micro: int = 0) -> datetime:
    return datetime(2026, 11, day, hour, minute, second, micro, tzinfo=LOCAL)


def survey(
    when: datetime,
    *,
    by: User | None,
    reason: str,
    score: int | None = None,
    asked: bool = True,
    trigger: str = "staff_close",
) -> SatisfactionSurvey:
    instance = Instance.objects.first() or recipes.instance.make()
    session: Session = recipes.session.make(instance=instance)
    return SatisfactionSurvey.objects.create(
        session=session,
        trigger=trigger,
        style="buttons",
        not_sent="" if asked else "window_closed",
        closed_by=by,
        handoff_reason=reason,
        created_at=when,
        asked_at=when if asked else None,
        score=score,
        answered_at=when if score is not None else None,
    )


@pytest.fixture
def ana() -> User:
    user = staff_member(SUPPORT)
    User.objects.filter(pk=user.pk).update(first_name="Ana", last_name="Lima")
    user.refresh_from_db()
    return user


def table(page: str, table_id: str) -> list[list[str]]:
    """The rows of one table (body, then foot) as the text of their cells."""
    match = re.search(rf'<table id="{table_id}">(.*?)</table>', page, re.S)
    assert match is not None, table_id
    body = match.group(1).split("</thead>", 1)[1]
    return [
        [
            " ".join(html.unescape(re.sub(r"<[^>]+>", " ", cell)).split())
            for cell in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row, re.S)
        ]
        for row in re.findall(r"<tr>(.*?)</tr>", body, re.S)
    ]


def period_data(ana: User, bruno: User | None = None) -> None:
    """Six surveys due from 16/11 to 29/11/2026, and one on each side of the period."""
    if bruno is None:
        bruno = staff_member(SUPPORT)
        User.objects.filter(pk=bruno.pk).update(username="bruno")
        bruno.refresh_from_db()
    # Week of 16/11: its first moment counts.
    survey(at(16, 0), by=ana, reason="model_requested", score=5)
    survey(at(18), by=ana, reason="staff_takeover", score=3)
    survey(at(20), by=bruno, reason="model_requested", asked=False)
    # Week of 23/11, to its last microsecond.
    survey(at(23), by=bruno, reason="model_requested", score=1)
    survey(at(25), by=None, reason="qualified_lead", score=5, trigger="lead_confirmed")
    survey(at(29, 23, 59, 59, 999_999), by=ana, reason="", asked=True)
    # Just outside the period.
    survey(at(15, 23, 59, 59, 999_999), by=ana, reason="model_requested", score=1)
    survey(at(30, 0), by=ana, reason="model_requested", score=1)


TOTAL = ["Período inteiro", "6", "5", "1", "4", "80,0 %", "3,5", "50,0 %"]


def test_the_figures_by_week_staff_member_and_handoff_reason(ana: User) -> None:
    period_data(ana)

    page = logged_in(ana).get(URL + PERIOD).content.decode()

    assert table(page, "satisfaction-weeks") == [
        ["semana de 16/11/2026", "3", "2", "1", "2", "100,0 %", "4,0", "50,0 %"],
        ["semana de 23/11/2026", "3", "3", "0", "2", "66,7 %", "3,0", "50,0 %"],
        TOTAL,
    ]
    assert table(page, "satisfaction-staff") == [
        ["Ana Lima", "3", "3", "0", "2", "66,7 %", "4,0", "50,0 %"],
        ["bruno", "2", "1", "1", "1", "100,0 %", "1,0", "0,0 %"],
        ["Ninguém (após lead confirmado)", "1", "1", "0", "1", "100,0 %", "5,0", "100,0 %"],
        TOTAL,
    ]
    assert table(page, "satisfaction-reasons") == [
        ["transferida pela assistente", "3", "2", "1", "2", "100,0 %", "3,0", "50,0 %"],
        ["Sem transferência", "1", "1", "0", "0", "0,0 %", "—", "—"],
        ["lead qualificado", "1", "1", "0", "1", "100,0 %", "5,0", "100,0 %"],
        ["assumida pela equipe", "1", "1", "0", "1", "100,0 %", "3,0", "0,0 %"],
        TOTAL,
    ]
    text = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())
    assert "Satisfação dos clientes (CSAT)" in text
    assert "Perguntas de satisfação previstas de 16/11/2026 a 29/11/2026" in text


def test_a_period_without_surveys_says_so(ana: User) -> None:
    page = logged_in(ana).get(URL + PERIOD).content.decode()

    assert table(page, "satisfaction-weeks") == [
        ["Nenhuma pergunta de satisfação prevista neste período."]
    ]


def test_the_page_costs_the_same_queries_for_one_survey_or_eight(ana: User) -> None:
    client = logged_in(ana)
    survey(at(16), by=ana, reason="model_requested", score=5)
    client.get(URL + PERIOD)
    with CaptureQueriesContext(connection) as one:
        assert client.get(URL + PERIOD).status_code == 200
    period_data(ana)

    with CaptureQueriesContext(connection) as many:
        client.get(URL + PERIOD)

    aggregates = [q["sql"] for q in many.captured_queries if "satisfactionsurvey" in q["sql"]]
    assert len(aggregates) == 4
    # The login's session and user, the user's and groups' permissions, the four aggregates and
    # the waiting customers the admin's header counts.
    assert len(many) == len(one) == 9


@pytest.mark.parametrize(
    ("query", "error"),
    [
        ("?date_from=2026-11-29&date_to=2026-11-16", "A data inicial é posterior à data final."),
        ("?date_from=2025-01-01&date_to=2026-11-29", "Escolha um período de no máximo 366 dias."),
        (
            "?date_from=9999-06-01&date_to=9999-12-31",
            "Certifique-se que este valor seja menor ou igual a 9998-12-31.",
        ),
    ],
)
def test_a_wrong_period_is_refused_in_pt_br(ana: User, query: str, error: str) -> None:
    page = html.unescape(logged_in(ana).get(URL + query).content.decode())

    assert error in page
    assert 'id="satisfaction-weeks"' not in page


def test_a_period_ending_on_the_last_day_taken_is_read(ana: User) -> None:
    page = logged_in(ana).get(URL + "?date_from=9998-06-01&date_to=9998-12-31").content.decode()

    assert 'id="satisfaction-weeks"' in page
    assert "Certifique-se" not in page


def test_support_reaches_the_page_from_the_admin_index_and_the_surveys_list(ana: User) -> None:
    client = logged_in(ana)

    index = client.get("/admin/").content.decode()
    surveys = client.get(LIST_URL).content.decode()

    assert f'<a class="section" href="{URL}">Satisfação dos clientes (CSAT)</a>' in index
    assert f'<a href="{LIST_URL}">Pesquisas de satisfação</a>' in index
    assert f'href="{URL}" class="button" id="csat-report-link"' in surveys


def test_the_index_shows_no_csat_link_to_a_prompt_editor() -> None:
    index = logged_in(staff_member(PROMPT_EDITORS)).get("/admin/").content.decode()

    assert 'id="csat-module"' not in index


@pytest.mark.parametrize("value", ["\x00", "2026-11-16\x00"])
def test_nul_in_the_period_never_yields_a_500(ana: User, value: str) -> None:
    for params in ({"date_from": value}, {"date_to": value}, {"date_from\x00": value}):
        assert logged_in(ana).get(URL, params).status_code == 200


@pytest.mark.parametrize("who", ["prompt editor", "staff without the permission"])
@pytest.mark.parametrize("url", [URL, LIST_URL])
def test_others_get_403(who: str, url: str) -> None:
    user = staff_member(PROMPT_EDITORS) if who == "prompt editor" else staff_member()

    assert logged_in(user).get(url).status_code == 403


def test_anonymous_users_go_to_the_login_page() -> None:
    response = Client().get(URL)

    assert (response.status_code, response["Location"]) == (302, f"/admin/login/?next={URL}")


def test_the_surveys_themselves_are_read_only(ana: User) -> None:
    one = survey(at(16), by=ana, reason="model_requested", score=5)
    client = logged_in(ana)

    listed = client.get(LIST_URL).content.decode()
    assert f'<a href="/admin/conversations/session/{one.session_id}/change/">' in listed
    assert client.get(f"{LIST_URL}{one.pk}/change/").status_code == 200
    assert client.post(f"{LIST_URL}{one.pk}/change/", {"score": "1"}).status_code == 403
    assert client.get(f"{LIST_URL}add/").status_code == 403
    assert client.post(f"{LIST_URL}{one.pk}/delete/", {"post": "yes"}).status_code == 403
    one.refresh_from_db()
    assert one.score == 5
