"""Fixtures of the conversation store, for every test folder (a plugin of tests/conftest.py):
the instance the webhook fixtures are addressed to, a conversation on it, the fixtures' known
customer, and eager retries. The rows come from the recipes in tests/baker_recipes.py; the fake
Graph API is the suite's (`fake_graph`, tests/conftest.py)."""

import pytest

from conversations.models import Instance, Session
from conversations.sending.worker import send_message
from tests import baker_recipes as recipes


@pytest.fixture
def instance(db: None) -> Instance:
    """The number the webhook fixtures are addressed to (recipes.PHONE_NUMBER_ID)."""
    return recipes.instance.make()


@pytest.fixture
def session(instance: Instance) -> Session:
    """An open conversation in TRIAGE of the fixtures' customer (recipes.CUSTOMER_PHONE)."""
    return recipes.session.make(instance=instance, customer_phone=recipes.CUSTOMER_PHONE)


@pytest.fixture
def known_customer(instance: Instance) -> Session:
    """The open session of the customer the fixtures' messages come from."""
    return recipes.known_customer.make(instance=instance)


@pytest.fixture
def eager_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    """Let eager tasks retry as a worker would (with propagation a retry raises instead)."""
    monkeypatch.setitem(send_message.app.conf, "task_eager_propagates", False)
