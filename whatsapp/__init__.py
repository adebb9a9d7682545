"""The WhatsApp Cloud API channel.

Pure core (no Django import): `payload` (webhook body -> typed events) and `signature`
(X-Hub-Signature-256). `client` talks to the Graph API with httpx and reads no settings either;
`tasks` holds the thin Celery tasks. The use cases live in `conversations.inbound` and
`conversations.sending`.
"""

from datetime import timedelta

# WhatsApp accepts free-form replies only within 24 hours of the customer's last message (the
# customer-service window); later, only approved templates.
CUSTOMER_SERVICE_WINDOW = timedelta(hours=24)
