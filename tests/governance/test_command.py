"""`python manage.py replay`: the same replay from the terminal, stored as a run."""

import json
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from conversations.models import Instance
from governance.models import ReplayRun
from tests.fakes.openai_server import FakeOpenAIServer
from tests.helpers.recorded_calls import GREETING, conversation, draft, record_turn

pytestmark = pytest.mark.django_db


def replay_command(*args: str) -> str:
    out = StringIO()
    call_command("replay", *args, stdout=out)
    return out.getvalue()


def test_json_prints_one_object_with_the_totals(
    instance: Instance, model: FakeOpenAIServer, django_capture_on_commit_callbacks: Any
) -> None:
    for text in ("Oi", "Bom dia", "Olá"):
        record_turn(
            conversation(instance),
            text,
            GREETING,
            model=model,
            capture=django_capture_on_commit_callbacks,
        )
    override = draft()
    model.reset()
    model.queue_text('{"s":98,"motivo":"outro"}', input_tokens=2000, output_tokens=50)
    model.queue_text(GREETING, input_tokens=2000, output_tokens=50)

    output = replay_command("--override", str(override.pk), "--last", "2", "--json")

    run = ReplayRun.objects.get()
    assert json.loads(output) == {
        "run_id": run.pk,
        "status": "done",
        "detail": "",
        "calls_selected": 2,
        "calls": 2,
        "code_changed": 1,
        "state_changed": 0,
        "handoff_changed": 1,
        "contract_errors": 0,
        "repaired": 0,
        "provider_errors": 0,
        "tokens_input": 4000,
        "cached_tokens": 0,
        "tokens_output": 100,
        "cost_usd": 0.00066,
    }
    assert output.count("\n") == 1  # one line
    assert run.override == override


def test_without_json_it_prints_a_row_per_call_and_the_totals(
    instance: Instance, model: FakeOpenAIServer, django_capture_on_commit_callbacks: Any
) -> None:
    call = record_turn(
        conversation(instance),
        "Oi",
        GREETING,
        model=model,
        capture=django_capture_on_commit_callbacks,
    )
    override = draft()
    model.reset()
    model.queue_text('{"s":98,"motivo":"outro"}')

    output = replay_command("--override", str(override.pk))

    lines = output.splitlines()
    assert lines[1].split() == [str(call.pk), "1→98", "—→—", "—→model_requested", "valid"]
    assert "status: done" in lines
    assert "code_changed: 1" in lines


def test_an_unknown_override_is_a_clear_error(db: None) -> None:
    with pytest.raises(CommandError, match="no prompt override with id 999"):
        replay_command("--override", "999")
    assert ReplayRun.objects.count() == 0


@pytest.mark.parametrize("last", ["0", "²", "-1"])
def test_a_bad_last_is_a_clear_error(db: None, last: str) -> None:
    override = draft()
    with pytest.raises(CommandError, match=f"--last takes a positive whole number, not '{last}'"):
        replay_command("--override", str(override.pk), "--last", last)
