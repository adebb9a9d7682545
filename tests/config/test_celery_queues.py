"""Tasks go to their queue by name (CELERY_TASK_ROUTES): a reply's send never waits behind
other customers' turns; anything not listed goes to the default queue ``celery``, which the
real-worker tests' BrokerClient publishes to. A worker started without -Q consumes all six,
with the settings' pool (threads) and concurrency."""

from config.celery import app

QUEUE_OF = {
    "conversations.process_session": "turns",
    "conversations.apply_webhook_delivery": "turns",
    "conversations.send_message": "sends",
    "conversations.download_message_media": "sends",
    "conversations.generate_handoff_summary": "summaries",
    "conversations.requeue_expired_leases": "sweeps",
    "conversations.requeue_unsent_messages": "sweeps",
    "conversations.requeue_received_deliveries": "sweeps",
    "conversations.retry_stale_leads": "sweeps",
    "conversations.apply_retention": "sweeps",
    "conversations.sync_message_templates": "sweeps",
    "conversations.notify_handoff": "celery",
    "conversations.post_handoff_alert": "celery",
    "conversations.notify_note_mentions": "celery",
    "conversations.deliver_lead": "celery",
    "conversations.simulated_turn": "turns",
    "governance.replay_run": "replays",
    "governance.prompt_tests_run": "replays",
    "governance.fail_abandoned_replays": "sweeps",
    "governance.check_rollout_pauses": "sweeps",
    "governance.persona_run": "replays",
}


def test_every_task_is_routed_to_its_queue_by_name() -> None:
    routed = {name: app.amqp.router.route({}, name)["queue"].name for name in QUEUE_OF}

    assert routed == QUEUE_OF


def test_every_registered_task_of_the_project_has_a_known_queue() -> None:
    ours = sorted(name for name in app.tasks if name.startswith(("conversations.", "governance.")))

    assert [name for name in ours if name not in QUEUE_OF] == []


def test_a_worker_without_flags_consumes_every_queue_with_threads() -> None:
    assert sorted(queue.name for queue in app.conf.task_queues) == [
        "celery",
        "replays",
        "sends",
        "summaries",
        "sweeps",
        "turns",
    ]
    assert app.conf.task_default_queue == "celery"
    assert (app.conf.worker_pool, app.conf.worker_concurrency) == ("threads", 200)
