"""What django-axes counts a login attempt against: the client address
(`AXES_CLIENT_IP_CALLABLE`) and the username (`AXES_USERNAME_CALLABLE`).

Behind the reverse proxy every request reaches gunicorn from 127.0.0.1, so `REMOTE_ADDR` would
put every staff member on one address. With `USE_X_FORWARDED_FOR` the address is the LAST entry of
`X-Forwarded-For`: the one the proxy itself wrote (docs/operations.md, Production); entries before
it come from the client and are ignored, so a forged header cannot pick a fresh address per guess.
"""

import ipaddress
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import models
from django.http import HttpRequest


def client_ip_address(request: HttpRequest) -> str | None:
    if settings.USE_X_FORWARDED_FOR:
        forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "")
        last = forwarded.rsplit(",", 1)[-1].strip()
        try:
            return str(ipaddress.ip_address(last))
        except ValueError:
            pass  # not an address: the proxy did not write it
    return request.META.get("REMOTE_ADDR")


def attempt_username(request: HttpRequest, credentials: dict[str, Any] | None) -> str | None:
    """The username typed, cut to the longest a user can have.

    Axes stores it in a 255-character column: a longer one made PostgreSQL refuse the insert and
    the login page answer 500. No real account is longer than the model's field.
    """
    field = get_user_model().USERNAME_FIELD
    source: Any = credentials if credentials else request.POST
    username = source.get(field)
    if username is None:
        return None
    username_field = get_user_model()._meta.get_field(field)
    max_length = (
        username_field.max_length if isinstance(username_field, models.Field) else None
    ) or 150
    return str(username)[:max_length]
