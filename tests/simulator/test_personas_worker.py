"""A persona run through a REAL Celery worker (the settings' threads pool) on Redis and
PostgreSQL: the run started as the admin starts it is played by the worker's
``governance.persona_run`` task, the customer and the agents answered by the scripted fake model
(tests/simulator/personas_script.py, a real HTTP server on 127.0.0.1 reached by the worker's
openai SDK). Both personas end as expected, and nothing reaches the Graph API."""

from pathlib import Path
from uuid import uuid4

import pytest

from governance.models import Persona, PersonaGoal, PersonaResult, PersonaRun, ReplayStatus
from simulator.personas import persona_run_start
from tests.fakes.graph_server import FakeGraphAPI
from tests.fakes.openai_server import FakeOpenAIServer
from tests.helpers.broker import BrokerClient, IsolatedBroker
from tests.helpers.processes import (
    celery_worker_command,
    database_url,
    project_env,
    start,
    stop,
    wait_for,
)
from tests.simulator import personas_script as script
from tests.simulator.test_personas import WANTS_HUMAN, draft, farmer, world  # noqa: F401

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]


def test_a_worker_plays_a_persona_run_to_its_report(
    world: FakeOpenAIServer,  # noqa: F811 (the fixture imported above)
    fake_graph: FakeGraphAPI,
    isolated_broker: IsolatedBroker,
    tmp_path: Path,
) -> None:
    lead = farmer()
    human = Persona.objects.create(
        title="Quer uma pessoa",
        description=WANTS_HUMAN,
        goal=PersonaGoal.HANDOFF,
        expected_handoff_reason="model_requested",
    )
    run = persona_run_start(override=draft(script.GOOD_DRAFT), persona_ids=[lead.pk, human.pk])
    env = project_env(
        broker=isolated_broker,
        DATABASE_URL=database_url(),
        OPENAI_BASE_URL=world.base_url,
        WHATSAPP_API_BASE_URL=fake_graph.base_url,
        WHATSAPP_ACCESS_TOKEN="test-access-token",
        OPENAI_MODEL_PERSONA=script.PERSONA_MODEL,
        OPENAI_MODEL_TRIAGE=script.TRIAGE_MODEL,
        OPENAI_MODEL_QUALIFICATION=script.QUALIFICATION_MODEL,
        OPENAI_MODEL_COLLECTION=script.COLLECTION_MODEL,
        OPENAI_MODEL_SUMMARY=script.SUMMARY_MODEL,
        LLM_RETRY_MAX="0",
        REPLAY_MAX_COST_USD="1.0",
        WORKER_CONFIG_CACHE_SECONDS="0",
    )
    worker = start(
        celery_worker_command(f"persona-test-{uuid4().hex[:8]}@localhost"),
        env=env,
        log=tmp_path / "worker.log",
    )
    try:
        BrokerClient(isolated_broker).send("governance.persona_run", run.pk, queue="replays")
        wait_for(
            lambda: PersonaRun.objects.filter(pk=run.pk, finished_at__isnull=False).exists(),
            timeout=120,
            what="the persona run's end",
        )
    finally:
        stop(worker)

    run.refresh_from_db()
    assert (run.status, run.personas_done, run.reached, run.failed) == (ReplayStatus.DONE, 2, 2, 0)
    assert sorted(PersonaResult.objects.values_list("outcome", "reached")) == [
        ("handoff", True),
        ("lead", True),
    ]
    assert fake_graph.requests == []
