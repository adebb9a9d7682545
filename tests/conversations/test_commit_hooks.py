"""conversations.commit_hooks: each after-commit hook runs, whatever the one before it did."""

import logging

import pytest
from django.db import transaction
from pytest_django import DjangoCaptureOnCommitCallbacks

from conversations.commit_hooks import AfterCommit, on_commit_call

pytestmark = pytest.mark.django_db


def publish(session_id: int) -> None:
    raise ConnectionRefusedError(f"broker down (session {session_id})")


def test_a_failing_hook_is_logged_by_name_and_the_hooks_after_it_still_run(
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
    caplog: pytest.LogCaptureFixture,
) -> None:
    ran: list[int] = []

    with django_capture_on_commit_callbacks(execute=True) as hooks, transaction.atomic():
        on_commit_call(publish, 7)
        on_commit_call(ran.append, 41)
        on_commit_call(ran.append, 42)

    assert ran == [41, 42]
    assert [hook.__qualname__ for hook in hooks] == [
        "publish(7)",
        "list.append(41)",
        "list.append(42)",
    ]
    [failure] = [r for r in caplog.records if r.getMessage() == "commit_hook_failed"]
    assert (failure.levelno, vars(failure)["hook"], vars(failure)["error"]) == (
        logging.ERROR,
        "publish(7)",
        "ConnectionRefusedError('broker down (session 7)')",
    )


def test_django_can_name_the_hook_that_a_partial_could_not() -> None:
    hook = AfterCommit(publish, 7)

    assert (hook.__qualname__, repr(hook)) == ("publish(7)", "<AfterCommit publish(7)>")
