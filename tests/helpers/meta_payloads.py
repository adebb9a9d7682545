"""Meta's webhook payloads for the tests (the JSON files in tests/helpers/meta_payloads/) and how
a test posts them: signed as Meta signs them, to the webhook. Also the enqueue `Recorder`, the
TTL's boundary cases and hypothesis strategies that mutate a payload."""

import copy
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from hypothesis import strategies as st

from tests.baker_recipes import CUSTOMER_PHONE as CUSTOMER_PHONE
from tests.baker_recipes import CUSTOMER_USER_ID as CUSTOMER_USER_ID
from tests.baker_recipes import PHONE_NUMBER_ID as PHONE_NUMBER_ID
from whatsapp.signature import compute_signature

# The fixtures' number and customer (PHONE_NUMBER_ID, CUSTOMER_PHONE, CUSTOMER_USER_ID, imported
# above) are the recipes' defaults.
FIXTURES = Path(__file__).parent / "meta_payloads"
APP_SECRET = "test-app-secret"
WEBHOOK_URL = "/webhooks/whatsapp/"


def load_fixture(name: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text())
    return document


def fixture_bytes(name: str) -> bytes:
    return (FIXTURES / f"{name}.json").read_bytes()


def encode(document: Any) -> bytes:
    return json.dumps(document).encode()


def signed_post(client: Client, body: bytes, **extra: str) -> Any:
    """POST `body` the way Meta does: JSON with its X-Hub-Signature-256."""
    headers: dict[str, Any] = {
        "HTTP_X_HUB_SIGNATURE_256": compute_signature(body=body, secret=APP_SECRET)
    }
    headers.update(extra)
    return client.generic("POST", WEBHOOK_URL, body, content_type="application/json", **headers)


def ttl_boundary_cases(ttl: timedelta) -> list[Any]:
    """(how long ago the turn was queued, whether it is queued again) around the TTL."""
    micro = timedelta(microseconds=1)
    return [
        pytest.param(ttl - micro, False, id="1 µs younger than the TTL"),
        pytest.param(ttl, False, id="exactly the TTL old"),
        pytest.param(ttl + micro, True, id="1 µs older than the TTL"),
    ]


class Recorder:
    """An enqueue collaborator that remembers what it was asked to enqueue."""

    def __init__(self) -> None:
        self.calls: list[int] = []

    def __call__(self, object_id: int) -> None:
        self.calls.append(object_id)


# --- hypothesis strategies -------------------------------------------------------------------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=25,
)


KeyPath = tuple[str | int, ...]  # the keys and indexes from the document's root to one node


def _paths(node: Any, prefix: KeyPath = ()) -> list[KeyPath]:
    paths = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            paths += _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            paths += _paths(value, (*prefix, index))
    return paths


_BATCH = load_fixture("batch")


def _mutate(mutations: list[tuple[KeyPath, Any]]) -> dict[str, Any]:
    document = copy.deepcopy(_BATCH)
    for path, value in mutations:
        node: Any = document
        try:
            for key in path[:-1]:
                node = node[key]
            node[path[-1]] = value
        except (KeyError, IndexError, TypeError):
            continue  # an earlier mutation replaced a parent of this path
    return document


# The batch fixture with one to three of its fields (at any depth) replaced by arbitrary JSON.
MUTATED_BATCHES = st.lists(
    st.tuples(st.sampled_from(_paths(_BATCH)[1:]), JSON), min_size=1, max_size=3
).map(_mutate)
