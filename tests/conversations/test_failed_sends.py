"""Graph down: a reply is retried with backoff (the task's retries, then a new round by the
unsent-messages sweep whenever nobody tried it for `SEND_RETRY_WINDOW`) until the 24-hour
customer-service window closes; then it is marked failed and the admin's "failed sends" filter
lists it, on the message log and on the sessions."""

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from conversations.models import DeliveryStatus, Message, Session
from conversations.sending.worker import SEND_MAX_RETRIES, send_message
from conversations.sweeps import SEND_RETRY_WINDOW, WINDOW_EXPIRED, unsent_messages_requeue
from tests import baker_recipes as recipes
from tests.baker_recipes import CUSTOMER_PHONE
from tests.fakes.graph_server import FakeGraphAPI
from tests.helpers.conversation_rows import reply

ROW = r'<a href="/admin/conversations/{model}/(\d+)/change/'
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("eager_retries")]


def test_graph_down_gives_a_reply_rounds_of_retries_until_the_window_closes(
    fake_graph: FakeGraphAPI, session: Session
) -> None:
    message = reply(session, age=timedelta(seconds=90))
    rounds = 3
    for _ in range(rounds * (SEND_MAX_RETRIES + 1)):
        fake_graph.respond_error(503, 2, "Service temporarily unavailable")
    sent_by_round = []
    now = timezone.now()

    for _ in range(rounds):
        # The sweep finds the reply nobody is trying (its first publish lost, then deferred).
        sweep = unsent_messages_requeue(now=now, enqueue=lambda pk: send_message.apply(args=(pk,)))
        assert sweep.requeued == [message.pk]
        sent_by_round.append(len(fake_graph.sends))
        # Right after a round nobody re-enqueues it: its retries just ended.
        assert unsent_messages_requeue(now=now, enqueue=lambda pk: None).requeued == []
        Message.objects.filter(pk=message.pk).update(
            last_send_attempt_at=now - SEND_RETRY_WINDOW - timedelta(seconds=1),
            created_at=now - timedelta(hours=2),
        )
        message.refresh_from_db()
        assert (message.delivery_status, message.wa_message_id) == ("pending", None)

    closed = unsent_messages_requeue(
        now=now + timedelta(hours=22, minutes=1), enqueue=lambda pk: None
    )

    assert sent_by_round == [7, 14, 21]
    assert (closed.requeued, closed.expired) == ([], 1)
    message.refresh_from_db()
    assert (message.delivery_status, message.delivery_error_title, message.send_attempts) == (
        "failed",
        WINDOW_EXPIRED,
        3 * (SEND_MAX_RETRIES + 1),
    )
    assert len(fake_graph.sends) == 21


def test_a_reply_whose_retries_are_running_is_not_given_a_second_round(session: Session) -> None:
    now = timezone.now()
    retrying = reply(
        session,
        age=timedelta(hours=3),
        send_attempts=9,
        delivery_status_at=None,
        last_send_attempt_at=now - timedelta(minutes=5),
    )
    idle = reply(
        session,
        age=timedelta(hours=3, seconds=1),
        send_attempts=9,
        last_send_attempt_at=now - timedelta(minutes=16),
    )

    sweep = unsent_messages_requeue(now=now, enqueue=lambda pk: None)

    assert sweep.requeued == [idle.pk]
    assert retrying.pk not in sweep.requeued


# --- the admin filter --------------------------------------------------------------------------


@pytest.fixture
def sends(session: Session) -> dict[str, Message]:
    other = recipes.session.make(instance=session.instance, customer_phone="5511911112222")
    quiet = recipes.session.make(instance=session.instance, customer_phone="5511933334444")
    sent = reply(quiet, age=timedelta(minutes=1), delivery_status="delivered", wa_message_id="w1")
    return {
        "expired": reply(
            session,
            age=timedelta(hours=25),
            delivery_status=DeliveryStatus.FAILED,
            delivery_error_title=WINDOW_EXPIRED,
        ),
        "refused": reply(
            other, age=timedelta(hours=1), delivery_status=DeliveryStatus.FAILED, wa_message_id="w2"
        ),
        "retrying": reply(other, age=timedelta(minutes=30), send_attempts=3),
        "never_tried": reply(quiet, age=timedelta(seconds=5)),
        "sent": sent,
    }


def listed(client: Client, url: str) -> list[int]:
    """The ids of the rows of a changelist at `url` (/admin/conversations/<model>/...)."""
    model = url.split("/")[3]
    response = client.get(url)
    assert response.status_code == 200
    return sorted(
        {int(pk) for pk in re.findall(ROW.format(model=model), response.content.decode())}
    )


@pytest.mark.parametrize(
    ("value", "expected"),
    [("failed", ["expired", "refused"]), ("retrying", ["retrying"])],
)
def test_the_message_log_lists_the_failed_sends(
    admin_client: Client, sends: dict[str, Message], value: str, expected: list[str]
) -> None:
    ids = listed(admin_client, f"/admin/conversations/message/?failed_sends={value}")

    assert ids == sorted(sends[name].pk for name in expected)


@pytest.mark.parametrize(
    ("value", "phones"),
    [("failed", ["5511911112222", CUSTOMER_PHONE]), ("retrying", ["5511911112222"])],
)
def test_the_sessions_list_keeps_the_sessions_with_failed_sends(
    admin_client: Client, sends: dict[str, Message], value: str, phones: list[str]
) -> None:
    ids = listed(admin_client, f"/admin/conversations/session/?failed_sends={value}")

    assert ids == sorted(
        Session.objects.filter(customer_phone__in=phones).values_list("pk", flat=True)
    )


def test_the_filter_is_offered_in_portuguese_and_ignores_unknown_values(
    admin_client: Client, sends: dict[str, Message]
) -> None:
    page = admin_client.get("/admin/conversations/session/", HTTP_ACCEPT_LANGUAGE="pt-br")
    everything = listed(admin_client, "/admin/conversations/session/")

    assert "Por envios com falha" in page.content.decode()
    assert listed(admin_client, "/admin/conversations/session/?failed_sends=nope") == everything
