from io import StringIO

import pytest
from django.core.management import call_command
from model_bakery import baker
from pytest_django import DjangoCaptureOnCommitCallbacks

from conversations import publishers
from conversations.models import Instance, Message, WebhookDelivery
from tests.helpers.meta_payloads import Recorder, fixture_bytes

pytestmark = pytest.mark.django_db


def failed_delivery(body: bytes) -> WebhookDelivery:
    return baker.make(WebhookDelivery, raw_body=body, outcome="failed", error="RuntimeError: x")


@pytest.fixture
def turns(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    recorder = Recorder()
    monkeypatch.setattr(publishers, "enqueue_turn", recorder)
    return recorder


def run(*args: str) -> str:
    out = StringIO()
    call_command("reprocess_webhooks", *args, stdout=out)
    return out.getvalue()


def test_failed_deliveries_are_applied_again_and_reported(
    instance: Instance,
    turns: Recorder,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    recovered = failed_delivery(fixture_bytes("text"))
    still_bad = failed_delivery(b'{"entry": "nope"}')
    done = baker.make(WebhookDelivery, raw_body=fixture_bytes("image"), outcome="processed")

    with django_capture_on_commit_callbacks(execute=True):
        output = run()

    assert output.splitlines() == [
        f"delivery {recovered.pk}: processed",
        f"delivery {still_bad.pk}: failed",
        "Reprocessed 2 deliveries: 1 failed, 1 processed",
    ]
    recovered.refresh_from_db()
    assert (recovered.outcome, recovered.error, recovered.messages_count) == ("processed", "", 1)
    assert Message.objects.get().wa_message_id == "wamid.TEXT01"
    assert turns.calls == [Message.objects.get().session_id]
    done.refresh_from_db()
    assert done.outcome == "processed"


def test_only_the_given_ids_are_reprocessed(instance: Instance, turns: Recorder) -> None:
    first = failed_delivery(fixture_bytes("text"))
    failed_delivery(fixture_bytes("button"))

    output = run("--id", str(first.pk))

    assert output.splitlines()[-1] == "Reprocessed 1 deliveries: 1 processed"
    assert WebhookDelivery.objects.filter(outcome="failed").count() == 1


def test_nothing_to_reprocess(db: None) -> None:
    assert run() == "Reprocessed 0 deliveries.\n"
