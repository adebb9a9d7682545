"""Fixtures of the inbound tests: the webhook's instance and known customer, the fake Graph API
(tests/conversations/whatsapp/conftest.py, beside the payload fixtures they replay)."""

from tests.conversations.whatsapp.conftest import (  # noqa: F401 (fixtures, by name)
    fake_graph,
    instance,
    known_customer,
)
