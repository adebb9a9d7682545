"""A small run of bench/latency.py's path on the real topology: gunicorn, a worker started with
no flags (the settings' threads pool), Redis (this test's keys) and PostgreSQL (this run's test
database), the bench's fake model (0.2 s per answer) and fake Graph API: ten customers' first
messages each get exactly one answer, and neither process holds more PostgreSQL connections
than its pool allows (DB_POOL_MAX_SIZE=3 here, for ten turns in flight)."""

from pathlib import Path

import pytest

from bench.latency import APP_SECRET, fakes_running, libpq_dsn, run_round, topology
from conversations.models import Direction, Instance, Message
from tests.helpers.broker import IsolatedBroker
from tests.helpers.processes import database_url, project_env
from tests.helpers.webhooks import PHONE_NUMBER_ID

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.redis,
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
]
POOL_MAX = 3


def test_ten_first_turns_get_one_answer_each_within_the_pool(
    tmp_path: Path, isolated_broker: IsolatedBroker
) -> None:
    Instance.objects.create(phone_number_id=PHONE_NUMBER_ID, name="Laboratório Demo")
    with fakes_running() as fakes:
        env = project_env(
            broker=isolated_broker,
            OPENAI_BASE_URL=fakes.model_url,
            WHATSAPP_API_BASE_URL=fakes.graph_url,
            WHATSAPP_ACCESS_TOKEN="test-access-token",
            WHATSAPP_APP_SECRET=APP_SECRET,
            ALLOWED_HOSTS="127.0.0.1",
            SECURE_SSL_REDIRECT="False",
            DB_POOL_MAX_SIZE=str(POOL_MAX),
        )
        with topology(env, logs=tmp_path, web_workers=1) as topo:
            result = run_round(
                label="test",
                fakes=fakes,
                topo=topo,
                dsn=libpq_dsn(database_url()),
                latency=0.2,
                customers=10,
                timeout=120,
            )

    assert (result.answered, result.duplicates) == (10, 0)
    assert fakes.model_calls == 10
    assert 1 <= result.worker_connections <= POOL_MAX
    assert 1 <= result.web_connections <= POOL_MAX
    assert (
        Message.objects.filter(direction=Direction.OUTBOUND, delivery_status="sent").count() == 10
    )
    assert Message.objects.filter(direction=Direction.INBOUND, processed_at=None).count() == 0
