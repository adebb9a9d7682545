"""The queue page and the waiting count in the header: who may see them, what they show, and a
query count that does not grow with the rows."""

import re
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.http import HttpResponse
from django.http.response import HttpResponseBase
from django.test import Client
from django.utils import timezone
from model_bakery import baker
from pytest_django import DjangoAssertNumQueries, Settings

from conversations.models import HandoffSummary, Instance, Session

pytestmark = pytest.mark.django_db

QUEUE_URL = "/admin/conversations/session/queue/"
ROW_RE = re.compile(r'<tr class="queue-row sla-(\w+)" data-session-id="(\d+)">')
HEADER_RE = re.compile(r'<a id="waiting-customers" href="([^"]+)">Fila: <strong>(\d+)</strong>')
# Login session and user; Support: the user's own and group permissions (the attend check, then
# cached), a superuser instead: RuntimeConfig's "can add" (sidebar); the page's COUNT and its rows
# (instance, assignee, the wait and the latest summary's next action in the same query); the
# header's COUNT; the labels of the label filter.
# "masked": Support's permissions without view_personal_data (the rows masked, no more queries).
QUERIES_BY_GROUP = {"Support": 8, "masked": 8, "superuser": 7}


def staff_client(group_name: str, username: str = "") -> tuple[Client, User]:
    user = baker.make(User, username=username or f"u-{group_name.replace(' ', '-')}", is_staff=True)
    user.groups.add(Group.objects.get(name=group_name))
    client = Client()
    client.force_login(user)
    return client, user


def superuser_client() -> tuple[Client, User]:
    user = User.objects.create_superuser("root", "root@example.com", "x")
    client = Client()
    client.force_login(user)
    return client, user


def handed_off(n: int, *, minutes_ago: int = 10, **fields: Any) -> list[Session]:
    instance = fields.pop("instance", None) or baker.make(Instance, display_phone="551140000000")
    now = timezone.now()
    return [
        baker.make(
            Session,
            instance=instance,
            state="HUMAN",
            customer_name=f"Maria Souza {i}",
            customer_phone=f"55119{i:08d}",
            handoff_reason="model_requested",
            handoff_detail="pedido_cliente",
            handed_off_at=now - timedelta(minutes=minutes_ago + i),
            last_inbound_at=now - timedelta(minutes=minutes_ago + i),
            **fields,
        )
        for i in range(n)
    ]


def rows(response: HttpResponseBase) -> list[int]:
    assert response.status_code == 200
    assert isinstance(response, HttpResponse)
    return [int(pk) for _sla, pk in ROW_RE.findall(response.content.decode())]


# --- Who may see it ---------------------------------------------------------------------------


def test_support_sees_the_waiting_customers_oldest_first() -> None:
    newer, older = handed_off(2)
    client, _user = staff_client("Support")

    assert rows(client.get(QUEUE_URL)) == [older.pk, newer.pk]


def test_a_superuser_sees_the_queue() -> None:
    (session,) = handed_off(1)
    client, _user = superuser_client()

    assert rows(client.get(QUEUE_URL)) == [session.pk]


def test_a_prompt_editor_is_refused() -> None:
    handed_off(1)
    client, _user = staff_client("Prompt editors")

    response = client.get(QUEUE_URL)

    assert response.status_code == 403
    assert b"Maria" not in response.content


def test_staff_without_a_group_is_refused() -> None:
    user = baker.make(User, is_staff=True)
    client = Client()
    client.force_login(user)

    assert client.get(QUEUE_URL).status_code == 403


def test_anonymous_is_sent_to_the_login_page() -> None:
    response = Client().get(QUEUE_URL)

    assert response.status_code == 302
    assert response.headers["Location"] == f"/admin/login/?next={QUEUE_URL}"


# --- What it shows ------------------------------------------------------------------------------


def test_a_row_shows_every_column_in_portuguese() -> None:
    assignee = baker.make(User, username="ana", first_name="Ana", last_name="Lima")
    (session,) = handed_off(1, minutes_ago=12, assigned_to=assignee)
    baker.make(HandoffSummary, session=session, next_action="Enviar orçamento de água")
    client, _user = staff_client("Support")

    page = client.get(QUEUE_URL).content.decode()
    row = re.search(r'<tr class="queue-row sla-near".*?</tr>', page, re.S)

    assert row is not None
    cells = [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td.*?</td>", row[0], re.S)]
    assert cells == [
        "Maria Souza 0 (+55 11 90000-0000)",
        "Cliente pediu um atendente",
        "12 min",
        "Enviar orçamento de água",
        "Ana Lima",
        "23 h 47 min",
    ]
    assert f'<a href="/admin/conversations/session/{session.pk}/change/">' in row[0]
    assert '<th scope="col">Motivo da transferência</th>' in page
    assert '<th scope="col">Janela de 24 h</th>' in page
    assert '<span id="queue-count">1 cliente aguardando</span>' in page
    assert "meta: atender em até 15 min" in page


def test_the_colour_follows_support_sla_minutes(settings: Settings) -> None:
    settings.SUPPORT_SLA_MINUTES = 60
    handed_off(1, minutes_ago=50)
    client, _user = staff_client("Support")

    page = client.get(QUEUE_URL).content.decode()

    assert ROW_RE.findall(page)[0][0] == "near"
    assert "meta: atender em até 60 min" in page


def test_a_summary_not_written_yet_reads_as_being_prepared() -> None:
    handed_off(1, minutes_ago=2)
    client, _user = staff_client("Support")

    assert (
        '<td class="queue-next-action">resumo em preparo</td>'
        in client.get(QUEUE_URL).content.decode()
    )


def test_mine_lists_only_my_sessions_and_keeps_the_filter_in_the_links() -> None:
    client, me = staff_client("Support")
    colleague = baker.make(User, username="colega")
    mine, theirs, nobodys = handed_off(3)
    Session.objects.filter(pk=mine.pk).update(assigned_to=me)
    Session.objects.filter(pk=theirs.pk).update(assigned_to=colleague)

    everyone = client.get(QUEUE_URL)
    only_mine = client.get(QUEUE_URL + "?assigned=me")

    assert rows(everyone) == [nobodys.pk, theirs.pk, mine.pk]
    assert rows(only_mine) == [mine.pk]
    page = only_mine.content.decode()
    assert '<a href="?assigned=me" class="selected" aria-current="page">Minhas</a>' in page
    assert '<a href="?">Todas</a>' in page


def test_mine_with_nobody_waiting_says_so() -> None:
    handed_off(1)
    client, _user = staff_client("Support")

    page = client.get(QUEUE_URL + "?assigned=me").content.decode()

    assert rows(client.get(QUEUE_URL + "?assigned=me")) == []
    assert "Nenhum cliente atribuído a você está aguardando." in page


def test_a_hundred_rows_a_page_with_the_filter_kept_in_the_page_links() -> None:
    client, me = staff_client("Support")
    sessions = handed_off(101, assigned_to=me)

    first = client.get(QUEUE_URL + "?assigned=me")
    second = client.get(QUEUE_URL + "?assigned=me&page=2")

    assert len(rows(first)) == 100
    assert rows(second) == [sessions[0].pk]  # the newest handoff waits least
    assert '<a href="?assigned=me&amp;page=2">próxima &rsaquo;</a>' in first.content.decode()
    assert "página 2 de 2" in second.content.decode()


def masked_client() -> tuple[Client, User]:
    """Support's permissions but the personal data's."""
    attend = Group.objects.create(name="Attend only")
    attend.permissions.add(
        *Group.objects.get(name="Support").permissions.exclude(codename="view_personal_data")
    )
    return staff_client("Attend only")


def test_the_customer_is_masked_without_the_personal_data_permission() -> None:
    (session,) = handed_off(1)
    baker.make(HandoffSummary, session=session, next_action="Ligar para Maria no 11 91234-5678")
    client, _user = masked_client()

    page = client.get(QUEUE_URL).content.decode()

    assert ">M*** S*** * (+*************)</a>" in page
    assert '<td class="queue-next-action">Ligar para M*** no ** *****-****</td>' in page
    assert "Maria" not in page
    assert "91234" not in page


def test_the_customer_is_shown_whole_with_the_permission() -> None:
    (session,) = handed_off(1)
    client, _user = staff_client("Support")

    page = client.get(QUEUE_URL).content.decode()

    assert f'session/{session.pk}/change/">Maria Souza 0 (+55 11 90000-0000)</a>' in page


# --- The count in the header and on the index -------------------------------------------------


def test_support_reads_the_waiting_count_in_the_header_of_every_admin_page() -> None:
    handed_off(3)
    baker.make(Session, state="TRIAGE", customer_phone="5511999999999")
    client, _user = staff_client("Support")

    for url in ["/admin/", "/admin/conversations/session/", QUEUE_URL]:
        page = client.get(url).content.decode()
        assert HEADER_RE.findall(page) == [(QUEUE_URL, "3")], url


def test_the_index_shows_the_queue_with_its_count() -> None:
    handed_off(2)
    client, _user = superuser_client()

    page = client.get("/admin/").content.decode()

    assert '<strong id="queue-module-count">2</strong>' in page
    assert f'<a class="section" href="{QUEUE_URL}">Fila de atendimento</a>' in page


def test_prompt_editors_read_no_count_and_pay_no_query_for_it(
    django_assert_num_queries: DjangoAssertNumQueries,
) -> None:
    handed_off(2)
    client, _user = staff_client("Prompt editors")
    client.get("/admin/")

    # Login session, user, own and group permissions, the paused gradual releases (the notice
    # prompt editors read: governance.templatetags.prompt_governance.paused_rollouts), the
    # index's recent actions.
    with django_assert_num_queries(6) as captured:
        page = client.get("/admin/").content.decode()

    assert "waiting-customers" not in page
    assert "queue-module" not in page
    assert not [q for q in captured.captured_queries if "conversations_session" in q["sql"]]


def test_the_login_page_has_no_count() -> None:
    handed_off(1)

    page = Client().get("/admin/login/").content.decode()

    assert "waiting-customers" not in page


# --- Queries ------------------------------------------------------------------------------------


@pytest.mark.parametrize("who", sorted(QUERIES_BY_GROUP))
@pytest.mark.parametrize("n_waiting", [1, 30])
def test_the_queue_costs_the_same_queries_for_1_and_30_rows(
    django_assert_num_queries: DjangoAssertNumQueries, who: str, n_waiting: int
) -> None:
    sessions = handed_off(n_waiting)
    users = baker.make(User, _quantity=3)
    for i, session in enumerate(sessions):
        session.assigned_to = users[i % 3]
        session.save()
        baker.make(HandoffSummary, session=session, next_action=f"ação {i}", _quantity=2)
    clients = {"superuser": superuser_client, "masked": masked_client}
    client, _user = clients[who]() if who in clients else staff_client(who)
    client.get(QUEUE_URL)  # warm the content-type cache

    with django_assert_num_queries(QUERIES_BY_GROUP[who]):
        response = client.get(QUEUE_URL)

    assert len(rows(response)) == n_waiting
