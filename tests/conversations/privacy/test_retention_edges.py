"""The LGPD retention deadlines tried at their edge: a conversation closed exactly
`RETENTION_DAYS` ago is kept, a second later it is anonymised; a webhook body received exactly
`WEBHOOK_BODY_RETENTION_DAYS` ago is kept, a second later it is emptied."""

from datetime import timedelta

import pytest
from django.utils import timezone
from pytest_django import Settings

from conversations.models import Instance, WebhookDelivery
from conversations.privacy.retention import closed_sessions_anonymise, webhook_bodies_delete
from tests import baker_recipes as recipes

pytestmark = pytest.mark.django_db

NOW = timezone.now()
S = timedelta(seconds=1)


@pytest.mark.parametrize(
    ("closed_ago", "anonymised"),
    [
        pytest.param(timedelta(days=365) - S, False, id="365 d - 1 s: kept"),
        pytest.param(timedelta(days=365), False, id="exactly 365 d: kept"),
        pytest.param(timedelta(days=365) + S, True, id="365 d + 1 s: anonymised"),
    ],
)
def test_a_conversation_is_anonymised_once_closed_more_than_365_days(
    settings: Settings, instance: Instance, closed_ago: timedelta, anonymised: bool
) -> None:
    settings.RETENTION_DAYS = 365
    session = recipes.session.make(
        instance=instance, state="CLOSED", customer_name="Maria Souza", closed_at=NOW - closed_ago
    )

    assert closed_sessions_anonymise(now=NOW) == (1 if anonymised else 0)

    session.refresh_from_db()
    assert (session.anonymised_at, session.customer_name) == (
        (NOW, "") if anonymised else (None, "Maria Souza")
    )


@pytest.mark.parametrize(
    ("received_ago", "emptied"),
    [
        pytest.param(timedelta(days=30) - S, False, id="30 d - 1 s: kept"),
        pytest.param(timedelta(days=30), False, id="exactly 30 d: kept"),
        pytest.param(timedelta(days=30) + S, True, id="30 d + 1 s: emptied"),
    ],
)
def test_a_webhook_body_is_emptied_once_received_more_than_30_days_ago(
    settings: Settings, received_ago: timedelta, emptied: bool
) -> None:
    settings.WEBHOOK_BODY_RETENTION_DAYS = 30
    delivery = WebhookDelivery.objects.create(
        raw_body=b'{"name": "Maria"}', headers={"x": "1"}, received_at=NOW - received_ago
    )

    assert webhook_bodies_delete(now=NOW) == (1 if emptied else 0)

    delivery.refresh_from_db()
    assert (bytes(delivery.raw_body), delivery.headers) == (
        (b"", {}) if emptied else (b'{"name": "Maria"}', {"x": "1"})
    )
