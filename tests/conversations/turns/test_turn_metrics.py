"""A turn's metrics (conversations.prometheus), read through ``/metrics`` after a real turn with the
fake model: the turn by outcome, its model call (latency, tokens, cost at the list prices), and a
handoff by reason."""

from typing import Any

import pytest
from django.test import Client
from pytest_django import Settings

from conversations.models import Instance, LLMCall
from conversations.turns.deps import PipelineConfig
from conversations.turns.run import session_process
from conversations.turns.tasks import build_pipeline_deps
from tests.fakes.openai_server import FakeOpenAIServer
from tests.helpers.metrics import TOKEN, increase, scrape
from tests.helpers.pipeline import DuringCall, Pipeline, inbound, make_session, pipeline

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("catalog")]
MODEL_CALL = 'agent="triagem",model="gpt-4o-mini"'


@pytest.fixture(autouse=True)
def metrics_token(settings: Settings) -> None:
    settings.METRICS_TOKEN = TOKEN
    settings.OPENAI_MODEL_TRIAGE = "gpt-4o-mini"  # a model with a list price


def test_a_turn_counts_itself_and_its_model_call(
    instance: Instance, capture: Any, client: Client
) -> None:
    session = make_session(instance)
    inbound(session, "Oi, bom dia")
    before = scrape(client)

    pipeline('{"s":1}Olá! Como posso ajudar?').run(session, capture=capture)

    after = scrape(client)
    # (labels sorted by name) The fake model answers 100 tokens in, 10 out, in 5 ms: 0.005 s, in the first bucket.
    assert increase(before, after, "lab_attendance_turns") == {
        'lab_attendance_turns_total{outcome="committed"}': 1.0
    }
    assert increase(before, after, "lab_attendance_model_call_tokens") == {
        "lab_attendance_model_call_tokens_total"
        '{agent="triagem",direction="input",model="gpt-4o-mini"}': 100.0,
        "lab_attendance_model_call_tokens_total"
        '{agent="triagem",direction="output",model="gpt-4o-mini"}': 10.0,
    }
    # (100 x 0.15 + 10 x 0.60) / 1 000 000 USD
    assert increase(before, after, "lab_attendance_model_call_cost") == {
        f"lab_attendance_model_call_cost_usd_total{{{MODEL_CALL}}}": 0.000021
    }
    seconds = increase(before, after, "lab_attendance_model_call_seconds")
    assert seconds[f"lab_attendance_model_call_seconds_count{{{MODEL_CALL}}}"] == 1.0
    assert seconds[f"lab_attendance_model_call_seconds_sum{{{MODEL_CALL}}}"] == 0.005
    assert (
        seconds[
            'lab_attendance_model_call_seconds_bucket{agent="triagem",le="0.25",model="gpt-4o-mini"}'
        ]
        == 1.0
    )
    assert (
        seconds[
            'lab_attendance_model_call_seconds_bucket{agent="triagem",le="+Inf",model="gpt-4o-mini"}'
        ]
        == 1.0
    )
    assert len(seconds) == 2 + 10  # count, sum, and every bucket (9 and +Inf)
    assert increase(before, after, "lab_attendance_handoffs") == {}


def test_a_turn_whose_prompt_was_cached_counts_and_prices_its_cached_tokens(
    instance: Instance, capture: Any, client: Client, openai_settings: FakeOpenAIServer
) -> None:
    session = make_session(instance)
    inbound(session, "Oi, bom dia")
    openai_settings.queue_text(
        '{"s":1}Olá! Como posso ajudar?', input_tokens=2000, cached_tokens=1536, output_tokens=10
    )
    before = scrape(client)

    with capture(execute=True):
        session_process(session_id=session.pk, deps=build_pipeline_deps(), config=PipelineConfig())

    after = scrape(client)
    call = LLMCall.objects.get(session=session)
    assert (call.tokens_input, call.cached_tokens, call.tokens_output) == (2000, 1536, 10)
    assert increase(before, after, "lab_attendance_model_call_cached_tokens") == {
        f"lab_attendance_model_call_cached_tokens_total{{{MODEL_CALL}}}": 1536.0
    }
    assert increase(before, after, "lab_attendance_model_call_tokens") == {
        "lab_attendance_model_call_tokens_total"
        '{agent="triagem",direction="input",model="gpt-4o-mini"}': 2000.0,
        "lab_attendance_model_call_tokens_total"
        '{agent="triagem",direction="output",model="gpt-4o-mini"}': 10.0,
    }
    # (464 x 0.15 + 1536 x 0.075 + 10 x 0.60) / 1 000 000 USD
    assert increase(before, after, "lab_attendance_model_call_cost") == {
        f"lab_attendance_model_call_cost_usd_total{{{MODEL_CALL}}}": 0.0001908
    }


class OutOfTime(Exception):
    """Stands for Celery's SoftTimeLimitExceeded."""


def test_a_handoff_is_counted_by_its_reason(
    instance: Instance, capture: Any, client: Client
) -> None:
    session = make_session(instance)
    inbound(session, "Oi")

    def deadline() -> None:
        raise OutOfTime

    before = scrape(client)

    Pipeline(llm=DuringCall('{"s":1}nunca', hooks={0: deadline})).run(
        session, capture=capture, deadline_errors=(OutOfTime,)
    )

    after = scrape(client)
    assert increase(before, after, "lab_attendance_handoffs") == {
        'lab_attendance_handoffs_total{reason="llm_timeout"}': 1.0
    }
    assert increase(before, after, "lab_attendance_turns") == {
        'lab_attendance_turns_total{outcome="committed"}': 1.0
    }
    assert increase(before, after, "lab_attendance_model_call") == {}
