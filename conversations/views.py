"""The WhatsApp Cloud API webhook: ``GET`` verification and ``POST`` deliveries.

The POST checks, in this order, without touching the database: the declared size (413, before
reading), the real size (413), the ``X-Hub-Signature-256`` HMAC (403); then one use-case call
stores and applies the body (or, when it is big, stores it and enqueues its application): 400
when it is not JSON, 200 otherwise — a payload we cannot parse or apply is kept and marked
failed, never a 500. The one other answer is 503, when the database refuses even the raw body:
Meta then delivers it again (it retries for up to 7 days).
"""

import logging

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.utils.crypto import constant_time_compare
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods

from conversations import publishers
from conversations.inbound import tasks as inbound_tasks
from conversations.inbound.deliveries import (
    DeliveryNotStored,
    stored_headers,
    webhook_delivery_receive,
)
from whatsapp.payload import MalformedBodyError
from whatsapp.signature import SIGNATURE_HEADER, signature_is_valid

logger = logging.getLogger(__name__)


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
            enqueue_turn=publishers.enqueue_turn,
            enqueue_send=publishers.enqueue_send,
            enqueue_delivery=inbound_tasks.enqueue_delivery,
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
