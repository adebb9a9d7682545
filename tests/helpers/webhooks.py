"""Signed WhatsApp deliveries posted to a real server (gunicorn), for the fault-matrix tests and
bench/soak.py."""

import http.client
import json
import time

from whatsapp.signature import compute_signature

PHONE_NUMBER_ID = "100000000000001"
WEBHOOK_PATH = "/webhooks/whatsapp/"


def text_delivery(
    *, phone: str, wamid: str, text: str, timestamp: int | None = None, name: str = "Cliente"
) -> bytes:
    """One customer text, shaped as the Cloud API sends it."""
    value = {
        "messaging_product": "whatsapp",
        "metadata": {"display_phone_number": "5511999990000", "phone_number_id": PHONE_NUMBER_ID},
        "contacts": [{"profile": {"name": name}, "wa_id": phone}],
        "messages": [
            {
                "from": phone,
                "id": wamid,
                "timestamp": str(timestamp or int(time.time())),
                "type": "text",
                "text": {"body": text},
            }
        ],
    }
    document = {
        "object": "whatsapp_business_account",
        "entry": [{"id": "200000000000001", "changes": [{"value": value, "field": "messages"}]}],
    }
    return json.dumps(document).encode()


def post_delivery(port: int, body: bytes, *, secret: str, timeout: float = 30) -> int:
    """POST `body` signed with `secret`; the HTTP status (0 when the server did not answer)."""
    try:
        web = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        web.request(
            "POST",
            WEBHOOK_PATH,
            body=body,
            headers={
                "Content-Type": "application/json",
                "X-Hub-Signature-256": compute_signature(body=body, secret=secret),
            },
        )
        response = web.getresponse()
        response.read()
        return response.status
    except OSError:
        return 0


def healthy(port: int) -> bool:
    try:
        web = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
        web.request("GET", "/healthz")
        return web.getresponse().status == 200
    except OSError:
        return False
