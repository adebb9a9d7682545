"""A real delivery never finds a simulated session (`Session.is_simulated`): replayed through the
webhook view."""

from datetime import timedelta

import pytest
from django.test import Client
from pytest_django import DjangoCaptureOnCommitCallbacks

from conversations import publishers
from conversations.models import Direction, Instance, Message, Session, WebhookDelivery
from tests.helpers.inbound import T, make_session
from tests.helpers.meta_payloads import (
    CUSTOMER_PHONE,
    CUSTOMER_USER_ID,
    Recorder,
    fixture_bytes,
    signed_post,
)

pytestmark = pytest.mark.django_db

TEXT = "Olá, gostaria de um orçamento de análise de água."


@pytest.fixture
def turns(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    recorder = Recorder()
    monkeypatch.setattr(publishers, "enqueue_turn", recorder)
    monkeypatch.setattr(publishers, "enqueue_send", Recorder())
    return recorder


def inbound_texts(session: Session) -> list[str]:
    return list(
        Message.objects.filter(session=session, direction=Direction.INBOUND).values_list(
            "content", flat=True
        )
    )


def test_a_real_customer_s_message_opens_a_real_session_beside_the_simulated_one(
    client: Client,
    instance: Instance,
    turns: Recorder,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    simulated = make_session(instance, is_simulated=True)

    with django_capture_on_commit_callbacks(execute=True):
        response = signed_post(client, fixture_bytes("text"))

    assert response.status_code == 200
    real = Session.objects.get(is_simulated=False)
    assert (real.customer_phone, real.customer_user_id, real.state) == (
        CUSTOMER_PHONE,
        CUSTOMER_USER_ID,
        "TRIAGE",
    )
    assert (inbound_texts(real), inbound_texts(simulated)) == ([TEXT], [])
    simulated.refresh_from_db()
    assert (simulated.last_message_at, simulated.state) == (T - timedelta(minutes=5), "TRIAGE")
    assert turns.calls == [real.pk]
    assert WebhookDelivery.objects.get().outcome == "processed"


def test_with_both_open_the_message_lands_in_the_real_session(
    client: Client,
    instance: Instance,
    turns: Recorder,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    simulated = make_session(instance, is_simulated=True)
    real = make_session(instance)

    with django_capture_on_commit_callbacks(execute=True):
        response = signed_post(client, fixture_bytes("text"))

    assert response.status_code == 200
    assert (inbound_texts(real), inbound_texts(simulated)) == ([TEXT], [])
    assert Session.objects.count() == 2
    assert turns.calls == [real.pk]
