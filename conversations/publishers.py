"""Publishing the webhook's work to Celery: a session's turn and a send (`publish`, which the
inbound tasks use for a big delivery's application too).

Shared by the webhook view, the delivery task (`conversations.inbound.tasks`) and the
`reprocess_webhooks` command, which pass them to the inbound use cases (called after the commit).
Callers read them from this module when they call (`publishers.enqueue_turn`), so a test
replaces each in one place.
"""

from typing import Any

from celery import Task

from conversations.sending.worker import send_message


def enqueue_turn(session_id: int) -> None:
    """Enqueue the session's turn (the pipeline's task, imported when first needed)."""
    from conversations.turns.tasks import process_session

    publish(process_session, session_id)


def enqueue_send(message_id: int) -> None:
    publish(send_message, message_id)


def publish(task: Task[[int], Any], object_id: int) -> None:
    """``task.delay(object_id)``, cheaper in CPU — the publish is the largest single
    cost of a webhook request (about 0.5-1 ms on the 2-core bench machine):

    - publishing still goes through ``connection.ensure`` with the ``task_publish_retry``
      policy, which revives the connection after a broker restart;
    - ``argsrepr``/``kwargsrepr`` are given, exactly as Celery would render them, so it does not
      run its `saferepr` over the arguments;
    - ``declare=[]``: the default queue is reached through the anonymous direct exchange (the
      routing key is the queue name), so there is nothing to declare; kombu would otherwise copy
      and bind the queue entity before every publish only to find it in its declared cache. A
      route to another exchange type would need its queue declared (here or by the worker).

    Left as is: kombu's Redis transport builds a new redis-py client (about 0.1 ms) for every
    publish, and the message itself is Celery's own (`app.amqp`), never built by hand.
    """
    if task.app.conf.task_always_eager:
        task.delay(object_id)
        return
    # Taken from Celery's pool for this publish only: a producer held per thread would block
    # the (broker_pool_limit + 1)-th thread of a threaded server forever, for ~0.03 ms saved.
    with task.app.producer_or_acquire() as producer:
        # Celery passes these options on to the message and the publish (`**options`);
        # celery-types declares only the common ones.
        task.apply_async(  # type: ignore[call-arg]
            (object_id,),
            producer=producer,
            argsrepr=f"({object_id},)",
            kwargsrepr="{}",
            declare=[],
        )
