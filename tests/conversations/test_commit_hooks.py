"""conversations.commit_hooks: each after-commit hook runs, whatever the one before it did."""

import logging

import pytest
from django.db import transaction
from pytest_django import DjangoCaptureOnCommitCallbacks

from conversations.announcements import handoff_committed, lead_created
from conversations.commit_hooks import AfterCommit, Announcement, on_commit_call

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


def test_an_announcement_calls_each_subscriber_once_in_order_inside_the_transaction(
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    heard: list[str] = []
    announcement: Announcement[int] = Announcement("written")
    announcement.subscribe(lambda value: heard.append(f"first {value}"))
    second = lambda value: on_commit_call(heard.append, f"after commit {value}")  # noqa: E731
    announcement.subscribe(second)
    announcement.subscribe(second)  # an app ready twice (tests) subscribes once

    with django_capture_on_commit_callbacks(execute=True) as hooks, transaction.atomic():
        announcement.announce(3)
        assert heard == ["first 3"]

    assert heard == ["first 3", "after commit 3"]
    assert len(hooks) == 1


def test_a_rolled_back_write_leaves_nothing_for_after_the_commit(
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    heard: list[int] = []
    announcement: Announcement[int] = Announcement("written")
    announcement.subscribe(lambda value: on_commit_call(heard.append, value))

    def write_that_fails() -> None:
        with transaction.atomic():
            announcement.announce(5)
            raise RuntimeError("the write failed")

    with django_capture_on_commit_callbacks(execute=True) as hooks:
        with pytest.raises(RuntimeError):
            write_that_fails()
        announcement.announce(6)

    assert heard == [6]
    assert len(hooks) == 1


def test_the_support_app_subscribes_the_alert_and_the_crm_delivery_when_ready() -> None:
    assert [f.__qualname__ for f in handoff_committed._subscribers] == ["handoff_alert_register"]
    assert [f.__qualname__ for f in lead_created._subscribers] == ["lead_delivery_register"]
