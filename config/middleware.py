"""Project middleware.

`NulFreeQueryStringMiddleware`: NUL characters are removed from the query string's names and values
before any view reads ``request.GET``. PostgreSQL refuses NUL in text (``DataError``), so
``?state=%00`` or ``?q=%00`` turned every admin changelist — filters, search, the autocomplete —
into a 500 (docs/operations.md, Admin robustness); no legitimate parameter carries one. Once, here,
rather than in each admin and filter (Django's own, other apps', the ones to come). A NUL in the
path (an object id such as ``%00/change/``, which a text primary key would pass to PostgreSQL) is
answered 404: no URL of the project contains one.

`AdminActionSelectionMiddleware`: an admin action's selected ids are checked against the
model's primary key before the changelist filters by them.

`BidiControlsVisibleMiddleware`: the bidi controls in a page are shown, not applied.
"""

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from django.contrib import messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.core.exceptions import ValidationError
from django.db.models import Model
from django.http import (
    HttpRequest,
    HttpResponse,
    HttpResponseNotFound,
    HttpResponseRedirect,
    QueryDict,
)
from django.utils.translation import gettext as _

from compat.django_private import freeze, model_admin_of

if TYPE_CHECKING:
    # Declared by django-stubs only: the type of request.GET.
    from django.http.request import _ImmutableQueryDict


class NulFreeQueryStringMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if "\x00" in request.path_info:
            return HttpResponseNotFound()
        query = request.META.get("QUERY_STRING", "")
        if "%00" in query or "\x00" in query:
            request.GET = without_nul(request.GET)
        return self.get_response(request)


def without_nul(query: QueryDict) -> "_ImmutableQueryDict":
    """A copy of `query` with NUL removed from every name and value (immutable, like GET)."""
    cleaned = QueryDict(mutable=True)
    for name, values in query.lists():
        cleaned.setlist(name.replace("\x00", ""), [value.replace("\x00", "") for value in values])
    return freeze(cleaned)


class AdminActionSelectionMiddleware:
    """An admin action posted with a selected id its model's primary key cannot hold
    (``_selected_action=1%00``, ``abc``, ``²``) goes back to the list with a message: Django's
    ``response_action`` filters ``pk__in`` the raw values, and the field's ``int()`` raised a
    ValueError, a 500 on every changelist with an action. One check for every admin (Django's,
    other apps', the ones to come), before the view runs."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_view(
        self,
        request: HttpRequest,
        view_func: Callable[..., HttpResponse],
        view_args: tuple[Any, ...],
        view_kwargs: dict[str, Any],
    ) -> HttpResponse | None:
        model_admin = model_admin_of(view_func)
        if request.method != "POST" or model_admin is None:
            return None
        selected = request.POST.getlist(ACTION_CHECKBOX_NAME)
        if all(_fits_primary_key(model_admin.model, value) for value in selected):
            return None
        messages.error(
            request, _("The selection is no longer valid. Choose the items again and retry.")
        )
        return HttpResponseRedirect(request.get_full_path())


def _fits_primary_key(model: type[Model], value: str) -> bool:
    if "\x00" in value:  # PostgreSQL refuses it in text, whatever the key's type
        return False
    try:
        model._meta.pk.to_python(value)
    except ValidationError:
        return False
    return True


# Unicode's bidirectional embedding, override and isolate controls (U+202A-U+202E,
# U+2066-U+2069), as UTF-8 bytes: ``\xe2\x80\xaa``-``\xae`` and ``\xe2\x81\xa6``-``\xa9``.
BIDI_CONTROLS = re.compile(rb"\xe2\x80[\xaa-\xae]|\xe2\x81[\xa6-\xa9]")


def bidi_controls_visible(html: bytes) -> bytes:
    """`html` (UTF-8) with each bidi control written as its code point, ``[U+202E]``."""
    return BIDI_CONTROLS.sub(lambda match: f"[U+{ord(match.group().decode()):04X}]".encode(), html)


class BidiControlsVisibleMiddleware:
    """Every HTML page shows the bidi controls in it as ``[U+202E]`` rather than applying them.

    A customer's WhatsApp name, a message, a collected value or a webhook body may carry a
    right-to-left override (U+202E) that reorders what follows it: "Maria", U+202E, "oãsiV"
    reads "Maria Visão", so a page would show staff a name or a text other than the one stored.
    Isolating each value (``<bdi>``) keeps the override from leaking into the page but still
    reorders the value itself; making the controls visible shows the text as it is. Once, on
    the rendered page, so every list column, title, breadcrumb, transcript and form of every
    admin shows it the same way (no page of the project means one). A form field holding one
    shows the marker, and saving it stores the marker: what staff see is what they save."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if (
            response.streaming
            or not response.get("Content-Type", "").startswith("text/html")
            or response.charset.lower() != "utf-8"
        ):
            return response
        content = response.content
        if BIDI_CONTROLS.search(content) is None:
            return response
        response.content = bidi_controls_visible(content)
        if response.has_header("Content-Length"):
            response["Content-Length"] = str(len(response.content))
        return response
