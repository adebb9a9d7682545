"""The WhatsApp Cloud API webhook: ``GET`` verification and ``POST`` deliveries.

The POST checks, in this order, without touching the database: the declared size (413, before
reading), the real size (413), the ``X-Hub-Signature-256`` HMAC (403); then one use-case call
stores and applies the body (or, when it is big, stores it and enqueues its application): 400
when it is not JSON, 200 otherwise — a payload we cannot parse or apply is kept and marked
failed, never a 500. The one other answer is 503, when the database refuses even the raw body:
Meta then delivers it again (it retries for up to 7 days).
"""

import logging

from celery import Task
from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.utils.crypto import constant_time_compare
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods

from conversations.inbound import DeliveryNotStored, stored_headers, webhook_delivery_receive
from conversations.whatsapp.payload import MalformedBodyError
from conversations.whatsapp.signature import SIGNATURE_HEADER, signature_is_valid
from conversations.whatsapp.tasks import send_message

logger = logging.getLogger(__name__)


def enqueue_turn(session_id: int) -> None:
    """Enqueue the session's turn (the pipeline's task, imported when first needed)."""
    from conversations.pipeline_tasks import process_session

    _publish(process_session, session_id)


def enqueue_send(message_id: int) -> None:
    _publish(send_message, message_id)


def enqueue_delivery(delivery_id: int) -> None:
    """Enqueue the application of a delivery too big to apply within the request."""
    from conversations.inbound.tasks import apply_webhook_delivery

    _publish(apply_webhook_delivery, delivery_id)


def _publish(task: Task, object_id: int) -> None:
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
        task.apply_async(
            (object_id,),
            producer=producer,
            argsrepr=f"({object_id},)",
            kwargsrepr="{}",
            declare=[],
        )


@csrf_exempt
@require_http_methods(["GET", "POST"])
def whatsapp_webhook(request: HttpRequest) -> HttpResponse:
    if request.method == "GET":
        return _verify(request)
    return _receive(request)


def _verify(request: HttpRequest) -> HttpResponse:
    expected = settings.WHATSAPP_VERIFY_TOKEN
    token = request.GET.get("hub.verify_token", "")
    challenge = request.GET.get("hub.challenge")
    if (
        request.GET.get("hub.mode") == "subscribe"
        and expected
        and challenge is not None
        and constant_time_compare(token, expected)
    ):
        return HttpResponse(challenge, content_type="text/plain")
    logger.warning("whatsapp_webhook_verify_refused")
    return HttpResponse(status=403)


def _receive(request: HttpRequest) -> HttpResponse:
    limit = settings.WEBHOOK_MAX_BODY_BYTES
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return HttpResponse(status=400)
    if declared > limit:
        logger.warning("whatsapp_webhook_too_large", extra={"declared_bytes": declared})
        return HttpResponse(status=413)
    # Never read more than the limit, whatever the header said.
    body = request.read(limit + 1)
    if len(body) > limit:
        logger.warning("whatsapp_webhook_too_large", extra={"bytes": len(body)})
        return HttpResponse(status=413)
    if not signature_is_valid(
        body=body,
        header=request.headers.get(SIGNATURE_HEADER),
        secret=settings.WHATSAPP_APP_SECRET,
    ):
        logger.warning("whatsapp_webhook_bad_signature", extra={"bytes": len(body)})
        return HttpResponse(status=403)
    try:
        webhook_delivery_receive(
            raw_body=body,
            headers=stored_headers(request.headers),
            enqueue_turn=enqueue_turn,
            enqueue_send=enqueue_send,
            enqueue_delivery=enqueue_delivery,
        )
    except MalformedBodyError:
        logger.warning("whatsapp_webhook_malformed_json", extra={"bytes": len(body)})
        return HttpResponse(status=400)
    except DeliveryNotStored:
        return HttpResponse(status=503)
    except Exception:
        # Unreachable by design (the use case contains its failures); if it ever happens, the
        # body's fate is unknown, so ask Meta to deliver it again.
        logger.exception("whatsapp_webhook_unexpected_error")
        return HttpResponse(status=503)
    return HttpResponse("ok", content_type="text/plain")
