"""The client address a login attempt is counted against (`AXES_CLIENT_IP_CALLABLE`).

Behind the reverse proxy every request reaches gunicorn from 127.0.0.1, so `REMOTE_ADDR` would
put every staff member on one address. With `USE_X_FORWARDED_FOR` the address is the LAST entry of
`X-Forwarded-For`: the one the proxy itself wrote (README, Production); entries before it come
from the client and are ignored, so a forged header cannot pick a fresh address per guess.
"""

from django.conf import settings
from django.http import HttpRequest


def client_ip_address(request: HttpRequest) -> str | None:
    if settings.USE_X_FORWARDED_FOR:
        forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "")
        last = forwarded.rsplit(",", 1)[-1].strip()
        if last:
            return last
    return request.META.get("REMOTE_ADDR")
