"""Work run after a transaction commits (publishing a task), one hook per piece of work.

`on_commit_call(func, arg)` registers ``func(arg)`` with ``transaction.on_commit(...,
robust=True)`` as an `AfterCommit` hook. Two things go wrong with a bare ``functools.partial``
there: when the call raises (the broker is down, so the publish fails), Django's robust handler
logs ``func.__qualname__``, which a partial does not have — the resulting ``AttributeError``
escapes after the commit, the turn is reported failed although it committed, and every hook
registered after it (the other parts' sends, the summary) is dropped with it. An `AfterCommit`
has a ``__qualname__`` naming the call (``_send(42)``), and it catches and logs its own failure
(event ``commit_hook_failed``), so each hook is attempted whatever the others did. What a failed
publish leaves behind is recovered by the beat sweeps (`conversations.sweeps`: unsent replies;
`conversations.lease`: a turn whose publish failed).
"""

import logging
from collections.abc import Callable
from typing import Generic, TypeVar

from django.db import transaction

logger = logging.getLogger(__name__)

T = TypeVar("T")


class AfterCommit(Generic[T]):
    """``func(arg)`` as an on-commit hook that Django can name and that never raises."""

    def __init__(self, func: Callable[[T], object], arg: T) -> None:
        self.func = func
        self.arg = arg
        name = getattr(func, "__qualname__", None) or type(func).__qualname__
        # Django's robust handler (and its test capture) log the hook by this attribute.
        self.__qualname__ = f"{name}({arg!r})"

    def __call__(self) -> None:
        try:
            self.func(self.arg)
        except Exception as exc:
            # Whatever failed, the hooks after this one still run; the sweeps recover this one.
            logger.exception(
                "commit_hook_failed", extra={"hook": self.__qualname__, "error": repr(exc)}
            )

    def __repr__(self) -> str:
        return f"<AfterCommit {self.__qualname__}>"


def on_commit_call(func: Callable[[T], object], arg: T) -> None:
    """Run ``func(arg)`` after the current transaction commits (see the module docstring)."""
    transaction.on_commit(AfterCommit(func, arg), robust=True)


class Announcement(Generic[T]):
    """Something the store writes that apps above it react to, without the store importing
    them. `announce` calls each subscriber (registered from its app's ``AppConfig.ready``) at
    once, inside the writer's transaction, in the order they subscribed; a subscriber that has
    work to do registers it for after the commit (`on_commit_call`), so a rolled-back write
    announces nothing."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._subscribers: list[Callable[[T], object]] = []

    def subscribe(self, func: Callable[[T], object]) -> None:
        if func not in self._subscribers:
            self._subscribers.append(func)

    def announce(self, value: T) -> None:
        for func in self._subscribers:
            func(value)
