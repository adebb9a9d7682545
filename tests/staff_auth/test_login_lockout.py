"""Password guessing on the admin login: 5 failures of one username from one address lock that pair
out for 15 minutes, whatever the password tried next; other staff on the same address, and the same
staff member elsewhere, still log in.
"""

import datetime as dt
import logging

import pytest
from axes.models import AccessAttempt
from django.contrib.auth.models import User
from django.test import Client, override_settings

from config.logging import EventFormatter

pytestmark = pytest.mark.django_db

LOGIN = "/admin/login/"
PASSWORD = "Senha-correta-2026!"
WRONG = "senha-errada-123"
OFFICE = "198.51.100.20"
HOME = "203.0.113.7"


@pytest.fixture
def alice() -> User:
    return User.objects.create_user("alice", password=PASSWORD, is_staff=True)


@pytest.fixture
def bob() -> User:
    return User.objects.create_user("bob", password=PASSWORD, is_staff=True)


def attempt(
    username: str, password: str, address: str = OFFICE, **extra: str
) -> tuple[int, Client]:
    client = Client()
    client.defaults.update(REMOTE_ADDR=address, **extra)  # the WSGI environ of every request
    response = client.post(LOGIN, {"username": username, "password": password, "next": "/admin/"})
    return response.status_code, client


def logged_in(client: Client) -> bool:
    return "_auth_user_id" in client.session


def lock_out(username: str, address: str = OFFICE, **extra: str) -> list[int]:
    return [attempt(username, WRONG, address, **extra)[0] for _ in range(5)]


def test_the_fifth_wrong_password_locks_out_and_then_the_right_one_is_refused(alice: User) -> None:
    assert lock_out("alice") == [200, 200, 200, 200, 429]

    status, client = attempt("alice", PASSWORD)

    assert status == 429
    assert not logged_in(client)


def test_the_lockout_page_is_the_admin_in_portuguese(alice: User) -> None:
    lock_out("alice")
    client = Client(REMOTE_ADDR=OFFICE)

    response = client.post(LOGIN, {"username": "alice", "password": PASSWORD})

    page = response.content.decode()
    assert response.status_code == 429
    assert "<title>Muitas tentativas de login | Atendimento WhatsApp</title>" in page
    assert (
        "Depois de 5 tentativas sem sucesso, o login com este usuário a partir do seu endereço "
        "fica bloqueado por 15 minutos."
    ) in page


def test_four_failures_do_not_lock_out(alice: User) -> None:
    assert [attempt("alice", WRONG)[0] for _ in range(4)] == [200, 200, 200, 200]

    status, client = attempt("alice", PASSWORD)

    assert status == 302
    assert logged_in(client)


def test_another_username_from_the_same_address_still_logs_in(alice: User, bob: User) -> None:
    lock_out("alice")

    status, client = attempt("bob", PASSWORD)

    assert status == 302
    assert client.session["_auth_user_id"] == str(bob.pk)


def test_the_same_username_from_another_address_still_logs_in(alice: User) -> None:
    lock_out("alice", OFFICE)

    status, client = attempt("alice", PASSWORD, HOME)

    assert status == 302
    assert logged_in(client)


def _age_attempts(by: dt.timedelta) -> None:
    for row in AccessAttempt.objects.all():
        row.attempt_time -= by
        row.save(update_fields=["attempt_time"])


def test_the_lockout_still_holds_just_before_the_cooloff_ends(alice: User) -> None:
    lock_out("alice")
    _age_attempts(dt.timedelta(minutes=14, seconds=50))

    status, client = attempt("alice", PASSWORD)

    assert status == 429
    assert not logged_in(client)


def test_the_lockout_expires_after_the_cooloff(alice: User) -> None:
    lock_out("alice")
    _age_attempts(dt.timedelta(minutes=15, seconds=1))

    status, client = attempt("alice", PASSWORD)

    assert status == 302
    assert logged_in(client)


def test_a_success_clears_the_failures_of_that_username_and_address(alice: User) -> None:
    assert [attempt("alice", WRONG)[0] for _ in range(4)] == [200] * 4
    assert attempt("alice", PASSWORD)[0] == 302

    assert [attempt("alice", WRONG)[0] for _ in range(4)] == [200] * 4
    assert AccessAttempt.objects.get().failures_since_start == 4


@override_settings(USE_X_FORWARDED_FOR=True)
def test_behind_the_proxy_the_address_is_the_one_the_proxy_wrote(alice: User, bob: User) -> None:
    """Every request comes from the proxy's 127.0.0.1; the entries a client puts before the
    proxy's own in X-Forwarded-For do not give a guesser a fresh address per attempt."""
    statuses = [
        attempt("alice", WRONG, "127.0.0.1", HTTP_X_FORWARDED_FOR=f"10.0.0.{n}, {HOME}")[0]
        for n in range(5)
    ]
    assert statuses == [200, 200, 200, 200, 429]
    assert list(AccessAttempt.objects.values_list("ip_address", flat=True)) == [HOME]

    assert attempt("alice", PASSWORD, "127.0.0.1", HTTP_X_FORWARDED_FOR=HOME)[0] == 429
    assert attempt("alice", PASSWORD, "127.0.0.1", HTTP_X_FORWARDED_FOR=OFFICE)[0] == 302


def test_without_the_proxy_setting_forwarded_headers_are_ignored(alice: User) -> None:
    for n in range(5):
        attempt("alice", WRONG, OFFICE, HTTP_X_FORWARDED_FOR=f"10.0.0.{n}")

    assert list(AccessAttempt.objects.values_list("ip_address", flat=True)) == [OFFICE]
    assert attempt("alice", PASSWORD, OFFICE, HTTP_X_FORWARDED_FOR=HOME)[0] == 429


def _lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    formatter = EventFormatter()
    return [
        formatter.format(record).split(" ", 3)[3]
        for record in caplog.records
        if record.name.startswith("staff_auth")
    ]


def test_failed_locked_out_and_successful_logins_are_logged_without_the_password(
    alice: User, bob: User, caplog: pytest.LogCaptureFixture
) -> None:
    failed = f"staff_auth.login_events staff_login_failed username=alice client_ip={OFFICE}"
    locked_out = (
        f"staff_auth.login_events staff_login_locked_out username=alice client_ip={OFFICE} "
        "failure_limit=5 cooloff_minutes=15"
    )
    with caplog.at_level(logging.INFO, logger="staff_auth"):
        attempt("alice", WRONG)
        attempt("bob", PASSWORD)
        for _ in range(4):
            attempt("alice", WRONG)
        attempt("alice", PASSWORD)

    lines = _lines(caplog)
    assert lines == [
        failed,
        f"staff_auth.login_events staff_login_succeeded user_id={bob.pk} username=bob "
        f"client_ip={OFFICE}",
        failed,
        failed,
        failed,
        # The 5th failure locks out; the right password then is refused as locked out, too.
        locked_out,
        failed,
        locked_out,
        failed,
    ]
    every_record = "\n".join(
        str(record.__dict__) for record in caplog.records if record.name.startswith("staff_auth")
    )
    assert WRONG not in every_record
    assert PASSWORD not in every_record


def test_a_username_cannot_forge_log_lines(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="staff_auth"):
        attempt("eve\nINFO staff_login_succeeded " + "x" * 500, WRONG)

    (line,) = _lines(caplog)
    assert "\n" not in line
    assert line.startswith('staff_auth.login_events staff_login_failed username="eve?INFO ')
    assert len(line) < 300


def test_a_staff_session_lasts_twelve_hours(alice: User) -> None:
    status, client = attempt("alice", PASSWORD)

    assert status == 302
    assert client.cookies["sessionid"]["max-age"] == 12 * 60 * 60


def test_a_username_longer_than_any_account_is_refused_and_counted_not_a_server_error() -> None:
    """Axes keeps the username in a 255-character column; PostgreSQL refused a longer one and the
    login page answered 500."""
    long_name = "a" * 1000

    assert lock_out(long_name) == [200, 200, 200, 200, 429]
    assert list(AccessAttempt.objects.values_list("username", flat=True)) == ["a" * 150]


@override_settings(USE_X_FORWARDED_FOR=True)
def test_a_forwarded_value_that_is_no_address_falls_back_to_the_peer(alice: User) -> None:
    statuses = [
        attempt("alice", WRONG, OFFICE, HTTP_X_FORWARDED_FOR="10.0.0.1, não-é-ip")[0]
        for _ in range(5)
    ]

    assert statuses == [200, 200, 200, 200, 429]
    assert list(AccessAttempt.objects.values_list("ip_address", flat=True)) == [OFFICE]
