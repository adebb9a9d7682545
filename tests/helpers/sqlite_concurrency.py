"""Staff actions two at a time on a file-based SQLite database, each in a thread of its own, as
two staff clicks reach two server threads. Run by tests/support/test_sqlite_concurrency.py
in a subprocess (``python -m tests.helpers.sqlite_concurrency``, ``DATABASE_URL`` pointing
at a file): the suite's own SQLite database is in memory, where SQLite locks tables, not the file,
and no busy timeout applies. Prints one JSON list: what each action answered, round by round."""

import json
import threading
from collections.abc import Callable
from functools import partial
from typing import Any

import django

ROUNDS = 10


def main() -> None:
    django.setup()
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.db import connection
    from django.utils import timezone

    from agents.states import SessionState
    from conversations.models import Instance, Session
    from support.staff_actions import (
        StaffActionRefused,
        session_close,
        session_take_over,
    )

    call_command("migrate", verbosity=0)
    ana = User.objects.create_superuser("ana", password="x")
    bruno = User.objects.create_superuser("bruno", password="x")
    instance = Instance.objects.create(phone_number_id="100000000000001", name="Lab")
    connection.close()
    answers: list[str] = []

    def act(barrier: threading.Barrier, action: Callable[[], Any]) -> None:
        try:
            barrier.wait()
            outcome = action()
            answers.append("changed" if outcome.changed else "unchanged")
        except StaffActionRefused:
            answers.append("refused")
        except Exception as exc:  # what the test must never see: "database is locked"
            answers.append(f"{type(exc).__name__}: {exc}")
        finally:
            connection.close()

    for round_ in range(ROUNDS):
        session = Session.objects.create(
            instance=instance,
            customer_phone=f"55119000{round_:05d}",
            state=SessionState.QUALIFYING.value,
        )
        connection.close()
        barrier = threading.Barrier(2)
        now = timezone.now()
        take_over = partial(session_take_over, session_id=session.pk, user=ana, now=now)
        close = partial(session_close, session_id=session.pk, user=bruno, now=now)
        threads = [threading.Thread(target=act, args=(barrier, run)) for run in (take_over, close)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    print(json.dumps(answers))


if __name__ == "__main__":
    main()
