"""The domain's Prometheus metrics (conversations.prometheus) after real actions, read through
``/metrics``: a webhook delivery, sends to the fake Graph API, and the gauges computed from the
database at scrape time. The turns' and handoffs' are in tests/conversations/turns/."""

from datetime import UTC, datetime, timedelta
from uuid import uuid4

import pytest
from django.test import Client
from django.utils import timezone
from prometheus_client import CollectorRegistry, generate_latest
from pytest_django import DjangoAssertNumQueries, Settings

from conversations.models import ProviderCircuit, Session
from conversations.prometheus import DatabaseCollector
from conversations.sending.worker import send_message
from tests import baker_recipes as recipes
from tests.fakes.graph_server import FakeGraphAPI
from tests.helpers.conversation_rows import inbound, reply
from tests.helpers.meta_payloads import fixture_bytes, signed_post
from tests.helpers.metrics import TOKEN, increase, parse, scrape

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def metrics_token(settings: Settings) -> None:
    settings.METRICS_TOKEN = TOKEN


def test_a_webhook_delivery_is_counted_by_its_outcome(client: Client) -> None:
    recipes.instance.make()
    before = scrape(client)

    processed = signed_post(client, fixture_bytes("text"))
    failed = signed_post(client, b'{"object": "whatsapp_business_account", "entry": "x"}')

    assert (processed.status_code, failed.status_code) == (200, 200)
    assert increase(before, scrape(client), "lab_attendance_webhook_deliveries") == {
        'lab_attendance_webhook_deliveries_total{outcome="processed"}': 1.0,
        'lab_attendance_webhook_deliveries_total{outcome="failed"}': 1.0,
    }


@pytest.mark.usefixtures("eager_retries")
def test_sends_are_counted_by_outcome_and_graph_error_code(
    client: Client, fake_graph: FakeGraphAPI, session: Session
) -> None:
    before = scrape(client)
    sent = reply(session)
    fake_graph.respond_error(400, 131047, "Re-engagement message")
    refused = reply(session, "Outra")

    outcomes = [send_message.apply(args=(m.pk,)).get() for m in (refused, sent)]

    assert outcomes == ["failed", "sent"]
    assert increase(before, scrape(client), "lab_attendance_sends") == {
        'lab_attendance_sends_total{error_code="",outcome="sent"}': 1.0,
        'lab_attendance_sends_total{error_code="131047",outcome="failed"}': 1.0,
    }


NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def gauges(django_assert_num_queries: DjangoAssertNumQueries) -> dict[str, float]:
    registry = CollectorRegistry()
    registry.register(DatabaseCollector(now=NOW))
    with django_assert_num_queries(3):
        return parse(generate_latest(registry).decode())


def test_the_gauges_are_zero_on_an_idle_install(
    django_assert_num_queries: DjangoAssertNumQueries,
) -> None:
    assert gauges(django_assert_num_queries) == {
        "lab_attendance_oldest_pending_inbound_age_seconds{}": 0.0,
        "lab_attendance_leases_expired{}": 0.0,
    }


def test_the_gauges_read_the_pending_messages_the_leases_and_the_circuit(
    session: Session, django_assert_num_queries: DjangoAssertNumQueries
) -> None:
    inbound(session, "primeira", created_at=NOW - timedelta(seconds=95))
    inbound(session, "segunda", created_at=NOW - timedelta(seconds=10))
    inbound(session, "respondida", created_at=NOW - timedelta(hours=1), processed_at=NOW)
    recipes.session.make(instance=session.instance, lease_token=uuid4(), lease_expires_at=NOW)
    recipes.session.make(
        instance=session.instance, lease_token=uuid4(), lease_expires_at=NOW + timedelta(seconds=1)
    )
    ProviderCircuit.objects.create(name="openai", state="open", opened_at=timezone.now())

    assert gauges(django_assert_num_queries) == {
        "lab_attendance_oldest_pending_inbound_age_seconds{}": 95.0,
        "lab_attendance_leases_expired{}": 1.0,
        'lab_attendance_model_circuit_state{provider="openai",state="closed"}': 0.0,
        'lab_attendance_model_circuit_state{provider="openai",state="open"}': 1.0,
        'lab_attendance_model_circuit_state{provider="openai",state="half_open"}': 0.0,
    }


def test_a_simulated_conversation_s_pending_message_is_no_customer_waiting(
    session: Session, django_assert_num_queries: DjangoAssertNumQueries
) -> None:
    simulated = recipes.session.make(
        instance=session.instance, customer_phone="5500900000001", is_simulated=True
    )
    inbound(simulated, "simulada", created_at=NOW - timedelta(seconds=300))
    inbound(session, "real", created_at=NOW - timedelta(seconds=20))

    assert gauges(django_assert_num_queries) == {
        "lab_attendance_oldest_pending_inbound_age_seconds{}": 20.0,
        "lab_attendance_leases_expired{}": 0.0,
    }
