"""Staff logins as log events: `staff_login_succeeded`, `staff_login_failed` and
`staff_login_locked_out`, with the username and the client address, never the password.

Django sends the failure signal with the password already replaced; only the username is taken
from the credentials here, cut to the username's length and printable characters, because it is
typed by whoever is guessing.
"""

import logging
from typing import Any

from axes.signals import user_locked_out
from django.conf import settings
from django.contrib.auth.signals import user_logged_in, user_login_failed
from django.http import HttpRequest

from staff_auth.attempts import client_ip_address

logger = logging.getLogger(__name__)
USERNAME_MAX_CHARS = 150


def printable_username(value: Any) -> str:
    text = str(value or "")[:USERNAME_MAX_CHARS]
    return "".join(ch if ch.isprintable() else "?" for ch in text)


def _client(request: HttpRequest | None) -> str:
    return (client_ip_address(request) if request is not None else None) or "-"


def on_login_succeeded(sender: Any, request: HttpRequest | None, user: Any, **kwargs: Any) -> None:
    logger.info(
        "staff_login_succeeded",
        extra={
            "user_id": user.pk,
            "username": printable_username(user.get_username()),
            "client_ip": _client(request),
        },
    )


def on_login_failed(
    sender: Any, credentials: dict[str, Any], request: HttpRequest | None = None, **kwargs: Any
) -> None:
    logger.warning(
        "staff_login_failed",
        extra={
            "username": printable_username(credentials.get("username")),
            "client_ip": _client(request),
        },
    )


def on_locked_out(
    sender: Any, request: HttpRequest | None, username: Any, ip_address: Any, **kwargs: Any
) -> None:
    logger.warning(
        "staff_login_locked_out",
        extra={
            "username": printable_username(username),
            "client_ip": ip_address or "-",
            "failure_limit": settings.AXES_FAILURE_LIMIT,
            "cooloff_minutes": int(settings.AXES_COOLOFF_TIME.total_seconds() // 60),
        },
    )


def connect() -> None:
    user_logged_in.connect(on_login_succeeded, dispatch_uid="staff_login_succeeded")
    user_login_failed.connect(on_login_failed, dispatch_uid="staff_login_failed")
    user_locked_out.connect(on_locked_out, dispatch_uid="staff_login_locked_out")
