"""Fixtures of the inbound tests (their helpers are tests/helpers/inbound.py)."""

import pytest
from pytest_django import DjangoCaptureOnCommitCallbacks

from tests.helpers.inbound import Receiver


@pytest.fixture
def receive(django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks) -> Receiver:
    return Receiver(django_capture_on_commit_callbacks)
