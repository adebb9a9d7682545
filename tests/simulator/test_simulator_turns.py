"""The simulator page's turn off the request: `simulated_turn_start` (the limits, the publish),
the page while a turn is in flight, and the poll endpoint's gates. The task is a collaborator
here (a recorder, or one that fails as a broker down does); the worker runs it for real in
tests/simulator/test_simulator_worker.py."""

import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import User
from django.db import connections
from django.test import Client, TestCase
from django.utils import timezone
from pytest_django import Settings
from pytest_django.asserts import assertContains

from conversations.models import Direction, Instance, Message, Session, SimulatedTurn
from simulator.admin import simulated_phone
from simulator.simulation import SimulationLimited, simulated_turn_start
from tests import baker_recipes as recipes
from tests.fakes.openai_server import FakeOpenAIServer
from tests.helpers.meta_payloads import Recorder
from tests.helpers.staff import staff_member

pytestmark = pytest.mark.django_db

URL = "/admin/conversations/session/simulator/"
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
WAIT = "Aguarde a resposta da mensagem anterior."


@pytest.fixture
def demo_instance(db: None) -> Instance:
    instance: Instance = recipes.instance.make(name="Laboratório Demo")
    return instance


def start(
    user: User,
    instance: Instance,
    text: str = "Oi",
    *,
    enqueue: Callable[[int], object] | None = None,
    now: datetime | None = None,
) -> SimulatedTurn:
    """`simulated_turn_start` as the page calls it, its after-commit publish run (the clock's
    time unless `now`)."""
    with TestCase.captureOnCommitCallbacks(execute=True):
        turn = simulated_turn_start(
            user_id=user.pk,
            instance=instance,
            phone=simulated_phone(user.pk),
            text=text,
            prompt_overrides={},
            enqueue=enqueue or Recorder(),
            now=now,
        )
    turn.refresh_from_db()
    return turn


def past_turns(user: User, instance: Instance, *, ago: timedelta, count: int) -> None:
    """`count` ended turns of `user`, started `ago` before NOW."""
    session = recipes.session.make(
        instance=instance, customer_phone="5500000000099", is_simulated=True, state="CLOSED"
    )
    for _ in range(count):
        SimulatedTurn.objects.create(
            user=user,
            session=session,
            inbound=recipes.inbound.make(session=session),
            started_at=NOW - ago,
            finished_at=NOW - ago,
        )


def test_a_turn_starts_with_the_delivery_applied_and_its_task_enqueued(
    admin_user: User, demo_instance: Instance
) -> None:
    enqueued = Recorder()

    turn = start(admin_user, demo_instance, "Quero um orçamento", enqueue=enqueued)

    session = Session.objects.get()
    assert enqueued.calls == [turn.pk]
    assert (turn.session_id, turn.inbound.content, turn.finished_at) == (
        session.pk,
        "Quero um orçamento",
        None,
    )
    assert (session.customer_phone, session.is_simulated) == (
        simulated_phone(admin_user.pk),
        True,
    )


def test_a_second_message_while_one_is_in_flight_is_refused_and_nothing_is_written(
    admin_user: User, demo_instance: Instance
) -> None:
    first = start(admin_user, demo_instance, "Oi")

    with pytest.raises(SimulationLimited) as raised:
        start(admin_user, demo_instance, "Oi de novo")

    assert str(raised.value) == WAIT
    assert list(SimulatedTurn.objects.values_list("pk", flat=True)) == [first.pk]
    assert list(
        Message.objects.filter(direction=Direction.INBOUND).values_list("content", flat=True)
    ) == ["Oi"]


def test_another_staff_member_s_turn_in_flight_does_not_hold_this_one(
    admin_user: User, demo_instance: Instance
) -> None:
    other = User.objects.create_superuser("bia")
    start(other, demo_instance)

    turn = start(admin_user, demo_instance)

    assert SimulatedTurn.objects.filter(finished_at__isnull=True).count() == 2
    assert turn.user_id == admin_user.pk


@pytest.mark.parametrize(
    ("ago", "count", "allowed"),
    [
        (timedelta(seconds=59, microseconds=999_999), 2, True),  # the third of three
        (timedelta(seconds=59, microseconds=999_999), 3, False),  # a fourth within the minute
        (timedelta(seconds=60), 3, True),  # exactly a minute ago: out of the window
        (timedelta(seconds=60, microseconds=1), 3, True),
    ],
    ids=["below the limit", "at the limit", "exactly a minute ago", "just over a minute ago"],
)
def test_the_turns_per_minute_are_counted_over_the_last_minute(
    admin_user: User,
    demo_instance: Instance,
    settings: Settings,
    ago: timedelta,
    count: int,
    allowed: bool,
) -> None:
    settings.SIMULATOR_MAX_TURNS_PER_MINUTE = 3
    past_turns(admin_user, demo_instance, ago=ago, count=count)

    try:
        start(admin_user, demo_instance, now=NOW)
    except SimulationLimited as refused:
        message = str(refused)
    else:
        message = ""

    assert message == (
        ""
        if allowed
        else "No máximo 3 mensagens por minuto no simulador: aguarde um pouco e envie de novo."
    )
    assert SimulatedTurn.objects.count() == count + (1 if allowed else 0)


def test_the_default_limit_is_ten_turns_a_minute(settings: Settings) -> None:
    assert settings.SIMULATOR_MAX_TURNS_PER_MINUTE == 10


@pytest.mark.parametrize(
    ("ago", "lost"),
    [(timedelta(seconds=180), False), (timedelta(seconds=180, microseconds=1), True)],
    ids=["exactly 180 s", "just over 180 s"],
)
def test_a_turn_in_flight_for_over_180_s_is_taken_for_lost(
    admin_user: User, demo_instance: Instance, ago: timedelta, lost: bool
) -> None:
    """180 s: Celery's hard time limit (150 s) and 30 s more; a lost turn never holds the staff
    member for good."""
    stuck = start(admin_user, demo_instance, now=NOW - ago)

    try:
        start(admin_user, demo_instance, "De novo", now=NOW)
    except SimulationLimited:
        refused = True
    else:
        refused = False

    stuck.refresh_from_db()
    assert (refused, stuck.error, stuck.finished_at) == (
        (False, "lost", NOW) if lost else (True, "", None)
    )


def test_a_failed_publish_ends_the_turn_and_the_page_says_so(
    admin_client: Client, admin_user: User, demo_instance: Instance
) -> None:
    def broker_down(_turn_id: int) -> None:
        raise ConnectionRefusedError("redis")

    turn = start(admin_user, demo_instance, enqueue=broker_down)
    page = admin_client.get(URL)
    again = start(admin_user, demo_instance, "De novo")

    turn.refresh_from_db()
    assert (turn.error, turn.finished_at is not None) == ("ConnectionRefusedError", True)
    assertContains(page, "O turno falhou (ConnectionRefusedError); veja o log do worker.", count=1)
    assertContains(page, '<p class="bubble bubble-customer">Oi</p>', count=1)
    assert again.finished_at is None


def test_while_a_turn_is_in_flight_the_page_waits_and_polls_it(
    admin_client: Client, admin_user: User, demo_instance: Instance, settings: Settings
) -> None:
    settings.OPENAI_API_KEY = "configured"
    turn = start(admin_user, demo_instance)

    page = admin_client.get(URL)

    assertContains(
        page,
        '<p class="simulator-waiting" id="simulator-waiting" '
        f'data-url="{URL}turn/{turn.pk}/">Aguardando a resposta…</p>',
        count=1,
    )
    assertContains(page, '<button type="submit" class="button default" name="send" disabled>')
    assertContains(page, "simulator/admin/simulator.js")


def test_a_message_posted_while_one_is_in_flight_gets_the_pt_br_refusal(
    admin_client: Client,
    admin_user: User,
    demo_instance: Instance,
    openai_settings: FakeOpenAIServer,
) -> None:
    start(admin_user, demo_instance)

    response = admin_client.post(URL, {"instance": demo_instance.pk, "text": "Oi?"}, follow=True)

    assertContains(response, WAIT, count=1)
    assert (openai_settings.request_count, SimulatedTurn.objects.count()) == (0, 1)


def test_the_poll_says_whether_the_own_turn_ended(
    admin_client: Client, admin_user: User, demo_instance: Instance
) -> None:
    turn = start(admin_user, demo_instance)

    waiting = admin_client.get(f"{URL}turn/{turn.pk}/")
    SimulatedTurn.objects.filter(pk=turn.pk).update(finished_at=timezone.now())
    ended = admin_client.get(f"{URL}turn/{turn.pk}/")

    assert (waiting.status_code, waiting.json()) == (200, {"done": False})
    assert (ended.status_code, ended.json()) == (200, {"done": True})


def test_the_poll_is_for_the_simulator_s_users_and_their_own_turns_only(
    admin_user: User, demo_instance: Instance
) -> None:
    turn = start(admin_user, demo_instance)
    url = f"{URL}turn/{turn.pk}/"
    plain, other, anonymous = Client(), Client(), Client()
    plain.force_login(staff_member(permissions=("conversations.view_session",)))
    other.force_login(User.objects.create_superuser("bia"))

    answers = [plain.get(url), other.get(url), anonymous.get(url)]

    assert [a.status_code for a in answers] == [403, 404, 302]
    assert answers[2]["Location"] == f"/admin/login/?next={url}"


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_ten_posts_at_once_start_one_turn(admin_user: User, demo_instance: Instance) -> None:
    """The database's one-in-flight constraint settles the race the checks before it cannot:
    one turn, one customer message, one publish; the nine others get the pt-BR refusal."""
    barrier = threading.Barrier(10)
    enqueued = Recorder()
    outcomes: list[str] = []

    def post(index: int) -> None:
        try:
            barrier.wait()
            simulated_turn_start(
                user_id=admin_user.pk,
                instance=demo_instance,
                phone=simulated_phone(admin_user.pk),
                text=f"Oi {index}",
                prompt_overrides={},
                enqueue=enqueued,
            )
            outcomes.append("started")
        except SimulationLimited as refused:
            outcomes.append(str(refused))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=post, args=(index,)) for index in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    turn = SimulatedTurn.objects.get()
    assert sorted(outcomes) == sorted(["started", *[WAIT] * 9])
    assert enqueued.calls == [turn.pk]
    assert Message.objects.filter(direction=Direction.INBOUND).count() == 1
